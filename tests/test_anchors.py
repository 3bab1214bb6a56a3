"""Anchors by k-means (yolo.anchors, tools/anchors.py) against Darknet's ``calc_anchors``.

Darknet draws its initial centres with ``rand()`` seeded by the clock, so its CLI gives a different answer
from run to run. Two comparisons follow from that:

* the k-means itself (assignment and update rules, stopping, float32 sums) is compared exactly with
  Darknet's own ``kmeans_expectation`` / ``kmeans_maximization`` started from the same boxes (harness mode
  ``kmeans``);
* the CLI ``darknet detector calc_anchors`` on coco128 is compared on what does not depend on the draw:
  the boxes it reads (count), the mean IoU it prints for its anchors (recomputed here from those anchors),
  and the quality of the result (our mean IoU within 2 points of its).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cfg_snippets import ONE_HEAD_CFG
from conftest import asset
from helpers import anchors_error, one_line_error
from yolo.anchors import (AnchorCfgError, format_anchors, kmeans_anchors, label_sizes, mean_iou,
                          set_cfg_anchors)
from yolo.cli import anchors as anchors_cli

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def coco128_sizes():
    """Float32[N, 2] label sizes of coco128 at 416 x 416, and the image paths."""
    from conftest import asset
    from yolo.data.dataset import scan_yolo

    images = asset("coco128/images/train2017")
    records, _ = scan_yolo(images, 80, cache=False)
    return label_sizes(records, (416, 416)), [r.path for r in records]


@pytest.mark.parametrize("k,seed", [(1, 0), (6, 0), (6, 1), (9, 2)])
def test_kmeans_matches_darknet(darknet, coco128_sizes, k, seed):
    sizes, _ = coco128_sizes
    init = np.random.default_rng(seed).permutation(len(sizes))[:k]
    ours = kmeans_anchors(sizes, k, init=init)
    centres, iterations = darknet.kmeans(sizes, init)
    expected = centres[np.argsort(centres[:, 0] * centres[:, 1], kind="stable")]
    assert ours.rounds == iterations
    np.testing.assert_allclose(ours.anchors, expected, rtol=1e-5)


def _darknet_cli(darknet, images, tmp_path, k):
    listing = tmp_path / "train.txt"
    listing.write_text("\n".join(images) + "\n")
    data = tmp_path / "coco128.data"
    data.write_text(f"classes=80\ntrain={listing}\n")
    run = subprocess.run([str(darknet.folder / "darknet"), "detector", "calc_anchors", str(data),
                          "-num_of_clusters", str(k), "-width", "416", "-height", "416", "-dont_show"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    text = run.stdout.replace("\r", "\n")
    boxes = int(re.findall(r"box: (\d+)", text)[-1])
    avg_iou = float(re.search(r"avg IoU = ([\d.]+) %", text).group(1))
    line = re.search(r"^anchors = (.*)$", text, re.M).group(1)
    anchors = np.array([float(v) for v in line.replace(" ", "").split(",")], np.float32).reshape(-1, 2)
    return boxes, avg_iou, anchors, line


def test_cli_agrees_with_darknet_calc_anchors(darknet, coco128_sizes, tmp_path):
    sizes, images = coco128_sizes
    boxes, darknet_iou, darknet_anchors, darknet_line = _darknet_cli(darknet, images, tmp_path, 6)
    assert boxes == len(sizes)
    # Its printed anchors are rounded to whole pixels, which moves the mean IoU by a few hundredths.
    assert mean_iou(sizes, darknet_anchors) == pytest.approx(darknet_iou, abs=0.15)
    assert format_anchors(darknet_anchors, 416) == darknet_line  # same text format
    ours = kmeans_anchors(sizes, 6, seed=0)
    assert abs(ours.mean_iou - darknet_iou) < 2.0


@pytest.mark.slow
def test_tool_prints_and_writes(assets, tmp_path, capsys):
    import sys
    sys.path.insert(0, str(REPO))
    from yolo.cli.anchors import main, parse_args

    assets("coco128/images/train2017")
    cfg = assets("cfg/yolov3-tiny.cfg")
    out = tmp_path / "new.cfg"
    result = main(parse_args(["--data", str(REPO / "configs/coco128.yaml"), "--cfg", str(cfg),
                              "--write", str(out)]))
    printed = capsys.readouterr().out
    assert f"anchors = {format_anchors(result.anchors, 416)}" in printed
    assert re.search(r"mean IoU = \d+\.\d\d %", printed)
    from yolo.models.cfg import parse_cfg
    heads = [s for s in parse_cfg(out) if s.type == "yolo"]
    assert len(heads) == 2
    for head in heads:
        np.testing.assert_allclose(head.get_floats("anchors"), np.round(result.anchors).ravel())
        assert head.get_int("num") == 6


TWO_HEADS = """[net]
width=416
height=416

[yolo]
mask = 3,4,5
anchors = 1,1, 2,2, 3,3, 4,4, 5,5, 6,6
num=6

[yolo]
mask = 0,1,2
anchors = 1,1, 2,2, 3,3, 4,4, 5,5, 6,6
num=6
"""


def test_set_cfg_anchors_checks_masks():
    anchors = np.array([[10, 14], [23, 27], [37, 58], [81, 82], [135, 169], [344, 319]], np.float32)
    text = set_cfg_anchors(TWO_HEADS, anchors, "two.cfg")
    assert text.count("anchors= 10, 14,  23, 27,  37, 58,  81, 82, 135,169, 344,319") == 2
    with pytest.raises(AnchorCfgError, match=r"two.cfg:6: \[yolo\] mask \[4, 5\] refers to anchors outside 0..3"):
        set_cfg_anchors(TWO_HEADS, anchors[:4], "two.cfg")
    with pytest.raises(AnchorCfgError, match="not each of the 7 new anchors"):
        set_cfg_anchors(TWO_HEADS, np.ones((7, 2), np.float32), "two.cfg")
    with pytest.raises(AnchorCfgError, match="grid cells"):
        set_cfg_anchors("[net]\n[region]\nanchors=1,1\n", anchors, "v2.cfg")


def test_kmeans_small_cases():
    sizes = np.array([[10, 10], [11, 11], [100, 100], [101, 99]], np.float32)
    result = kmeans_anchors(sizes, 2, init=[0, 1])
    np.testing.assert_allclose(result.anchors, [[10.5, 10.5], [100.5, 99.5]])
    ious = [100 / 110.25, 110.25 / 121, 100 * 99.5 / (10000 + 100.5 * 99.5 - 100 * 99.5),
            100.5 * 99 / (101 * 99 + 100.5 * 99.5 - 100.5 * 99)]
    assert result.mean_iou == pytest.approx(100 * sum(ious) / 4, abs=1e-4)
    with pytest.raises(ValueError, match="at least k=5"):
        kmeans_anchors(sizes, 5)


def test_tool_errors_are_one_line(tmp_path, capsys):
    import sys
    sys.path.insert(0, str(REPO))
    from yolo.cli.anchors import main, parse_args

    with pytest.raises(SystemExit) as exit_info:
        main(parse_args(["--data", str(tmp_path / "missing.yaml")]))
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error:") and "missing.yaml" in err
    assert len(err.splitlines()) == 1
    with pytest.raises(SystemExit):
        main(parse_args(["--data", "x.yaml", "--write", "out.cfg"]))
    assert capsys.readouterr().err.strip() == "error: --write needs --cfg (the cfg to copy)"


def test_write_refuses_a_fifo_or_a_device_before_the_labels_are_read(tmp_path, capsys):
    """``--write`` on a FIFO hung until a reader came (here one is open, so the old write went into it); a device
    (a link to /dev/null: /dev/null itself is never at stake) would have been written: both are one line before
    the labels are read."""
    import os
    import stat
    import sys
    sys.path.insert(0, str(REPO))
    from conftest import asset
    from yolo.cli.anchors import main, parse_args

    fifo, device = tmp_path / "pipe.cfg", tmp_path / "null.cfg"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    device.symlink_to("/dev/null")
    try:
        for output in (fifo, device):
            with pytest.raises(SystemExit):
                main(parse_args(["--data", "missing.yaml", "--cfg", str(asset("cfg/yolov3-tiny.cfg")),
                                 "--write", str(output)]))
            err = capsys.readouterr().err.strip()
            assert err.startswith(f"error: {output}: cannot write: it is ") and "not a regular file" in err, err
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and device.is_symlink()


# ------------------------------------------------------------------------------------ outputs onto inputs
@pytest.mark.usefixtures("private_cache")
def test_anchors_write_onto_a_label_file_is_refused_and_the_label_kept(capsys, own_shapes):
    label = sorted((own_shapes / "data" / "labels" / "train").glob("*.txt"))[0]
    before = label.read_bytes()
    err = anchors_error(capsys, "--data", own_shapes / "data.yaml", "-n", "3", "--cfg", own_shapes / "tiny.cfg",
                        "--write", label)
    assert f"--write is the input the label file of {own_shapes / 'data' / 'images' / 'train'}" in err, err
    assert label.read_bytes() == before


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("target", ["names", "image", "list"])
def test_anchors_write_onto_the_names_file_an_image_or_the_list_file_is_refused(capsys, own_shapes, target):
    data = own_shapes / "data"
    (own_shapes / "shapes.names").write_text("".join(f"{n}\n" for n in ("circle", "rectangle", "triangle",
                                                                         "ellipse", "cross")))
    images = sorted((data / "images" / "train").glob("*.jpg"))
    (own_shapes / "train.txt").write_text("".join(f"{p}\n" for p in images))
    (own_shapes / "list.yaml").write_text(f"path: {data}\ntrain: {own_shapes / 'train.txt'}\nval: images/val\n"
                                          f"names: {own_shapes / 'shapes.names'}\n")
    path = {"names": own_shapes / "shapes.names", "image": images[0], "list": own_shapes / "train.txt"}[target]
    link = own_shapes / "link"  # through a symbolic link: the same file
    os.symlink(path, link)
    before = path.read_bytes()
    err = anchors_error(capsys, "--data", own_shapes / "list.yaml", "-n", "3", "--cfg", own_shapes / "tiny.cfg",
                        "--write", link)
    assert "--write is the input the" in err and "writing it would destroy the input" in err, err
    assert path.read_bytes() == before


# ------------------------------------------------------------------------------------------------ anchors
@pytest.mark.parametrize("flags, expected", [
    (["--seed", "-1"], "error: argument --seed: -1 is out of range: a seed must be between 0 and 4294967295"),
    (["--seed", "4294967296"],
     "error: argument --seed: 4294967296 is out of range: a seed must be between 0 and 4294967295"),
    (["-n", "0"], "error: argument -n/--num-of-clusters: 0 is out of range: the anchor count must be between 1 "
                  "and 10000"),
    (["-n", "-3"], "error: argument -n/--num-of-clusters: -3 is out of range: the anchor count must be between 1 "
                   "and 10000"),
])
def test_anchors_refuses_bad_seed_and_count(shapes, capsys, flags, expected):
    argv = ["--data", str(shapes / "data.yaml"), *flags]
    err = one_line_error(capsys, lambda: anchors_cli.main(anchors_cli.parse_args(argv)))
    assert err.startswith(f"{expected} (see "), err


def test_anchors_largest_seed_is_accepted(shapes, capsys):
    result = anchors_cli.main(anchors_cli.parse_args(["--data", str(shapes / "data.yaml"), "-n", "2",
                                                      "--img-size", "64", "--seed", "4294967295"]))
    assert len(result.anchors) == 2
    assert "anchors = " in capsys.readouterr().out


def test_anchors_region_cfg_fails_before_printing(shapes, tmp_path, capsys):
    out = tmp_path / "new.cfg"
    argv = ["--data", str(shapes / "data.yaml"), "--cfg", str(asset("cfg/yolov2-tiny.cfg")), "-n", "5",
            "--write", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        anchors_cli.main(anchors_cli.parse_args(argv))
    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    assert captured.out == ""  # no anchors printed for a run that fails
    assert captured.err.strip().splitlines()[-1] == (
        f"error: {asset('cfg/yolov2-tiny.cfg')}: [region] anchors are in grid cells: paste them by hand (compute "
        "them with --img-size set to the input size / 32, e.g. --img-size 13 for 416x416)")
    assert not out.exists()


def test_anchors_write_never_replaces_its_cfg(capsys, tiny, tmp_path):
    from yolo.cli import anchors

    cfg, _, _ = tiny
    link = tmp_path / "link.cfg"
    link.symlink_to(cfg)
    err = one_line_error(capsys, lambda: anchors.main(anchors.parse_args(
        ["--data", str(tmp_path / "missing.yaml"), "--cfg", str(cfg), "--write", str(link)])))
    assert "--write is the input --cfg" in err, err
    assert cfg.read_text() == ONE_HEAD_CFG
