"""tools/detect.py end to end: sources, outputs, run folders, and errors that are reported, not fatal."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from conftest import asset
from helpers import detect_command, fifo_with_a_late_writer, noisy_images, one_line_error, run_tool, write_mjpg_video
from training_helpers import write_one_head_training
from yolo.cli import detect as detect_cli
from yolo.errors import DataError
from yolo.files.names import read_names
from yolo.runs import increment_path
from yolo.cli.detect import main, parse_args
from yolo.inference.sources import collect_sources


def tiny_args(source, out, *extra):
    return parse_args(["--cfg", str(asset("cfg/yolov3-tiny.cfg")),
                       "--weights", str(asset("weights/yolov3-tiny.weights")),
                       "--names", str(asset("cfg/coco.names")), "--source", str(source), "--output", str(out),
                       "--device", "cpu", "--img-size", "320", *extra])


def test_increment_path_never_reuses(tmp_path):
    base = tmp_path / "runs" / "exp"
    first = increment_path(base)
    assert first == base and first.is_dir()
    assert increment_path(base) == tmp_path / "runs" / "exp2"
    assert increment_path(base) == tmp_path / "runs" / "exp3"
    shutil.rmtree(tmp_path / "runs" / "exp2")
    assert increment_path(base) == tmp_path / "runs" / "exp4"  # numbers only go up
    assert increment_path(tmp_path / "other", mkdir=False) == tmp_path / "other"


@pytest.mark.slow
def test_folder_with_bad_files_images_labels_json(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(asset("images/dog.jpg"), src / "dog.jpg")
    shutil.copy(asset("images/horses.jpg"), src / "000000000042.jpg")
    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    (src / "notes.txt").write_text("ignored: not an image suffix")
    out = main(tiny_args(src, tmp_path / "runs", "--save-txt", "--save-conf", "--save-json"))
    assert out == tmp_path / "runs" / "exp"
    captured = capsys.readouterr()
    assert "broken.jpg" in captured.out + captured.err and "skipped" in captured.out + captured.err
    assert "dog" in captured.out and "ms" in captured.out
    assert sorted(p.name for p in out.iterdir()) == ["000000000042.jpg", "dog.jpg", "image_ids.json", "labels",
                                                     "results.json"]
    annotated = cv2.imread(str(out / "dog.jpg"))
    assert annotated.shape == cv2.imread(str(src / "dog.jpg")).shape
    assert not np.array_equal(annotated, cv2.imread(str(src / "dog.jpg")))  # something was drawn
    lines = (out / "labels" / "dog.txt").read_text().splitlines()
    assert lines and all(len(line.split()) == 6 for line in lines)
    values = np.array([[float(v) for v in line.split()] for line in lines])
    assert ((values[:, 1:5] >= 0) & (values[:, 1:5] <= 1)).all()
    assert 16 in values[:, 0].astype(int)  # the dog
    results = json.loads((out / "results.json").read_text())
    # "dog" is not a number: every image is then numbered by its position (COCO ids are integers), and
    # image_ids.json says which file each id is, as COCO's "images" entries.
    images = json.loads((out / "image_ids.json").read_text())
    assert [(i["id"], Path(i["file_name"]).name) for i in images] == [(1, "000000000042.jpg"), (2, "dog.jpg")]
    assert (images[1]["height"], images[1]["width"]) == cv2.imread(str(src / "dog.jpg")).shape[:2]
    assert {r["image_id"] for r in results} == {1, 2}
    assert all(set(r) == {"image_id", "category_id", "bbox", "score"} and len(r["bbox"]) == 4 for r in results)
    assert 18 in {r["category_id"] for r in results if r["image_id"] == 2}  # COCO's id for dog, in dog.jpg
    assert_pycocotools_reads(results, images)
    # A second run never overwrites the first.
    assert main(tiny_args(src / "dog.jpg", tmp_path / "runs", "--nosave", "--save-txt")) == tmp_path / "runs" / "exp2"
    assert (out / "dog.jpg").exists()


def assert_pycocotools_reads(results, images):
    """pycocotools accepts ``results`` against ground truth made of ``images`` (COCO's ``loadRes`` demands
    ids of the ground truth; ``COCOeval`` sorts them, which needs integers)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    gt = COCO()
    gt.dataset = {"images": images, "annotations": [], "categories": [{"id": c, "name": str(c)}
                                                                      for c in range(1, 91)]}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        dt = gt.loadRes(results)
        COCOeval(gt, dt, "bbox").evaluate()


@pytest.mark.slow
def test_results_json_ids_are_coco_file_numbers_and_nosave_makes_no_folder(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(asset("images/dog.jpg"), src / "000000000009.jpg")
    shutil.copy(asset("images/horses.jpg"), src / "000000000042.jpg")
    out = main(tiny_args(src, tmp_path / "runs", "--save-json", "--nosave"))
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]  # no image_ids.json: the names are the ids
    results = json.loads((out / "results.json").read_text())
    assert {r["image_id"] for r in results} == {9, 42}
    assert 18 in {r["category_id"] for r in results if r["image_id"] == 9}
    assert_pycocotools_reads(results, [{"id": i, "file_name": f"{i:012d}.jpg", "height": 1, "width": 1}
                                       for i in (9, 42)])
    # --nosave and nothing else to save: no run folder at all, and none reported
    capsys.readouterr()
    assert main(tiny_args(src, tmp_path / "runs", "--nosave")) is None
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["exp"]
    printed = capsys.readouterr().out
    assert "nothing saved (--nosave)" in printed and "results in" not in printed
    # every image's line names the network input it was resized to
    assert "768x576 -> 320x320 stretch, " in printed  # dog.jpg; yolov3-tiny.cfg stretches (no letter_box)


@pytest.mark.slow
def test_glob_and_video(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    frame = cv2.resize(cv2.imread(str(asset("images/dog.jpg"))), (320, 240))
    video = src / "clip.avi"
    write_mjpg_video(video, (np.roll(frame, 10 * i, axis=1) for i in range(3)), 5)
    shutil.copy(asset("images/person.jpg"), src / "person.jpg")
    items = collect_sources(str(src / "*"))
    assert [(i.kind, i.path.name) for i in items] == [("video", "clip.avi"), ("image", "person.jpg")]
    out = main(tiny_args(str(src / "*"), tmp_path / "runs", "--save-txt"))
    capture = cv2.VideoCapture(str(out / "clip.mp4"))
    assert capture.isOpened() and int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    capture.release()
    # frames numbered from 1 in the label files as in the log's "frame N/3" (Darknet's demo and MOT files count so)
    assert sorted(p.name for p in (out / "labels").iterdir()) == ["clip_1.txt", "clip_2.txt", "clip_3.txt",
                                                                  "person.txt"]
    printed = capsys.readouterr()
    assert all(f"clip.avi frame {n}/3" in printed.out + printed.err for n in (1, 2, 3))


def test_sources_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="source not found"):
        collect_sources(str(tmp_path / "nothing.jpg"))
    with pytest.raises(FileNotFoundError, match="no image"):
        collect_sources(str(tmp_path / "*.png"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no image"):
        collect_sources(str(tmp_path / "empty"))
    assert collect_sources("0")[0].kind == "camera"


@pytest.mark.slow
def test_cli_missing_source_is_one_line_error(tmp_path):
    res = run_tool("detect", "--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", asset("weights/yolov3-tiny.weights"),
                   "--source", tmp_path / "missing.jpg", "--output", tmp_path / "runs")
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing.jpg" in lines[0] and "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_cli_cfg_weights_mismatch_is_one_line_error(tmp_path):
    res = run_tool("detect", "--cfg", asset("cfg/yolov3-tiny.cfg"),
                   "--weights", asset("weights/yolo-fastest-1.1.weights"),
                   "--source", asset("images/dog.jpg"), "--output", tmp_path / "runs")
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "yolo-fastest-1.1.weights" in lines[0] and "Traceback" not in res.stderr


@pytest.mark.slow
def test_benchmark_smoke(capsys):
    """tools/benchmark.py runs end to end (random weights written and read by both pipelines);
    figures are reported, never asserted on."""
    from yolo.cli.benchmark import main as bench_main, parse_args as bench_args

    figures = bench_main(bench_args(["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--img-size", "96", "--iters", "1",
                                     "--warmup", "0", "--batch", "2", "--no-gpu"]))
    out = capsys.readouterr().out
    assert "ratios ours/OpenCV" in out and "random weights" in out
    assert figures["latency_ratio"] > 0 and figures["model_ratio"] > 0 and figures["throughput_ratio"] > 0


@pytest.mark.slow
def test_names_come_from_beside_the_cfg_or_a_hint_says_how_to_give_them(tmp_path, capsys):
    """Darknet .weights carry no names: coco.names beside the cfg (or in Darknet's data/ folder next to the cfg's
    folder) names the classes; without one, one note says that class numbers are shown and how to name them."""
    weights = asset("weights/yolov3-tiny.weights")
    expected = [line.strip() for line in asset("cfg/coco.names").read_text().splitlines() if line.strip()]

    def detect(cfg, out):
        capsys.readouterr()
        main(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--source", str(asset("images/dog.jpg")),
                         "--output", str(out), "--device", "cpu", "--img-size", "320", "--nosave"]))
        return capsys.readouterr()

    printed = detect(asset("cfg/yolov3-tiny.cfg"), tmp_path / "beside")  # the assets keep coco.names beside it
    assert "class names from" in printed.err and "coco.names" in printed.err
    assert " dog" in printed.out and "1 16" not in printed.out

    darknet = tmp_path / "darknet"  # Darknet's layout: cfg/yolov3-tiny.cfg, data/coco.names
    (darknet / "cfg").mkdir(parents=True)
    (darknet / "data").mkdir()
    shutil.copy(asset("cfg/yolov3-tiny.cfg"), darknet / "cfg")
    shutil.copy(asset("cfg/voc.names"), darknet / "data")  # 20 names: never taken for an 80-class model
    printed = detect(darknet / "cfg" / "yolov3-tiny.cfg", tmp_path / "none")
    assert printed.err.count("no class names") == 1 and "--names" in printed.err
    assert "1 16" in printed.out  # the dog, as a class number
    shutil.copy(asset("cfg/coco.names"), darknet / "data")
    printed = detect(darknet / "cfg" / "yolov3-tiny.cfg", tmp_path / "data")
    assert str(darknet / "data" / "coco.names") in printed.err and " dog" in printed.out

    from yolo.inference.detector import Detector
    detector = Detector(darknet / "cfg" / "yolov3-tiny.cfg", weights, device="cpu", img_size=320)
    assert detector.names == expected and detector.names_from == str(darknet / "data" / "coco.names")


def test_class_names_are_escaped_and_cut_in_the_per_image_line(tmp_path, capsys):
    """A names file whose names hold a terminal escape (clear the screen) or run to 5,000,000 characters: the
    per-image line shows the escape as text and at most 200 characters of a name, as every echoed value."""
    names = [line.strip() for line in asset("cfg/coco.names").read_text().splitlines() if line.strip()]
    names[16] = "\x1b[2J\x1b]0;owned\x07dog"  # the dog of dog.jpg
    names[1] = "b" * 5_000_000  # the bicycle
    names_file = tmp_path / "hostile.names"
    names_file.write_text("\n".join(names) + "\n")
    args = tiny_args(asset("images/dog.jpg"), tmp_path / "out", "--nosave")
    args.names = names_file
    main(args)
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "dog.jpg" in line)
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b]0;owned\\x07dog" in line
    assert "b" * 200 + "... (5,000,000 characters)" in line and len(line) < 1000


def test_a_recursive_glob_follows_no_folder_link_twice(tmp_path, monkeypatch):
    """``loop/a -> .``: glob's walk listed loop/x.jpg 41 times through a/a/a/...; with a second link ``b -> .`` it
    ran for minutes. Each folder is walked once: each file comes once, and the walk ends."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop" / "sub" / ".hidden").mkdir(parents=True)
    for name in ("loop/x.jpg", "loop/sub/y.jpg", "loop/sub/.hidden/z.jpg", "loop/.h.jpg", "loop/sub/notes.txt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "loop" / "a").symlink_to(".")
    found = [str(item.path) for item in collect_sources("loop/**/*.jpg")]
    assert found == ["loop/sub/y.jpg", "loop/x.jpg"]
    (tmp_path / "loop" / "b").symlink_to(".")
    (tmp_path / "loop" / "sub" / "up").symlink_to("..")
    assert [str(item.path) for item in collect_sources("loop/**/*.jpg")] == found
    # as glob's ** does: hidden names only where the pattern names them; ** may stand for no folder at all
    assert [str(item.path) for item in collect_sources("loop/**/.*.jpg")] == ["loop/.h.jpg"]
    assert [str(item.path) for item in collect_sources(f"{tmp_path}/loop/**/.hidden/*.jpg")] == [
        f"{tmp_path}/loop/sub/.hidden/z.jpg"]


@pytest.mark.slow
def test_file_names_that_are_not_utf8_or_are_long_are_read_and_written(tmp_path):
    """``bad\\xff\\xfename.jpg``: OpenCV's bindings crashed the process (exit 139) on the name, after its label file
    was written; a video of that name too. A video with a legal 251-character name: its partial output name was
    "File name too long". Every file is read and written under its own name, each label with its image."""
    import os

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(asset("images/dog.jpg"), src / os.fsdecode(b"bad\xff\xfename.jpg"))
    frame = cv2.resize(cv2.imread(str(asset("images/dog.jpg"))), (160, 120))
    write_mjpg_video(tmp_path / "clip.avi", [frame, frame], 5)
    shutil.copy(tmp_path / "clip.avi", src / os.fsdecode(b"vid\xff.avi"))
    shutil.copy(tmp_path / "clip.avi", src / ("v" * 247 + ".avi"))
    result = run_tool("detect", "--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", asset("weights/yolov3-tiny.weights"),
                      "--source", src, "--output", tmp_path / "out", "--img-size", "160", "--save-txt",
                      "--device", "cpu", "--no-progress")
    assert result.returncode == 0, result.stderr[-2000:]
    (out,) = (tmp_path / "out").iterdir()
    assert sorted(os.listdir(os.fsencode(out))) == sorted([b"bad\xff\xfename.jpg", b"labels", b"vid\xff.mp4",
                                                           b"v" * 247 + b".mp4"])
    assert sorted(os.listdir(os.fsencode(out / "labels"))) == sorted(
        [b"bad\xff\xfename.txt", b"vid\xff_1.txt", b"vid\xff_2.txt", b"v" * 247 + b"_1.txt", b"v" * 247 + b"_2.txt"])
    assert "\\udcff" in result.stdout  # the name shown with escapes
    capture = cv2.VideoCapture(str(out / ("v" * 247 + ".mp4")))
    assert capture.isOpened() and int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 2
    capture.release()


def test_the_run_folder_is_shown_with_escapes(tmp_path, capsys):
    """``--project`` holding a terminal escape: the closing line shows it as text."""
    project = tmp_path / "runs\x1b]0;title\x07"
    main(tiny_args(asset("images/dog.jpg"), project, "--img-size", "160"))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "runs\\x1b]0;title\\x07" in out


def test_a_jpeg_named_mp4_is_read_without_a_frame_count_it_does_not_have(tmp_path, capsys):
    """OpenCV opens a JPEG named .mp4 as a one-frame stream whose header announces -2^63 frames: the count is not
    shown (nor a rate that is not one used)."""
    from yolo.inference.sources import VideoReader

    video = tmp_path / "photo.mp4"
    shutil.copy(asset("images/dog.jpg"), video)
    (item,) = collect_sources(str(video))
    with VideoReader(item) as reader:
        assert reader.total == 0 and 0 < reader.fps <= 1000
        assert len(list(reader)) == 1
    main(tiny_args(video, tmp_path / "runs", "--nosave"))
    out = capsys.readouterr().out
    assert "photo.mp4 frame 1/?:" in out and "-9223372036854775808" not in out, out


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A tiny shapes training folder (data.yaml, tiny.cfg, hyp.yaml), made once for the module."""
    return write_one_head_training(tmp_path_factory.mktemp("shapes"))


# ------------------------------------------------------------------------------------------------- detect
def detect_flags(*extra: str):
    """``tools/detect.py``'s flags with a cfg, weights and source that are never read (parsing fails first)."""
    return detect_cli.parse_args(["--cfg", "never.cfg", "--weights", "never.weights", "--source", "never.jpg",
                                  *extra])


@pytest.mark.parametrize("value, expected", [
    ("nan", "error: argument --beta-nms: 'nan' is not a finite number"),
    ("inf", "error: argument --beta-nms: 'inf' is not a finite number"),
    ("-5", "error: argument --beta-nms: -5 is out of range: the DIoU-NMS exponent must be above 0 and at most "
           "3.40282e+38"),
    ("0", "error: argument --beta-nms: 0 is out of range: the DIoU-NMS exponent must be above 0 and at most "
          "3.40282e+38"),
    ("1e308", "error: argument --beta-nms: 1e308 is out of range: the DIoU-NMS exponent must be at most "
              "3.40282e+38"),
])
def test_detect_refuses_a_beta_nms_darknet_cannot_use(capsys, value, expected):
    err = one_line_error(capsys, lambda: detect_flags("--beta-nms", value))
    assert err.startswith(f"{expected} (see "), err


def test_detect_takes_a_positive_beta_nms():
    assert detect_flags("--beta-nms", "0.6").beta_nms == 0.6


# ---------------------------------------------------------------------------------------------- names files
def tiny_detect(tmp_path, *extra: str):
    """``tools/detect.py`` on yolov3-tiny at 96x96 on the CPU, writing into ``tmp_path/out``."""
    return detect_cli.main(detect_cli.parse_args([
        "--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
        "--output", str(tmp_path / "out"), "--device", "cpu", "--img-size", "96", *extra]))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_a_names_file_that_is_not_utf8_is_named(tmp_path, encoding):
    path = tmp_path / "classes.names"
    path.write_text("cat\ndog\n", encoding=encoding)
    with pytest.raises(DataError) as error:
        read_names(path)
    assert str(error.value) == (f"{path}: names file is not UTF-8 text (byte 0xff at offset 0): save it as UTF-8, "
                                "one name a line")


def test_detect_names_the_names_file_that_is_binary(tmp_path, capsys):
    path = tmp_path / "binary.names"
    path.write_bytes(b"cat\n\x80\x81dog\n")
    err = one_line_error(capsys, lambda: tiny_detect(tmp_path, "--source", str(asset("images/dog.jpg")),
                                                     "--names", str(path)))
    assert err == (f"error: {path}: names file is not UTF-8 text (byte 0x80 at offset 4): save it as UTF-8, one "
                   "name a line")


def test_detect_names_the_names_file_whose_count_is_wrong(tmp_path, capsys):
    path = tmp_path / "two_lines.txt"
    path.write_text("cat\ndog\n")
    err = one_line_error(capsys, lambda: tiny_detect(tmp_path, "--source", str(asset("images/dog.jpg")),
                                                     "--names", str(path)))
    assert err == f"error: {path}: 2 class names given but the model has 80 classes"


# ------------------------------------------------------------------------------------------ detect sources
def test_detect_refuses_an_empty_source(tmp_path, capsys, monkeypatch):
    (tmp_path / "dog.jpg").write_bytes(asset("images/dog.jpg").read_bytes())
    monkeypatch.chdir(tmp_path)  # an empty path is the current folder: it must not be scanned
    err = one_line_error(capsys, lambda: tiny_detect(tmp_path, "--source", ""))
    assert err == "error: --source is empty: give an image or video file, a folder, a glob or a camera index"


def unreadable_sources(folder):
    """A folder of four files OpenCV cannot read, each of which makes OpenCV or FFmpeg log a line of its own."""
    folder.mkdir()
    (folder / "a.jpg").write_bytes(b"junk")
    (folder / "b.mp4").write_bytes(b"junk")                     # FFmpeg: moov atom not found
    (folder / "c.tif").write_bytes(b"II*\x00junk")              # OpenCV: TIFF_Error ... Seek error
    (folder / "d.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(12))  # OpenCV: buffer incomplete
    return folder


@pytest.mark.slow
def test_detect_on_only_unreadable_sources_ends_with_an_error_and_no_opencv_noise(tmp_path):
    source = unreadable_sources(tmp_path / "bad")
    done = run_tool("detect", "--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", asset("weights/yolov3-tiny.weights"),
                    "--source", source, "--device", "cpu", "--img-size", "96", "--nosave",
                    env={k: v for k, v in os.environ.items() if not k.startswith("OPENCV_")})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1
    assert lines[-1] == "error: none of the 4 source(s) could be read", done.stderr
    assert sorted(lines[-5:-1]) == [
        f"warning: {source / 'a.jpg'}: not a readable image (corrupt or unsupported format); skipped",
        f"warning: {source / 'b.mp4'}: cannot open video; skipped",
        f"warning: {source / 'c.tif'}: not a readable image (corrupt or unsupported format); skipped",
        f"warning: {source / 'd.png'}: not a readable image (corrupt or unsupported format); skipped"]
    assert all(line.startswith(("warning: ", "error: ", "class names from ")) for line in lines), done.stderr


def test_detect_that_reads_nothing_leaves_no_run_folder(tmp_path, capsys):
    source = unreadable_sources(tmp_path / "bad")
    runs = tmp_path / "runs"
    for extra in ([], ["--save-txt"]):  # --save-txt makes a labels/ folder inside the run
        args = detect_cli.parse_args(["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights",
                                      str(asset("weights/yolov3-tiny.weights")), "--source", str(source),
                                      "--device", "cpu", "--img-size", "96", "--project", str(runs), *extra])
        with pytest.raises(SystemExit) as exit_info:
            detect_cli.main(args)
        assert exit_info.value.code == 1
        assert capsys.readouterr().err.strip().splitlines()[-1] == "error: none of the 4 source(s) could be read"
        assert not runs.exists() or not any(runs.iterdir()), sorted(runs.rglob("*"))


# ------------------------------------------------------------------------------------ detect output names
def sources_sharing_stems(folder):
    """``a.jpg``, ``a.png``, ``clip_1.jpg`` and a 2-frame ``clip.mp4``: two images with one stem, and an image
    named as the video's first frame's label."""
    folder.mkdir()
    dog = cv2.resize(cv2.imread(str(asset("images/dog.jpg"))), (96, 72))
    cv2.imwrite(str(folder / "a.jpg"), dog)
    cv2.imwrite(str(folder / "a.png"), dog[:, ::-1].copy())
    cv2.imwrite(str(folder / "clip_1.jpg"), dog[::-1].copy())
    video = cv2.VideoWriter(str(folder / "clip.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 5, (96, 72))
    for frame in (dog, dog[::-1].copy()):
        video.write(frame)
    video.release()
    return folder


def test_detect_keeps_one_label_file_per_image_and_frame_when_stems_clash(tmp_path):
    source = sources_sharing_stems(tmp_path / "src")
    out = tiny_detect(tmp_path, "--source", str(source), "--save-txt", "--save-json", "--conf-thres", "0.01")
    labels = sorted(p.name for p in (out / "labels").iterdir())
    assert labels == ["a.txt", "a_2.txt", "clip_1.txt", "clip_1_2.txt", "clip_2.txt"]
    assert sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix != ".json") == [
        "a.jpg", "a.png", "clip.mp4", "clip_1.jpg"]
    results = json.loads((out / "results.json").read_text())
    assert len({r["image_id"] for r in results}) == 5  # each image and frame has detections under its own id


# ------------------------------------------------------------------------------------------ detect weights
@pytest.mark.parametrize("name, cfg, expected", [
    ("tiny.torchscript", ["--cfg", "CFG"], "{w}: an exported file carries its own cfg: give it without --cfg"),
    ("tiny.weights", [], "{w}: Darknet weights need their --cfg to build the model (only .pt checkpoints carry their "
                         "own)"),
])
def test_detect_names_weights_it_cannot_read(tmp_path, capsys, name, cfg, expected):
    weights = tmp_path / name
    weights.write_bytes(b"\x08\x01\x12\x07pytorch")  # never read: the suffix alone decides
    flags = [str(asset("cfg/yolov3-tiny.cfg")) if flag == "CFG" else flag for flag in cfg]
    argv = [*flags, "--weights", str(weights), "--source", str(asset("images/dog.jpg")), "--output",
            str(tmp_path / "out"), "--device", "cpu"]
    err = one_line_error(capsys, lambda: detect_cli.main(detect_cli.parse_args(argv)))
    assert err == "error: " + expected.format(w=weights)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------ devices, sources
@pytest.mark.parametrize("device", ["mps", "xpu", "meta", "hip", "vulkan", "xla", "lazy"])
def test_a_device_type_other_than_cpu_or_cuda_is_one_line(shapes, tmp_path, capsys, device):
    from training_helpers import write_one_head_model
    _, pt, _ = write_one_head_model(tmp_path)
    err = one_line_error(capsys, lambda: detect_cli.main(detect_cli.parse_args(
        ["--weights", str(pt), "--source", str(asset("images/dog.jpg")), "--device", device, "--nosave"])))
    assert err == f"error: --device: device '{device}': only cpu, cuda, cuda:N or N are supported (not {device})", err


def test_a_camera_index_too_large_for_opencv_is_one_line(shapes, tmp_path, capsys, monkeypatch):
    from training_helpers import write_one_head_model
    _, pt, _ = write_one_head_model(tmp_path)
    monkeypatch.chdir(tmp_path)  # no file of that name
    err = one_line_error(capsys, lambda: detect_cli.main(detect_cli.parse_args(
        ["--weights", str(pt), "--source", "99999999999", "--device", "cpu", "--nosave"])))
    assert err == ("error: --source 99999999999: not a file, and too large for a camera index (0 to "
                   "2,147,483,647)"), err


def test_a_gif_in_a_folder_or_glob_is_detected_as_when_named_alone(tmp_path):
    from yolo.inference.sources import collect_sources
    image = np.zeros((32, 48, 3), np.uint8)
    assert cv2.imwrite(str(tmp_path / "a.gif"), image) and cv2.imwrite(str(tmp_path / "b.png"), image)
    alone = collect_sources(str(tmp_path / "a.gif"))
    assert [(i.kind, i.path.name) for i in alone] == [("image", "a.gif")]
    for source in (tmp_path, tmp_path / "*"):
        assert [(i.kind, i.path.name) for i in collect_sources(str(source))] == [("image", "a.gif"), ("image", "b.png")]


def test_a_names_file_that_is_a_fifo_or_a_device_is_one_line(tmp_path, capsys):
    """``--names`` on a FIFO hung until a writer came (here one comes, and the old read took its names);
    ``/dev/zero`` would never have ended: refused as not a regular file, before anything is read."""
    fifo = tmp_path / "classes.names"
    end = fifo_with_a_late_writer(fifo, "cat\n")
    try:
        with pytest.raises(DataError) as error:
            read_names(fifo)
    finally:
        end()
    assert str(error.value) == f"{fifo}: cannot read the names file: it is a FIFO (named pipe), not a regular file"
    zero = tmp_path / "zero.names"
    zero.symlink_to("/dev/zero")
    with pytest.raises(DataError, match="it is a character device, not a regular file"):
        read_names(zero)


# ------------------------------------------------------------------------------- full disk
def test_detect_on_a_full_disk_is_an_error_naming_the_file(capsys, tiny, tmp_path, small_disk):
    source = noisy_images(tmp_path / "images", 7)
    err = one_line_error(capsys, detect_command(tiny, source, small_disk / "runs"))
    assert "cannot write: the disk is full" in err and str(small_disk) in err, err
    assert "results in" not in capsys.readouterr().out


def test_detect_reports_an_image_writer_failure(capsys, tiny, tmp_path, monkeypatch):
    """The same without a small file system: OpenCV's encoder returns False (the image is encoded, then written)."""
    import yolo.inference.writer as writer_module

    source = noisy_images(tmp_path / "images", 2, side=64)
    monkeypatch.setattr(writer_module.cv2, "imencode", lambda *args, **kwargs: (False, None))
    err = one_line_error(capsys, detect_command(tiny, source, tmp_path / "runs"))
    assert "img0.jpg: cannot write: the writer reported a failure" in err, err


def test_a_class_filter_the_model_does_not_have_is_an_error(capsys, tiny, tmp_path):
    from yolo.cli import detect

    err = one_line_error(capsys, lambda: detect.cli(["--weights", str(tiny[1]), "--source",
                                                     str(noisy_images(tmp_path / "img", 1, 64)), "--device", "cpu",
                                                     "--classes", "1", "7", "9"]))
    assert "--classes 7 9: the model has 5 classes (0..4)" in err, err


def _png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width x height`` pixels, with one row of data."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * (1 + 3 * width)))
            + chunk(b"IEND", b""))


def test_detect_skips_a_png_claiming_60000x60000_pixels_and_goes_on(capsys, tiny, tmp_path):
    source = noisy_images(tmp_path / "images", 2, side=64)
    (source / "huge.png").write_bytes(_png_claiming(60000, 60000))
    detect_command(tiny, source, tmp_path / "runs")()
    out_dir = tmp_path / "runs" / "exp"
    captured = capsys.readouterr()
    assert f"warning: {source / 'huge.png'}: cannot decode the image: its header claims more pixels than OpenCV " \
           "decodes" in captured.err, captured.err
    assert "2 image(s)" in captured.out and "1 source(s) skipped" in captured.out
    assert sorted(p.name for p in out_dir.glob("*.jpg")) == ["img0.jpg", "img1.jpg"]


def test_more_than_two_image_sides_is_an_error(capsys, tiny_pt, tmp_path):
    from yolo.cli import detect

    args = detect.parse_args(["--weights", str(tiny_pt), "--source", str(tmp_path), "--img-size", "64", "64", "64"])
    (tmp_path / "a.jpg").write_bytes(cv2.imencode(".jpg", np.zeros((8, 8, 3), np.uint8))[1].tobytes())
    assert "--img-size takes one value or two" in one_line_error(capsys, lambda: detect.main(args))


def test_truncated_video_reports_expected_and_read_frames(tiny_pt, tmp_path, capsys):
    from yolo.cli import detect

    video = tmp_path / "clip.avi"
    rng = np.random.default_rng(0)
    write_mjpg_video(video, (rng.integers(0, 255, (64, 64, 3), dtype=np.uint8) for _ in range(20)), 10)
    capture = cv2.VideoCapture(str(video))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 20  # the header's count
    capture.release()
    data = video.read_bytes()
    video.write_bytes(data[:len(data) // 2])  # the header still says 20 frames

    out = detect.main(detect.parse_args(["--weights", str(tiny_pt), "--source", str(video), "--img-size", "64",
                                         "--device", "cpu", "--output", str(tmp_path / "runs"), "--nosave"]))
    captured = capsys.readouterr()
    err = captured.err
    read = len([line for line in captured.out.splitlines() if line.startswith("clip.avi frame ")])
    assert 0 < read < 20
    assert f"should have 20 frames but only {read} could be read" in err, err
    assert out is None and not (tmp_path / "runs").exists()  # --nosave and nothing else to save: no run folder
