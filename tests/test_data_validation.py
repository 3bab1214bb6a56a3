"""Up-front data validation: broken images and labels are reported (file, line, reason) and skipped."""
import logging
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from conftest import asset
from helpers import run_tool
from yolo.data import SHAPE_NAMES, YoloDataset, load_data_config
from yolo.data.validation import read_label_file
from yolo.errors import DataError
from yolo.data import yolo_layout
from yolo.data.cache import fallback_path

NAMES = ["a", "b", "c"]


pytestmark = pytest.mark.usefixtures("private_cache")


def _image(path: Path, h: int = 60, w: int = 80) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((h, w, 3), 90, np.uint8))
    return path


def _labels(root: Path, stem: str, text: str, split: str = "train") -> Path:
    path = root / "labels" / split / f"{stem}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _problems_by_file(report):
    return {(Path(p.path).name, p.line): p for p in report.problems}


def test_corrupt_images_and_broken_labels_are_reported_and_skipped(tmp_path):
    images = tmp_path / "images" / "train"
    _image(images / "good.jpg")
    _labels(tmp_path, "good", "0 0.5 0.5 0.2 0.2\n1 0.25 0.25 0.1 0.1\n")
    (images / "garbage.jpg").write_bytes(b"this is not a jpeg at all" * 10)
    _labels(tmp_path, "garbage", "0 0.5 0.5 0.2 0.2\n")
    full = cv2.imencode(".jpg", np.full((50, 50, 3), 200, np.uint8))[1].tobytes()
    (images / "truncated.jpg").write_bytes(full[: len(full) // 2])
    _labels(tmp_path, "truncated", "0 0.5 0.5 0.2 0.2\n")
    (images / "tail_cut.jpg").write_bytes(full[:-20])  # headers intact, end-of-image marker gone
    _image(images / "broken.png")
    _labels(tmp_path, "broken", "\n".join([
        "0 0.5 0.5 0.2 0.2",        # 1 ok
        "1 0.5 0.5 0.2",            # 2 four values
        "x 0.5 0.5 0.2 0.2",        # 3 not a number
        "7 0.5 0.5 0.2 0.2",        # 4 unknown class
        "2 320 240 50 40",          # 5 pixel coordinates
        "1 0.5 0.5 0 0.3",          # 6 zero width
        "1.5 0.5 0.5 0.1 0.1",      # 7 fractional class
        "2 0.9 0.9 0.5 0.5",        # 8 far outside the image
        "2 0.3 0.3 0.2 0.2",        # 9 ok
    ]) + "\n")
    _image(images / "background.jpg")  # no label file: kept as background

    ds = YoloDataset(images, NAMES, img_size=64)
    report = ds.report
    problems = _problems_by_file(report)

    kept = sorted(Path(r.path).name for r in ds.records)
    assert kept == ["background.jpg", "broken.png", "good.jpg"]
    assert problems[("garbage.jpg", None)].kind == "image"
    assert "truncated" in problems[("truncated.jpg", None)].reason.lower()
    assert "truncated" in problems[("tail_cut.jpg", None)].reason.lower()
    for line in (2, 3, 4, 5, 6, 7, 8):
        assert ("broken.txt", line) in problems, f"line {line} not reported"
    assert ("broken.txt", 1) not in problems and ("broken.txt", 9) not in problems
    assert "expected 5 values" in problems[("broken.txt", 2)].reason
    assert "'x' is not a number" in problems[("broken.txt", 3)].reason
    assert "unknown class 7" in problems[("broken.txt", 4)].reason and "3 classes" in problems[("broken.txt", 4)].reason
    assert "must be normalized 0..1" in problems[("broken.txt", 5)].reason
    assert "zero width" in problems[("broken.txt", 6)].reason
    assert "not an integer" in problems[("broken.txt", 7)].reason
    assert "outside the image" in problems[("broken.txt", 8)].reason
    # Problems print as path:line: reason
    assert str(problems[("broken.txt", 4)]).startswith(str(tmp_path / "labels" / "train" / "broken.txt") + ":4: ")

    broken = next(r for r in ds.records if r.path.endswith("broken.png"))
    assert broken.labels.tolist() == [0, 2]
    # Normalized -> original pixels on the 80x60 image, computed by hand.
    np.testing.assert_allclose(broken.boxes, [[32, 24, 48, 36], [16, 12, 32, 24]], atol=1e-4)
    assert report.num_boxes == 4 and report.num_background == 1
    assert report.num_dropped_images == 3 and report.num_dropped_boxes == 7
    assert "3/6 images usable" in report.summary()


def test_problem_lines_are_logged(tmp_path, caplog):
    _image(tmp_path / "images" / "train" / "one.jpg")
    _labels(tmp_path, "one", "0 0.5 0.5 0.2 0.2\n9 0.5 0.5 0.2 0.2\n")
    with caplog.at_level("WARNING"):
        YoloDataset(tmp_path / "images" / "train", NAMES)
    assert "one.txt:2: unknown class 9" in caplog.text


def test_no_usable_labels_is_an_error_that_says_why(tmp_path):
    images = tmp_path / "images" / "train"
    _image(images / "a.jpg")
    _image(images / "b.jpg")
    with pytest.raises(DataError, match="no label files found") as err:
        YoloDataset(images, NAMES)
    assert str(tmp_path / "labels" / "train") in str(err.value)

    _labels(tmp_path, "a", "5 0.5 0.5 0.2 0.2\n")  # only an unknown class
    _labels(tmp_path, "b", "0 100 80 20 30\n")  # only pixel coordinates
    with pytest.raises(DataError, match="no usable labels") as err:
        YoloDataset(images, NAMES)
    assert "a.txt:1: unknown class 5" in str(err.value)
    assert "b.txt:1:" in str(err.value) and "normalized" in str(err.value)
    # ...and the likely causes, in one line each.
    assert "hint: 1 labels use a class id outside 3 classes" in str(err.value)
    assert "hint: 1 labels look like pixel coordinates" in str(err.value)


def test_list_file_with_missing_image_reports_its_line(tmp_path):
    _image(tmp_path / "images" / "x" / "one.jpg")
    _labels(tmp_path, "one", "1 0.5 0.5 0.4 0.4\n", split="x")
    listing = tmp_path / "train.txt"
    listing.write_text("images/x/one.jpg\n\nimages/x/missing.jpg\n" + str(tmp_path / "images" / "x" / "one.jpg") + "\n")
    ds = YoloDataset(listing, NAMES)
    assert len(ds) == 2 and ds.report.num_images == 3
    (problem,) = ds.report.problems
    assert (problem.path, problem.line, problem.kind) == (str(listing), 3, "image")
    assert "missing.jpg" in problem.reason


def test_orphan_label_files_are_listed(tmp_path):
    _image(tmp_path / "images" / "train" / "one.jpg")
    _labels(tmp_path, "one", "0 0.5 0.5 0.4 0.4\n")
    _labels(tmp_path, "typo_one", "0 0.5 0.5 0.4 0.4\n")
    ds = YoloDataset(tmp_path / "images" / "train", NAMES)
    (problem,) = ds.report.problems
    assert problem.kind == "orphan" and problem.path.endswith("typo_one.txt")


def test_scan_is_cached_and_invalidated_by_changes(tmp_path, monkeypatch, private_cache):
    images = tmp_path / "images" / "train"
    _image(images / "one.jpg")
    label = _labels(tmp_path, "one", "0 0.5 0.5 0.4 0.4\n")
    YoloDataset(images, NAMES)
    cache_file = tmp_path / "labels" / "train.cache.json"
    assert cache_file.is_file()

    def no_reads(paths, name):
        if paths:
            raise AssertionError(f"{paths} read again despite the cache")
        return []

    monkeypatch.setattr(yolo_layout, "check_images", no_reads)
    assert YoloDataset(images, NAMES).records[0].labels.tolist() == [0]

    label.write_text("1 0.5 0.5 0.4 0.4\n0 0.2 0.2 0.1 0.1\n")
    os.utime(label, ns=(label.stat().st_atime_ns, label.stat().st_mtime_ns + 10**9))
    monkeypatch.undo()
    monkeypatch.setenv("YOLO_CACHE_DIR", str(private_cache))
    assert YoloDataset(images, NAMES).records[0].labels.tolist() == [1, 0]


def test_cache_never_written_into_read_only_or_asset_folders(tmp_path, monkeypatch):
    root = tmp_path / "ro"
    _image(root / "images" / "train" / "one.jpg")
    _labels(root, "one", "0 0.5 0.5 0.4 0.4\n")
    os.chmod(root / "labels", 0o555)  # read-only (mode bits are checked: root ignores them)
    try:
        YoloDataset(root / "images" / "train", NAMES)
    finally:
        os.chmod(root / "labels", 0o755)
    assert not (root / "labels" / "train.cache.json").exists()
    assert fallback_path(root / "labels" / "train.cache.json").is_file()

    monkeypatch.setenv("YOLO_ASSETS", str(root))  # writable, but shared assets are never written
    label = root / "labels" / "train" / "one.txt"
    os.utime(label, ns=(label.stat().st_atime_ns, label.stat().st_mtime_ns + 10**9))
    YoloDataset(root / "images" / "train", NAMES)
    assert not (root / "labels" / "train.cache.json").exists()


@pytest.mark.slow
def test_coco128_counts():
    root = asset("coco128")
    label_dir, image_dir = root / "labels" / "train2017", root / "images" / "train2017"
    # Independent reference: plain file listing and line counting.
    image_stems = {p.stem for p in image_dir.glob("*.jpg")}
    label_stems = {p.stem for p in label_dir.glob("*.txt")}
    lines = {s: [l for l in (label_dir / f"{s}.txt").read_text().splitlines() if l.strip()] for s in label_stems}
    assert len(image_stems) == 128 and sum(len(v) for v in lines.values()) == 941
    orphans, unlabeled = label_stems - image_stems, image_stems - label_stems
    assert len(orphans) == 2 and len(unlabeled) == 2

    cfg = load_data_config(Path(__file__).resolve().parents[1] / "configs" / "coco128.yaml")
    before = sorted(os.listdir(root / "labels"))
    ds = YoloDataset(cfg.train, cfg.names)
    assert sorted(os.listdir(root / "labels")) == before  # nothing written into the assets
    assert len(ds) == 128
    assert ds.num_boxes() == 941 - sum(len(lines[s]) for s in orphans)
    assert {Path(r.path).stem for r in ds.records if len(r.labels) == 0} == unlabeled
    assert {Path(p.path).stem for p in ds.report.problems} == orphans
    assert all(p.kind == "orphan" for p in ds.report.problems)
    # Ground truth in original pixels matches the label file of one image, converted by hand.
    gt = ds.ground_truth()
    first = next(g for g in gt if Path(g["file_name"]).stem == "000000000009")
    c, cx, cy, w, h = (float(v) for v in lines["000000000009"][0].split())
    x1, y1 = (cx - w / 2) * first["width"], (cy - h / 2) * first["height"]
    assert first["labels"][0].item() == int(c)
    np.testing.assert_allclose(first["boxes"][0, :2].numpy(), [x1, y1], atol=1e-3)
    assert (first["height"], first["width"]) == cv2.imread(first["file_name"]).shape[:2]


# ------------------------------------------------------------------------------------------- label numbers
# Darknet's read_boxes (src/data.c), its reading loop as it is there, printing what it reads.
READ_BOXES_C = r"""
#include <stdio.h>
int main(int argc, char **argv) {
    FILE *file = fopen(argv[1], "r");
    float x, y, h, w;
    int id, count = 0;
    while (fscanf(file, "%d %f %f %f %f", &id, &x, &y, &w, &h) == 5) {
        printf("%d %.9g %.9g %.9g %.9g\n", id, x, y, w, h);
        ++count;
    }
    fclose(file);
    printf("%d\n", count);
    return 0;
}
"""


LABEL_LINES = [
    "0 0.5 0.5 0.2 0.2",            # plain
    "3 .5 5e-1 0.2E0 +0.2",         # forms strtod reads like Python
    "0\t0.5 0.5\x0b0.2\x0c0.2",     # C whitespace between values
    "+1 0.5 0.5 0.2 0.2",           # a signed class
    "0 0.48_9 0.5 0.2 0.2",         # Python reads 0.489, Darknet 0.48
    "\u0663 0.5 0.5 0.2 0.2",       # an Arabic-Indic 3: Python reads class 3, Darknet nothing
    "1 0.5 0.5 0.\u0662 0.2",       # an Arabic-Indic digit in a value
    "1 0.5\u00a00.5 0.2 0.2",       # a non-breaking space: Python splits there, Darknet stops
    "3.0 0.5 0.5 0.2 0.2",          # Darknet: class 3, then .0 as cx
    "0,0.5,0.5,0.2,0.2",            # Darknet: class 0, then stops at the comma
    "1 0x1p-1 0.5 0.2 0.2",         # hexadecimal: strtod reads 0.5, Python refuses
    "1 0.5 0.5 0.2 0.2e",           # a dangling exponent
]


def test_label_numbers_are_read_as_darknet_reads_them_or_refused_at_their_line(tmp_path):
    """Every line we keep, Darknet's own reading loop (compiled here) reads as one box with the same values;
    every line it would read otherwise is refused at its line."""
    import subprocess
    import numpy as np
    from yolo.data.validation import read_label_file
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build Darknet's read_boxes loop")
    source, program = tmp_path / "read_boxes.c", tmp_path / "read_boxes"
    source.write_text(READ_BOXES_C)
    subprocess.run(["gcc", "-O0", "-o", str(program), str(source)], check=True)
    kept = []
    for number, line in enumerate(LABEL_LINES):
        path = tmp_path / f"{number}.txt"
        path.write_bytes((line + "\n").encode("utf-8"))
        labels, problems = read_label_file(path, num_classes=5)
        out = subprocess.run([str(program), str(path)], capture_output=True, text=True, check=True).stdout.split("\n")
        darknet = [[float(v) for v in row.split()] for row in out[:int(out[-2])]]
        if problems:
            assert len(labels) == 0 and [p.line for p in problems] == [1], (line, problems)
            assert str(problems[0]).startswith(f"{path}:1: malformed label line"), problems[0]
            continue
        kept.append(line)
        assert len(darknet) == 1, (line, darknet)
        np.testing.assert_allclose(labels[0], np.float32(darknet[0]), rtol=1e-6, err_msg=line)
    assert kept == LABEL_LINES[:4]


def test_a_label_file_that_is_some_other_file_is_counted_never_echoed(caplog, own_shapes):
    """An image's label path may point anywhere (a link to a private key): no line of it reaches the log."""
    from yolo.data.dataset import YoloDataset
    secret = own_shapes / "id_key"
    secret.write_text("-----BEGIN KEY-----\n" + "".join(f"c2VjcmV0{n:02d}c2VjcmV0\n" for n in range(20)))
    label = own_shapes / "data" / "labels" / "train" / "00000.txt"
    label.unlink()
    os.symlink(secret, label)
    with caplog.at_level(logging.DEBUG):
        dataset = YoloDataset(own_shapes / "data" / "images" / "train", ["a", "b", "c", "d", "e"])
    assert (f"{label}:1: not a label file: none of its 21 lines reads as 'class cx cy w h' (lines 1, 2, 3, 4, 5, 6, "
            "7, 8, 9, 10, ...; their text is not shown); its image is kept without boxes") in caplog.text, caplog.text
    assert "c2VjcmV0" not in caplog.text and "BEGIN" not in caplog.text
    assert len(dataset.records) == 8 and dataset.report.num_dropped_boxes == 21


def test_a_label_path_that_is_a_folder_is_reported_as_a_folder(tmp_path):
    from yolo.data import ensure_shapes_dataset
    from yolo.data.dataset import scan_yolo

    root = ensure_shapes_dataset(tmp_path / "data", num_train=3, num_val=1, seed=3, size_range=(64, 80),
                                 max_shapes=2)
    label = root / "labels" / "train" / "00001.txt"
    label.unlink()
    label.mkdir()
    records, report = scan_yolo(root / "images" / "train", len(SHAPE_NAMES), cache=False)
    texts = [str(p) for p in report.problems]
    assert any(t.startswith(f"{label}: is a folder where the image's label file belongs") for t in texts), texts
    assert len(records) == 2 and not any("no matching image" in t for t in texts)


@pytest.mark.slow
def test_a_label_line_with_terminal_escapes_is_printed_escaped_by_the_tools(tiny, train_setup):
    """tools/eval.py on a val split whose label file holds a line that would clear the screen and set the
    terminal title: the line is reported, escaped, and no escape character reaches the terminal."""
    label = train_setup / "data" / "labels" / "val" / "00000.txt"
    label.write_bytes(label.read_bytes() + b"\x1b[2J\x1b[H\x1b]0;owned\x07 0.5 0.5 0.1 0.1\n")
    proc = run_tool("eval", "--weights", tiny[1], "--data", train_setup / "data.yaml", "--device", "cpu",
                    "--workers", "0", "--no-progress", "--project", train_setup / "runs", "--no-plots",
                    timeout=120, cwd=train_setup, env={**os.environ, "YOLO_CACHE_DIR": str(train_setup / "cache")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\\x1b[2J\\x1b[H\\x1b]0;owned\\x07" in proc.stderr, proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr


# ------------------------------------------------------------------------------------------ data
def test_non_utf8_label_line_drops_only_that_line(tmp_path):
    path = tmp_path / "img.txt"
    path.write_bytes(b"0 0.5 0.5 0.2 0.2\n\xff\xfe garbage \x80\n1 0.3 0.3 0.1 0.1\n")
    labels, problems = read_label_file(path, num_classes=5)
    assert labels[:, 0].tolist() == [0, 1]
    assert [(p.line, p.kind) for p in problems] == [(2, "box")]
    assert "not UTF-8" in problems[0].reason and str(problems[0]).startswith(f"{path}:2:")


def test_label_file_with_byte_order_mark_keeps_its_first_line(tmp_path):
    path = tmp_path / "img.txt"
    path.write_bytes(b"\xef\xbb\xbf0 0.5 0.5 0.2 0.2\n")
    labels, problems = read_label_file(path, num_classes=5)
    assert len(labels) == 1 and not problems
