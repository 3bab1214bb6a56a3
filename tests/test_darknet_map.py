"""Darknet's ``detector map`` (yolo.evaluation.darknet_map, ``tools/eval.py --darknet-map``) against Darknet itself.

Darknet's CLI (built by the ``darknet`` fixture) runs ``detector map DATA CFG WEIGHTS -points N -iou_thresh X
-thresh Y`` on a small .data/.names/valid list written here; ``tools/eval.py --darknet-map`` runs on the same
files; the printed report must be the same text: every class's AP and TP/FP, precision, recall, F1, TP/FP/FN,
average IoU and the mAP to Darknet's six decimals. Most cases use PNGs already at the network's size (both
pre-processings are then the identity), so that the comparison is of the detections and the scoring; one runs on
coco128's JPEGs at their own sizes against Darknet's OpenCV build (which decodes JPEGs with OpenCV, as we do), so
that Darknet's resize_image is exercised too.

The pure function is also checked on small cases worked out by hand.
"""
import contextlib
import io
import json
import re
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

from conftest import asset
from yolo.evaluation.darknet_map import ImageDetections, ImageTruths, darknet_map



def coco_names():
    """COCO's 80 names from the assets (looked up when a test runs: a clone without them collects all the same)."""
    return [n.strip() for n in asset("cfg/coco.names").read_text().splitlines() if n.strip()]


# ----------------------------------------------------------------------------- the pure function, by hand

def _dets(boxes, probs, classes):
    return ImageDetections(np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(probs, np.float32),
                           np.asarray(classes, np.int64))


def _truths(boxes, classes):
    return ImageTruths(np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(classes, np.int64))


def test_area_under_curve_and_mean_over_all_names():
    # One truth per image, class 0. Ranked: 0.9 TP (image 0), 0.8 FP (nothing there), 0.7 TP (image 1).
    # Precision/recall after each rank: (1, .5), (.5, .5), (2/3, 1). Area: .5 * 1 + .5 * 2/3 = 5/6.
    # Darknet's mean divides by all 3 names, two of which have no truth and no detection: 5/18.
    box = [0.5, 0.5, 0.2, 0.2]
    report = darknet_map([_dets([box, [0.1, 0.1, 0.05, 0.05]], [0.9, 0.8], [0, 0]), _dets([box], [0.7], [0])],
                         [_truths([box], [0]), _truths([box], [0])], ["a", "b", "c"])
    assert report.classes[0].ap == pytest.approx(5 / 6, abs=1e-12)
    assert report.map == pytest.approx(5 / 18, abs=1e-12)
    assert (report.tp, report.fp, report.fn) == (2, 1, 0)
    assert report.precision == pytest.approx(2 / 3) and report.recall == 1.0
    assert report.average_iou == pytest.approx(2 / 3)  # two IoUs of 1 over TP + FP = 3
    # 11 points: recall 0..0.5 reach precision 1, 0.6..1 reach 2/3: (6 + 5 * 2/3) / 11
    eleven = darknet_map([_dets([box, [0.1, 0.1, 0.05, 0.05]], [0.9, 0.8], [0, 0]), _dets([box], [0.7], [0])],
                         [_truths([box], [0]), _truths([box], [0])], ["a"], points=11)
    assert eleven.map == pytest.approx((6 + 5 * 2 / 3) / 11, abs=1e-12)


def test_a_truth_found_twice_is_a_false_positive_and_probabilities_below_thresh_count():
    # Two detections of the same truth: the second in the ranking is a false positive. At thresh 0.25 the
    # earlier detection of the image takes the truth even below thresh, so the later one at 0.9 is counted FP.
    box = [0.5, 0.5, 0.2, 0.2]
    near = [0.51, 0.5, 0.2, 0.2]
    report = darknet_map([_dets([box, near], [0.1, 0.9], [0, 0])], [_truths([box], [0])], ["a"])
    assert (report.tp, report.fp, report.fn) == (0, 1, 1)
    # Ranked: 0.9 (TP in the curve: its truth is free), 0.1 FP: AP = 1 * 1.
    assert report.classes[0].ap == 1.0
    # An IoU of exactly the threshold does not match (Darknet's "above").
    square, half = [0.5, 0.5, 0.25, 0.25], [0.5, 0.5, 0.25, 0.125]  # IoU 0.5 exactly in float32
    assert darknet_map([_dets([half], [0.9], [0])], [_truths([square], [0])], ["a"]).classes[0].ap == 0.0
    assert darknet_map([_dets([half], [0.9], [0])], [_truths([square], [0])], ["a"], iou_thresh=0.49).map == 1.0


def test_recall_points_are_multiples_of_the_reciprocal_as_in_darknets_ofast_build():
    # 5 truths, 3 found first (precision 1 at recall 0.2, 0.4, 0.6). Darknet's Makefile builds with -Ofast, so its
    # recall point 6 of 11 is 6 * (1.0 / 10) = 0.6000000000000001, above 3/5: that point gets precision 0 and the
    # AP is 6/11, not 7/11 (on coco128 with yolov3-tiny, four classes print Darknet's -points 11 AP only so).
    boxes = [[0.1 + 0.2 * k, 0.5, 0.1, 0.1] for k in range(5)]
    report = darknet_map([_dets(boxes[:3], [0.9, 0.8, 0.7], [0, 0, 0])], [_truths(boxes, [0] * 5)], ["a"], points=11)
    assert report.map == pytest.approx(6 / 11, abs=1e-12)


def test_the_wrong_class_does_not_match_and_points_one_is_refused():
    box = [0.5, 0.5, 0.2, 0.2]
    report = darknet_map([_dets([box], [0.9], [1])], [_truths([box], [0])], ["a", "b"])
    assert report.map == 0.0 and (report.tp, report.fp, report.fn) == (0, 1, 1)
    with pytest.raises(ValueError, match="points=1"):
        darknet_map([], [], ["a"], points=1)


# ----------------------------------------------------------------------------- against Darknet's CLI

def write_dataset(folder: Path, size_wh, count: int, names, label_map=None, unlabeled=(1,)) -> Path:
    """``count`` coco128 images resized to ``size_wh`` (a full resize keeps YOLO labels as they are) as PNGs with
    their labels beside them (images at positions ``unlabeled`` get none), a valid list, names and .data."""
    folder.mkdir(parents=True)
    root = asset("coco128")
    lines = []
    for k, path in enumerate(sorted((root / "images/train2017").glob("*.jpg"))[:count]):
        image = cv2.resize(cv2.imread(str(path)), size_wh, interpolation=cv2.INTER_AREA)
        png = folder / f"{path.stem}.png"
        cv2.imwrite(str(png), image)
        lines.append(str(png))
        if k in unlabeled:
            continue
        rows = [line.split() for line in (root / "labels/train2017" / f"{path.stem}.txt").read_text().splitlines()
                if line.strip()]
        if label_map is not None:
            rows = [[str(label_map(int(r[0])))] + r[1:] for r in rows]
        (folder / f"{path.stem}.txt").write_text("".join(" ".join(r) + "\n" for r in rows))
    (folder / "valid.txt").write_text("".join(f"{line}\n" for line in lines))
    (folder / "obj.names").write_text("".join(f"{n}\n" for n in names))
    data = folder / "obj.data"
    data.write_text(f"classes={len(names)}\nvalid={folder / 'valid.txt'}\nnames={folder / 'obj.names'}\n")
    return data


REPORT_LINE = re.compile(r"(.*detections_count = .*|class_id = .*|.*for conf_thresh = .*"
                         r"|.*mean average precision \(mAP@.*|.*IoU threshold = .*)")


def report_lines(text: str):
    """The lines of the report both print (Darknet prints its rank counter with carriage returns before them)."""
    return [m.group(1).rstrip() for line in re.split(r"[\r\n]", text) for m in [REPORT_LINE.search(line)] if m]


def darknet_report(darknet, data: Path, cfg: Path, weights: Path, *flags) -> str:
    run = subprocess.run([str(darknet.folder / "darknet"), "detector", "map", str(data), str(cfg), str(weights),
                          *map(str, flags)], capture_output=True, text=True, cwd=data.parent,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout


def our_report(tmp_path: Path, data: Path, cfg: Path, weights: Path, *flags):
    from yolo.cli import eval as tool

    save_dir = tmp_path / f"ours{len(list(tmp_path.iterdir()))}"
    argv = ["--cfg", str(cfg), "--weights", str(weights), "--data", str(data), "--device", "cpu", "--workers", "0",
            "--no-plots", "--no-progress", "--fast", "--save-dir", str(save_dir), "--darknet-map", *map(str, flags)]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        tool.main(tool.parse_args(argv))
    return out.getvalue(), json.loads((save_dir / "metrics.json").read_text())["darknet_map"]


@pytest.mark.slow
@pytest.mark.usefixtures("private_cache")
def test_yolov3_tiny_real_weights_every_points_setting(darknet, tmp_path):
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    data = write_dataset(tmp_path / "data", (416, 416), 4, coco_names())  # 80 names, most without a truth
    for darknet_flags, our_flags in [(("-points", 0), ()),
                                     (("-points", 11, "-iou_thresh", 0.3, "-thresh", 0.1),
                                      ("--points", 11, "--darknet-iou-thresh", 0.3, "--darknet-thresh", 0.1)),
                                     (("-points", 101), ("--points", 101))]:
        expected = report_lines(darknet_report(darknet, data, cfg, weights, *darknet_flags))
        text, saved = our_report(tmp_path, data, cfg, weights, *our_flags)
        assert report_lines(text) == expected, darknet_flags
        assert len(expected) == 1 + 80 + 4
        mean = re.search(r"\(mAP@\S+\) = (\S+),", expected[-1]).group(1)
        assert f"{saved['map']:f}" == mean and saved["map"] > 0
        assert len(saved["classes"]) == 80


@pytest.mark.usefixtures("private_cache")
def test_yolov3_tiny_on_coco128_jpegs_at_their_own_sizes(darknet_opencv, tmp_path):
    """8 coco128 JPEGs (640x480, 640x427, ...: resized by Darknet's resize_image to 416x416) and their labels
    where they are: Darknet's OpenCV build reads them with OpenCV's imread as we do, so the network input is the
    same float for float and the report must be Darknet's to the digit. (Its default build decodes with stb_image,
    whose pixels differ from libjpeg's by a level here and there: a few detections then cross a threshold.)"""
    folder = tmp_path / "data"
    folder.mkdir()
    images = sorted((asset("coco128") / "images/train2017").glob("*.jpg"))[:8]
    assert len({cv2.imread(str(p)).shape for p in images}) > 1  # several sizes, none the network's
    (folder / "valid.txt").write_text("".join(f"{p}\n" for p in images))
    (folder / "coco.names").write_text("".join(f"{n}\n" for n in coco_names()))
    data = folder / "coco.data"
    data.write_text(f"classes=80\nvalid={folder / 'valid.txt'}\nnames={folder / 'coco.names'}\n")
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    expected = report_lines(darknet_report(darknet_opencv, data, cfg, weights, "-points", 0))
    text, saved = our_report(tmp_path, data, cfg, weights)
    assert report_lines(text) == expected
    assert len(expected) == 1 + 80 + 4 and saved["tp"] > 0 and saved["map"] > 0


# letter_box=1 on a 128x71 image: a border of 12 rows above, 13 below (filled with 0.5 by Darknet's float
# letterbox_image, as by ours), and Darknet's map back with the float half (12.5).
@pytest.mark.slow
@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("letter_box, image_wh", [(0, (128, 96)), (1, (128, 96)), (1, (128, 71))])
def test_random_yolov4_tiny_greedy_nms_letter_box(darknet, tmp_path, letter_box, image_wh):
    """yolov4-tiny (greedynms, scale_x_y) at 128x96 with 4 classes, random weights written by our writer; class 3
    has no truth; letter_box=1 on images of the input's size (letterbox_image is then the identity too) and on an
    image of another aspect ratio."""
    import torch

    from helpers import randomize_model
    from yolo.models.model import Darknet

    text = asset("cfg/yolov4-tiny.cfg").read_text()
    text = text.replace("classes=80", "classes=4").replace("filters=255", "filters=27")
    text = re.sub(r"(?m)^width=\d+", "width=128", re.sub(r"(?m)^height=\d+", "height=96", text))
    text = text.replace("[net]", f"[net]\nletter_box={letter_box}", 1)
    cfg = tmp_path / "small.cfg"
    cfg.write_text(text)
    model = Darknet(cfg)
    randomize_model(model, seed=3, calibrate_hw=(96, 128))
    with torch.no_grad():  # objectness and class logits spread out, so that the curve is not all ties
        for head_input in [model.module_list[i - 1] for i, m in enumerate(model.module_list) if m in model.yolo_layers]:
            head_input.conv.bias.normal_(-1.0, 2.0, generator=torch.Generator().manual_seed(5))
    weights = tmp_path / "small.weights"
    model.save_darknet_weights(weights)
    data = write_dataset(tmp_path / "data", image_wh, 4, ["a", "b", "c", "unused"], label_map=lambda c: c % 3)
    # Low thresholds, so that random boxes match truths: TP and FP at -thresh, and a curve of several steps.
    expected = report_lines(darknet_report(darknet, data, cfg, weights, "-iou_thresh", 0.1, "-thresh", 0.05))
    text, saved = our_report(tmp_path, data, cfg, weights, "--darknet-iou-thresh", 0.1, "--darknet-thresh", 0.05)
    assert report_lines(text) == expected
    assert saved["classes"]["unused"]["ap"] == 0.0 and saved["classes"]["unused"]["tp"] == 0
    assert 0 < saved["map"] < 1 and saved["tp"] > 0 and saved["fp"] > 0


def test_heads_other_than_yolo_and_one_recall_point_are_refused(capsys):
    from helpers import one_line_error
    from yolo.cli.flags.eval import parse_args
    from yolo.evaluation.darknet_evaluator import check_darknet_map_model
    from yolo.models.model import Darknet

    with pytest.raises(ValueError, match=r"\[yolo\] heads only.*RegionLayer"):
        check_darknet_map_model(Darknet(asset("cfg/yolov2-tiny.cfg")))
    check_darknet_map_model(Darknet(asset("cfg/yolov3-tiny.cfg")))
    message = one_line_error(capsys, lambda: parse_args(["--weights", "w.pt", "--data", "d.yaml", "--points", "1"]))
    assert "--points" in message and "11, 101" in message
