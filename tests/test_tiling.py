"""Sliced detection (yolo.inference.tiling): slices cover the image, SAHI's greedy merging, a single slice is the
untiled detection, and on a mosaic of coco128 images (truth known) the tiled mAP50 (pycocotools) comes near the
images detected one by one while the untiled one does not."""
import contextlib
import io
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import yaml
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from conftest import asset
from helpers import tool_parser
from yolo.cli.eval import main as eval_main, parse_args as eval_args
from yolo.inference.detector import Detector
from yolo.inference.tiling import TiledDetector, greedy_merge, slice_windows

SIZE = 224  # the network input, and each mosaic cell
GRID = 3


@pytest.mark.parametrize("shape, overlap", [((1000, 700), 0.2), ((224, 1500), 0.5), ((300, 224), 0.0)])
def test_slices_cover_the_image_and_overlap_as_asked(shape, overlap):
    windows = slice_windows(shape, (SIZE, SIZE), overlap)
    covered = np.zeros(shape, dtype=bool)
    for left, top, right, bottom in windows:
        assert right - left == min(SIZE, shape[1]) and bottom - top == min(SIZE, shape[0])
        assert right <= shape[1] and bottom <= shape[0]
        covered[top:bottom, left:right] = True
    assert covered.all()
    lefts = sorted({w[0] for w in windows})
    for a, b in zip(lefts, lefts[1:]):  # neighbours share at least the overlap
        assert a + SIZE - b >= int(overlap * SIZE)


def test_greedy_merge_joins_the_parts_of_an_object_cut_by_slice_edges_within_a_class():
    # An object at x 150..300 seen cut by two overlapping slices (edges at x=224 and x=180): two partial boxes
    # sharing 44 of their 74 and 120 columns. IoU 0.29, which NMS at 0.45 keeps both of; intersection over the
    # smaller box 4224 / 7400 = 0.57, which merges them.
    boxes = torch.tensor([[150.0, 50, 224, 150],
                          [180.0, 52, 300, 148],
                          [185.0, 60, 290, 140],   # another class over the same place: not merged
                          [400.0, 50, 450, 100]])  # elsewhere
    scores = torch.tensor([0.9, 0.6, 0.7, 0.5])
    labels = torch.tensor([0, 0, 1, 0])
    merged, merged_scores, keep = greedy_merge(boxes, scores, labels, thres=0.5)
    assert keep.tolist() == [0, 2, 3]
    assert merged[0].tolist() == [150.0, 50.0, 300.0, 150.0] and merged_scores.tolist() == pytest.approx([0.9, 0.7, 0.5])
    assert merged[1].tolist() == boxes[2].tolist() and merged[2].tolist() == boxes[3].tolist()
    assert greedy_merge(boxes, scores, labels, thres=0.6)[2].tolist() == [0, 2, 1, 3]  # 0.57 is below 0.6


@pytest.fixture(scope="module")
def detector():
    return Detector(asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights"), img_size=SIZE,
                    conf_thres=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(SIZE, SIZE), (SIZE - 40, SIZE - 24)])
def test_an_image_within_one_slice_is_detected_exactly_as_untiled(detector, shape):
    image = cv2.resize(cv2.imread(str(asset("images/dog.jpg"))), shape[::-1])
    tiled, plain = TiledDetector(detector, 0.2)(image)[0], detector(image)[0]
    assert len(plain["boxes"]) > 0
    for key in ("boxes", "scores", "labels"):
        assert torch.equal(tiled[key], plain[key])


def mosaic():
    """``GRID x GRID`` coco128 images, each fitted into a ``SIZE`` cell of one canvas; their truth in canvas pixels
    as COCO annotations ``(category, [x, y, w, h])``, and each cell image with its offset."""
    paths = sorted(asset("coco128/images/train2017").glob("*.jpg"))[:GRID * GRID]
    canvas = np.zeros((GRID * SIZE, GRID * SIZE, 3), np.uint8)
    truth, cells = [], []
    for k, path in enumerate(paths):
        image = cv2.imread(str(path))
        scale = SIZE / max(image.shape[:2])
        h, w = round(image.shape[0] * scale), round(image.shape[1] * scale)
        image = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
        y0, x0 = (k // GRID) * SIZE, (k % GRID) * SIZE
        canvas[y0:y0 + h, x0:x0 + w] = image
        cells.append((image, x0, y0))
        labels = asset("coco128/labels/train2017") / f"{path.stem}.txt"
        for c, cx, cy, bw, bh in np.loadtxt(labels, ndmin=2):
            truth.append((int(c), [x0 + (cx - bw / 2) * w, y0 + (cy - bh / 2) * h, bw * w, bh * h]))
    return canvas, truth, cells


def map50(truth, detections, shape):
    """pycocotools' AP at IoU 0.5 of ``detections`` ``[(category, [x, y, w, h], score)]`` on one image."""
    gt = COCO()
    gt.dataset = {"images": [{"id": 1, "height": shape[0], "width": shape[1]}],
                  "annotations": [{"id": i + 1, "image_id": 1, "category_id": c, "bbox": b, "area": b[2] * b[3],
                                   "iscrowd": 0} for i, (c, b) in enumerate(truth)],
                  "categories": [{"id": c} for c in range(80)]}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        found = gt.loadRes([{"image_id": 1, "category_id": c, "bbox": b, "score": s} for c, b, s in detections])
        evaluation = COCOeval(gt, found, "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation.stats[1]


def as_coco(det, dx=0, dy=0):
    return [(int(c), [x1 + dx, y1 + dy, x2 - x1, y2 - y1], float(s))
            for (x1, y1, x2, y2), s, c in zip(det["boxes"].tolist(), det["scores"].tolist(), det["labels"].tolist())]


@pytest.mark.slow
def test_tiled_map50_on_a_mosaic_comes_near_the_images_one_by_one(detector):
    canvas, truth, cells = mosaic()
    one_by_one = []
    for det, (_, x0, y0) in zip(detector([image for image, _, _ in cells]), cells):
        one_by_one += as_coco(det, x0, y0)
    tiled = TiledDetector(detector, overlap=0.2)
    maps = {"one by one": map50(truth, one_by_one, canvas.shape),
            "untiled": map50(truth, as_coco(detector(canvas)[0]), canvas.shape),
            "tiled": map50(truth, as_coco(tiled(canvas)[0]), canvas.shape)}
    assert tiled.slices == 17  # 4 x 4 slices of 224 over 672 pixels at 0.2 overlap, and the whole image
    assert maps["one by one"] > 0.3, maps
    assert maps["tiled"] >= 0.85 * maps["one by one"], maps
    assert maps["untiled"] <= 0.5 * maps["one by one"], maps


def test_tile_flags(tmp_path):
    parser = tool_parser("detect")
    base = ["--weights", "w.pt", "--source", "x.jpg"]
    args = parser.parse_args(base + ["--tile", "--tile-overlap", "0.3", "--tile-merge", "greedy"])
    assert (args.tile, args.tile_overlap, args.tile_merge) == (True, 0.3, "greedy")
    assert parser.parse_args(base).tile is False
    with pytest.raises(SystemExit):
        parser.parse_args(base + ["--tile-overlap", "1"])


@pytest.mark.slow
def test_eval_tile_scores_the_mosaic_as_sliced_detection_does(tmp_path):
    """tools/eval.py --tile on the mosaic as a dataset: near the images' own mAP50 (0.40 detected one by one in
    the test above, where the untiled mosaic scores 0.0)."""
    canvas, truth, _ = mosaic()
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "mosaic.png"), canvas)
    side = canvas.shape[0]
    (tmp_path / "labels" / "mosaic.txt").write_text("".join(
        f"{c} {(x + w / 2) / side:.6f} {(y + h / 2) / side:.6f} {w / side:.6f} {h / side:.6f}\n"
        for c, (x, y, w, h) in truth))
    names = [n.strip() for n in asset("cfg/coco.names").read_text().splitlines() if n.strip()]
    (tmp_path / "data.yaml").write_text(yaml.safe_dump({"path": str(tmp_path), "train": "images", "val": "images",
                                                        "nc": 80, "names": names}))
    common = ["--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", asset("weights/yolov3-tiny.weights"),
              "--data", tmp_path / "data.yaml", "--img-size", SIZE, "--device", "cpu", "--no-plots",
              "--workers", "0", "--project", tmp_path / "runs"]
    tiled = eval_main(eval_args([str(a) for a in common + ["--tile"]]))
    assert tiled["mAP50"] >= 0.3, tiled["mAP50"]
    settings = json.loads((Path(tiled["save_dir"]) / "metrics.json").read_text())["settings"]
    assert settings["tile_overlap"] == 0.2 and settings["tile_merge"] == "nms"
