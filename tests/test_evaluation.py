"""Evaluator, the in-house COCO twin and the plots.

pycocotools is the reference: every number we compute ourselves is compared with it, on noisy
copies of the ground truth and on real detections (OpenCV DNN running yolov3-tiny on coco128).
"""
import json
import logging

import cv2
import numpy as np
import pytest
import torch

from conftest import asset
from helpers import make_gt
from yolo.evaluation import (COCO91_IDS, COCO_NAMES, Evaluator, coco_category_ids, confusion_matrix,
                             evaluate_model, ground_truth_to_coco)
from yolo.evaluation.metrics import COCO_STAT_NAMES

TOL = 1e-9
SCALARS = ("mAP50", "mAP50_95", "mAP75", "AR100")


# ----------------------------------------------------------------------------- helpers
def make_det(boxes, scores, labels):
    return {"boxes": torch.as_tensor(np.asarray(boxes, dtype=np.float32).reshape(-1, 4)),
            "scores": torch.as_tensor(np.asarray(scores, dtype=np.float32).reshape(-1)),
            "labels": torch.as_tensor(np.asarray(labels, dtype=np.int64).reshape(-1))}


def noisy_dataset(seed, num_images=60, num_classes=6):
    """Random ground truth and detections made from it: jittered copies (some duplicated, some with
    the wrong class), plus pure false positives; some images have no boxes at all."""
    rng = np.random.default_rng(seed)
    gts, dets = [], []
    for i in range(num_images):
        k = int(rng.integers(0, 9))
        xy = rng.uniform(0, 500, (k, 2))
        wh = rng.uniform(4, 250, (k, 2))  # small, medium and large boxes
        boxes = np.concatenate([xy, xy + wh], 1)
        labels = rng.integers(0, num_classes, k)
        gts.append(make_gt(1000 + 7 * i, boxes, labels))
        n = int(rng.integers(0, 3 * k + 1))
        if k:
            src = rng.integers(0, k, n)
            scale = np.concatenate([wh[src], wh[src]], 1)
            b = boxes[src] + rng.normal(0, 0.08, (n, 4)) * scale
            lab = np.where(rng.random(n) < 0.15, rng.integers(0, num_classes, n), labels[src])
        else:
            b, lab = np.zeros((0, 4)), np.zeros(0, dtype=np.int64)
        extra = int(rng.integers(0, 6))
        xy = rng.uniform(0, 500, (extra, 2))
        b = np.concatenate([b, np.concatenate([xy, xy + rng.uniform(4, 200, (extra, 2))], 1)])
        b[:, 2:] = np.maximum(b[:, 2:], b[:, :2] + 0.5)
        lab = np.concatenate([lab, rng.integers(0, num_classes, extra)])
        dets.append(make_det(b, rng.random(len(b)), lab))
    return [f"class{c}" for c in range(num_classes)], gts, dets


def assert_fast_equals_coco(evaluator):
    fast = evaluator.evaluate(use_pycocotools=False)
    coco = evaluator.evaluate(use_pycocotools=True)
    assert fast["source"] == "fast" and coco["source"] == "pycocotools"
    for key in SCALARS:
        assert abs(fast[key] - coco[key]) < TOL, (key, fast[key], coco[key])
    assert fast["per_class"].keys() == coco["per_class"].keys()
    for name in coco["per_class"]:
        for key in ("AP50", "AP"):
            assert abs(fast["per_class"][name][key] - coco["per_class"][name][key]) < TOL, (name, key)
    return fast, coco


def coco128_ground_truth(files):
    """Ground truth of coco128 images read straight from the YOLO label files (independent of yolo.data)."""
    gts = []
    for path in files:
        h, w = cv2.imread(str(path)).shape[:2]
        label_file = path.parent.parent.parent / "labels" / path.parent.name / (path.stem + ".txt")
        rows = np.loadtxt(label_file, ndmin=2) if label_file.exists() else np.zeros((0, 5))
        rows = rows.reshape(-1, 5)
        cx, cy, bw, bh = rows[:, 1] * w, rows[:, 2] * h, rows[:, 3] * w, rows[:, 4] * h
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1)
        gts.append(make_gt(int(path.stem), boxes, rows[:, 0].astype(np.int64), (h, w)))
    return gts


# ----------------------------------------------------------------------------- ground truth
def test_ground_truth_to_coco_is_valid_for_pycocotools():
    from pycocotools.coco import COCO

    gts = [make_gt(3, [[10, 20, 110, 70]], [1]), make_gt(5, [], []), make_gt(9, [[0, 0, 5, 5], [1, 1, 9, 9]], [0, 1])]
    data = ground_truth_to_coco(gts, ["a", "b"])
    assert [img["id"] for img in data["images"]] == [3, 5, 9]  # the image without boxes is listed
    assert [a["id"] for a in data["annotations"]] == [1, 2, 3]  # ids from 1: COCOeval treats 0 as "no match"
    first = data["annotations"][0]
    assert first["bbox"] == [10.0, 20.0, 100.0, 50.0] and first["area"] == 5000.0 and first["iscrowd"] == 0
    assert first["category_id"] == 2 and data["categories"] == [
        {"id": 1, "name": "a", "supercategory": ""}, {"id": 2, "name": "b", "supercategory": ""}]
    assert "info" in data
    coco = COCO()
    coco.dataset = data
    coco.createIndex()
    assert coco.getImgIds() == [3, 5, 9] and len(coco.getAnnIds(imgIds=[9])) == 2


def test_category_ids_official_for_coco_names_only():
    assert coco_category_ids(list(COCO_NAMES)) == list(COCO91_IDS)
    assert len(set(COCO91_IDS)) == 80 and max(COCO91_IDS) == 90
    # COCO's own spelling maps to the same ids
    coco_spelling = [{"motorbike": "motorcycle", "sofa": "couch", "tvmonitor": "tv"}.get(n, n) for n in COCO_NAMES]
    assert coco_category_ids(coco_spelling) == list(COCO91_IDS)
    assert coco_category_ids(["cat", "dog"]) == [1, 2]


def test_bad_ground_truth_labels_are_reported():
    with pytest.raises(ValueError, match="class 2 outside 0..1"):
        Evaluator(["a", "b"], [make_gt(1, [[0, 0, 1, 1]], [2])])
    with pytest.raises(ValueError, match="twice"):
        Evaluator(["a"], [make_gt(1, [], []), make_gt(1, [], [])])


# ----------------------------------------------------------------------------- fast twin == pycocotools
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_fast_metrics_equal_pycocotools_on_noisy_detections(seed):
    names, gts, dets = noisy_dataset(seed)
    evaluator = Evaluator(names, gts)
    evaluator.process([g["image_id"] for g in gts], dets)
    fast, coco = assert_fast_equals_coco(evaluator)
    assert 0.05 < coco["mAP50"] < 0.95  # a realistic, non-degenerate regime
    assert coco["mAP50_95"] < coco["mAP50"]


def test_fast_metrics_equal_pycocotools_with_more_than_100_detections_per_class():
    # COCO keeps the 100 best detections per image and class: the twin must cut at the same place.
    rng = np.random.default_rng(7)
    boxes = np.array([[10, 10, 60, 60], [100, 100, 200, 180]], dtype=np.float32)
    det_boxes = np.concatenate([np.tile(boxes, (90, 1)) + rng.normal(0, 3, (180, 4))], 0)
    evaluator = Evaluator(["x"], [make_gt(1, boxes, [0, 0])])
    evaluator.process([1], [make_det(det_boxes, rng.random(180), np.zeros(180))])
    assert_fast_equals_coco(evaluator)


@pytest.fixture(scope="module")
def real_detections(tmp_path_factory):
    """yolov3-tiny detections (OpenCV DNN, conf 0.001, NMS 0.6, every class above threshold) on 32
    coco128 images at 416, boxes in original pixels; plus their ground truth."""
    from reference import opencv_forward
    from yolo.inference.postprocess import PostprocessOptions, postprocess

    files = sorted((asset("coco128/images/train2017")).glob("*.jpg"))[:32]
    images = [cv2.imread(str(f)) for f in files]
    blob = cv2.dnn.blobFromImages(images, 1 / 255.0, (416, 416), swapRB=True, crop=False)
    out = opencv_forward(asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights"), blob,
                         tmp_path_factory.mktemp("cv"))
    pred = torch.from_numpy(out.copy())
    obj = pred[..., 4:5]
    pred[..., 5:] = torch.where(obj > 0, pred[..., 5:] / obj.clamp_min(1e-30), torch.zeros_like(pred[..., 5:]))
    pred[..., :4] *= 416
    dets = postprocess(pred, PostprocessOptions(0.001, 0.6, multi_label=True, max_det=300))
    for det, img in zip(dets, images):
        h, w = img.shape[:2]
        det["boxes"] = det["boxes"] * torch.tensor([w / 416, h / 416, w / 416, h / 416])
    return coco128_ground_truth(files), dets


@pytest.mark.slow
def test_fast_metrics_equal_pycocotools_on_real_detections(real_detections):
    gts, dets = real_detections
    evaluator = Evaluator(list(COCO_NAMES), gts)
    evaluator.process([g["image_id"] for g in gts], dets)
    fast, coco = assert_fast_equals_coco(evaluator)
    assert coco["mAP50"] > 0.2  # yolov3-tiny really detects things here
    assert sum(len(d["scores"]) for d in dets) > 32 * 100  # conf 0.001: long low-score tails


# ----------------------------------------------------------------------------- edge cases
def test_perfect_detections_score_one():
    gts = [make_gt(1, [[10, 10, 50, 60], [100, 120, 300, 330]], [0, 1]), make_gt(2, [[5, 5, 400, 400]], [1])]
    dets = [make_det(g["boxes"], [0.9] * len(g["labels"]), g["labels"]) for g in gts]
    evaluator = Evaluator(["a", "b"], gts)
    evaluator.process([1, 2], dets)
    fast, coco = assert_fast_equals_coco(evaluator)
    assert coco["mAP50"] == pytest.approx(1.0) and coco["mAP50_95"] == pytest.approx(1.0)
    assert coco["per_class"]["b"] == {"images": 2, "instances": 2, "P": 1.0, "R": 1.0, "AP50": 1.0, "AP": 1.0}


@pytest.mark.parametrize("use_pycocotools", [True, False])
def test_no_detections_gives_zero_without_crashing(use_pycocotools):
    gts = [make_gt(1, [[10, 10, 50, 60]], [0]), make_gt(2, [], [])]
    evaluator = Evaluator(["a"], gts, use_pycocotools=use_pycocotools)
    evaluator.process([1, 2], [make_det([], [], []), make_det([], [], [])])
    metrics = evaluator.evaluate()
    assert metrics["mAP50"] == 0.0 and metrics["mAP50_95"] == 0.0 and metrics["num_detections"] == 0
    assert metrics["per_class"]["a"]["AP"] == 0.0
    assert evaluator.results_json() == []
    evaluator.class_table()  # reports still work


def test_detections_on_background_images_count_as_false_positives():
    gts = [make_gt(1, [[10, 10, 50, 60]], [0]), make_gt(2, [], [])]
    dets = [make_det([[10, 10, 50, 60]], [0.5], [0]), make_det([[0, 0, 30, 30]], [0.9], [0])]
    evaluator = Evaluator(["a"], gts)
    evaluator.process([1, 2], dets)
    fast, coco = assert_fast_equals_coco(evaluator)
    # ranked: FP (0.9) then TP (0.5): precision 0.5 at recall 1
    assert coco["mAP50"] == pytest.approx(0.5)


def test_only_processed_images_are_scored():
    gts = [make_gt(1, [[10, 10, 50, 60]], [0]), make_gt(2, [[10, 10, 50, 60]], [0])]
    evaluator = Evaluator(["a"], gts)
    evaluator.process([1], [make_det([[10, 10, 50, 60]], [0.5], [0])])
    metrics = evaluator.evaluate()
    assert metrics["num_images"] == 1 and metrics["mAP50"] == pytest.approx(1.0)


def test_coco_annotation_file_ignores_crowd_regions(tmp_path):
    # A detection on a crowd region is neither a hit nor a false positive for COCO.
    data = {"info": {}, "images": [{"id": 4, "height": 100, "width": 100, "file_name": "4.jpg"}],
            "annotations": [{"id": 1, "image_id": 4, "category_id": 9, "bbox": [10, 10, 20, 20], "area": 400,
                             "iscrowd": 0},
                            {"id": 2, "image_id": 4, "category_id": 9, "bbox": [50, 50, 40, 40], "area": 1600,
                             "iscrowd": 1}],
            "categories": [{"id": 9, "name": "a"}]}
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(data))
    gts = [make_gt(4, [[10, 10, 30, 30]], [0], (100, 100))]  # what a dataset keeps: crowd boxes dropped
    dets = [make_det([[52, 52, 88, 88], [10, 10, 30, 30]], [0.9, 0.8], [0, 0])]
    with_file = Evaluator(["a"], gts, category_ids=[9], annotation_file=path)
    with_file.process([4], dets)
    assert with_file.evaluate()["mAP50"] == pytest.approx(1.0)
    in_memory = Evaluator(["a"], gts, category_ids=[9])
    in_memory.process([4], dets)
    assert in_memory.evaluate()["mAP50"] == pytest.approx(0.5)


def test_string_image_ids_and_results_json(tmp_path):
    gts = [make_gt("img_b", [[10, 10, 50, 60]], [1]), make_gt("img_a", [], [])]
    evaluator = Evaluator(["a", "b"], gts, category_ids=[7, 3])
    evaluator.process(["img_b"], [make_det([[10, 10, 50, 60], [1, 2, 4, 8]], [0.75, 0.25], [1, 0])])
    entries = evaluator.results_json()
    assert entries == [
        {"image_id": 1, "category_id": 3, "bbox": [10.0, 10.0, 40.0, 50.0], "score": 0.75},
        {"image_id": 1, "category_id": 7, "bbox": [1.0, 2.0, 3.0, 6.0], "score": 0.25},
    ]
    path = evaluator.save_results_json(tmp_path / "res.json")
    assert json.loads(path.read_text()) == entries
    assert evaluator.evaluate()["mAP50"] == pytest.approx(1.0)


def test_process_rejects_unknown_images_and_labels():
    evaluator = Evaluator(["a"], [make_gt(1, [], [])])
    with pytest.raises(KeyError, match="not in the ground truth"):
        evaluator.process([2], [make_det([], [], [])])
    with pytest.raises(ValueError, match="outside"):
        evaluator.process([1], [make_det([[0, 0, 1, 1]], [0.5], [3])])


# ----------------------------------------------------------------------------- P/R, confusion
def test_precision_recall_at_best_f1():
    # 4 boxes of one class; detections ranked TP, TP, FP, TP, FP: best F1 keeps the first four.
    boxes = [[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10], [60, 0, 70, 10]]
    dets = [[0, 0, 10, 10], [20, 0, 30, 10], [100, 100, 110, 110], [40, 0, 50, 10], [200, 0, 210, 10]]
    evaluator = Evaluator(["a"], [make_gt(1, boxes, [0] * 4)])
    evaluator.process([1], [make_det(dets, [0.9, 0.8, 0.7, 0.6, 0.5], [0] * 5)])
    m = evaluator.evaluate()["per_class"]["a"]
    # F1 at each cut: 1 det 0.4, 2 dets 0.667, 3 dets 0.571, 4 dets 0.75, 5 dets 0.667
    assert m["P"] == pytest.approx(3 / 4) and m["R"] == pytest.approx(3 / 4)


def test_confusion_matrix_counts():
    gt = [(np.array([[0, 0, 10, 10], [20, 20, 10, 10], [50, 50, 10, 10]], float), np.array([0, 1, 1]))]
    dt = [(np.array([[0, 0, 10, 10], [20, 20, 10, 10], [90, 90, 5, 5], [51, 51, 10, 10]], float),
           np.array([0.9, 0.8, 0.7, 0.1]), np.array([0, 0, 1, 1]))]
    m = confusion_matrix(gt, dt, num_classes=2, conf_thres=0.25, iou_thres=0.45)
    expected = np.zeros((3, 3), dtype=np.int64)
    expected[0, 0] = 1  # class 0 found as 0
    expected[1, 0] = 1  # class 1 box predicted as class 0
    expected[1, 2] = 1  # class 1 box missed (its detection is under conf_thres)
    expected[2, 1] = 1  # a class-1 detection on background
    np.testing.assert_array_equal(m, expected)


def test_confusion_matrix_prefers_same_class_matches():
    # A rider (person, class 0) on a horse (class 1): the person detection overlaps the horse box more
    # than the horse detection does, yet each box is credited to the detection of its own class.
    gt = [(np.array([[0, 0, 100, 100], [30, 0, 40, 60]], float), np.array([1, 0]))]
    dt = [(np.array([[0, 0, 95, 95], [12, 0, 88, 100], [30, 0, 40, 60]], float), np.array([0.9, 0.8, 0.7]),
           np.array([0, 1, 0]))]
    # IoU with the horse box: person detection 0.9025, horse detection 0.88. The person detection
    # matches no person box (IoU 0.27 with the rider): it is a background detection.
    m = confusion_matrix(gt, dt, num_classes=2, conf_thres=0.25, iou_thres=0.45)
    expected = np.zeros((3, 3), dtype=np.int64)
    expected[0, 0] = expected[1, 1] = 1
    expected[2, 0] = 1
    np.testing.assert_array_equal(m, expected)


# ----------------------------------------------------------------------------- reports and plots
@pytest.mark.slow
def test_reports_and_plots(tmp_path):
    names, gts, dets = noisy_dataset(5, num_images=20, num_classes=4)
    evaluator = Evaluator(names, gts)
    evaluator.process([g["image_id"] for g in gts], dets)
    metrics = evaluator.evaluate()
    table = evaluator.class_table()
    assert table.splitlines()[1].split()[0] == "all" and all(n in table for n in metrics["per_class"])
    assert "Average Precision" in evaluator.summary_text()
    paths = evaluator.save_plots(tmp_path)
    assert sorted(p.name for p in paths) == ["confusion_matrix.png", "pr_curves.png", "pr_curves_per_class.png"]
    for p in paths:
        image = cv2.imread(str(p))
        assert image is not None and image.shape[0] > 100 and image.std() > 1  # a real, non-blank picture
    m = evaluator.save_metrics(tmp_path / "metrics.json", {"extra": 1})
    saved = json.loads(m.read_text())
    assert saved["mAP50"] == metrics["mAP50"] and saved["extra"] == 1


@pytest.mark.slow
def test_tensorboard_logging(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    names, gts, dets = noisy_dataset(6, num_images=10, num_classes=3)
    evaluator = Evaluator(names, gts)
    evaluator.process([g["image_id"] for g in gts], dets)
    metrics = evaluator.evaluate(use_pycocotools=False)
    with SummaryWriter(tmp_path) as writer:
        evaluator.write_tensorboard(writer, step=3)
    events = EventAccumulator(str(tmp_path), size_guidance={"images": 0})
    events.Reload()
    (scalar,) = events.Scalars("val/mAP50")
    assert scalar.step == 3 and scalar.value == pytest.approx(metrics["mAP50"], abs=1e-6)
    assert {"val/pr_curves", "val/confusion_matrix"} <= set(events.Tags()["images"])


def test_state_merge_combines_processes():
    names, gts, dets = noisy_dataset(8, num_images=12, num_classes=3)
    ids = [g["image_id"] for g in gts]
    whole = Evaluator(names, gts)
    whole.process(ids, dets)
    parts = [Evaluator(names, gts), Evaluator(names, gts)]
    parts[0].process(ids[::2], dets[::2])
    parts[1].process(ids[1::2], dets[1::2])
    parts[0].merge([parts[1].state()])
    assert parts[0].evaluate()["mAP50_95"] == whole.evaluate()["mAP50_95"]


# ----------------------------------------------------------------------------- evaluate_model
class BoxEcho(torch.nn.Module):
    """A fake detector: returns, for batch item ``i``, the rows stored in ``outputs[i]``."""

    def __init__(self, outputs):
        super().__init__()
        self.outputs = outputs
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.calls = 0

    def forward(self, x):
        assert not self.training and x.dtype == torch.float32 and x.max() <= 1
        out = self.outputs[self.calls]
        self.calls += 1
        return out


def test_evaluate_model_maps_boxes_back_through_the_letterbox():
    from yolo.ops.letterbox import LetterboxInfo

    num_classes = 3
    gts = [make_gt(11, [[40, 30, 200, 150], [300, 200, 620, 470]], [2, 0], (480, 640)),
           make_gt(12, [[10, 10, 100, 300]], [1], (320, 160))]
    # Letterbox into 416x416: (480, 640) -> scale 0.65, pad_y 52; (320, 160) -> scale 1.3, pad_x 104.
    infos = [{"image_id": 11, "orig_shape": (480, 640), "letterbox": LetterboxInfo(0.65, 0.65, 0.0, 52.0)},
             {"image_id": 12, "orig_shape": (320, 160), "letterbox": LetterboxInfo(1.3, 1.3, 104.0, 0.0)}]
    pred = torch.zeros(2, 10, 5 + num_classes)
    for i, (gt, info) in enumerate(zip(gts, infos)):
        boxes = info["letterbox"].to_input(gt["boxes"])
        for j, (box, label) in enumerate(zip(boxes, gt["labels"])):
            pred[i, j, :4] = torch.stack([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2, box[2] - box[0],
                                          box[3] - box[1]])
            pred[i, j, 4] = 0.9
            pred[i, j, 5 + label] = 0.8
    model = BoxEcho([pred[:1], pred[1:]])
    model.train()
    loader = [(torch.rand(1, 3, 416, 416), torch.zeros(0, 6), [infos[0]]),
              (torch.randint(0, 255, (1, 3, 416, 416), dtype=torch.uint8), torch.zeros(0, 6), [infos[1]])]
    evaluator = Evaluator(["a", "b", "c"], gts)
    metrics = evaluate_model(model, loader, evaluator, conf_thres=0.001, iou_thres=0.6, progress=False)
    assert model.training  # mode restored
    assert metrics["mAP50_95"] == pytest.approx(1.0) and metrics["num_detections"] == 3
    assert set(metrics["speed_ms"]) == {"preprocess", "inference", "nms"}
    res = {(r["image_id"], r["category_id"]): r["bbox"] for r in evaluator.results_json()}
    np.testing.assert_allclose(res[(12, 2)], [10, 10, 90, 290], atol=1e-3)


# ----------------------------------------------------------------------------- FastCOCOeval == COCOeval
@pytest.mark.parametrize("seed", [0, 1])
def test_fast_cocoeval_equals_cocoeval_with_crowds_and_area_ranges(seed):
    # Every area range and maxDets setting, crowd regions, ties in score and IoU: the subclass's
    # per-image records and accumulated arrays must be COCOeval's, bit for bit.
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from yolo.evaluation import FastCOCOeval

    names, gts, dets = noisy_dataset(seed, num_images=40, num_classes=4)
    data = ground_truth_to_coco(gts, names)
    rng = np.random.default_rng(seed)
    for ann in data["annotations"]:
        ann["iscrowd"] = int(rng.random() < 0.15)
    results = []
    for gt, det in zip(gts, dets):
        boxes = det["boxes"].double().numpy()
        scores = np.round(det["scores"].double().numpy(), 1)  # ties in score
        for (x1, y1, x2, y2), s, c in zip(boxes, scores, det["labels"].tolist()):
            results.append({"image_id": gt["image_id"], "category_id": c + 1, "bbox": [x1, y1, x2 - x1, y2 - y1],
                            "score": float(s)})
        for ann in data["annotations"]:  # exact copies: ties in IoU
            if ann["image_id"] == gt["image_id"] and rng.random() < 0.3:
                results.append({"image_id": gt["image_id"], "category_id": ann["category_id"],
                                "bbox": list(ann["bbox"]), "score": 0.5})
    evaluated = []
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = data
        coco_gt.createIndex()
        for cls in (COCOeval, FastCOCOeval):
            e = cls(coco_gt, coco_gt.loadRes([dict(r) for r in results]), "bbox")
            e.evaluate()
            e.accumulate()
            e.summarize()
            evaluated.append(e)
    ref, fast = evaluated
    assert len(ref.evalImgs) == len(fast.evalImgs)
    for a, b in zip(ref.evalImgs, fast.evalImgs):
        assert (a is None) == (b is None)
        if a is not None:
            for key in ("dtIds", "gtIds", "dtScores"):
                assert list(a[key]) == list(b[key]), key
            for key in ("dtMatches", "gtMatches", "gtIgnore", "dtIgnore"):
                np.testing.assert_array_equal(np.asarray(a[key], float), np.asarray(b[key], float), err_msg=key)
    for key in ("precision", "recall", "scores"):
        np.testing.assert_array_equal(ref.eval[key], fast.eval[key])
    np.testing.assert_array_equal(ref.stats, fast.stats)
    assert 0.05 < ref.stats[1] < 0.95


@pytest.mark.slow
def test_class_names_are_escaped_and_cut_in_the_table_and_the_plots(tmp_path):
    """Names from a checkpoint or a data YAML reach eval's and train's per-class table and the plots: a terminal
    escape is shown as text and a name is cut at 200 characters in the table; in the plots a name is cut shorter
    and ``$`` is a dollar sign, not matplotlib's math mode (``$\\frac$`` failed to draw)."""
    from yolo import plots

    names, gts, dets = noisy_dataset(5, num_images=20, num_classes=4)
    names = ["\x1b[2Jcat", "d" * 5_000_000, "$\\frac$", "ok"]
    evaluator = Evaluator(names, gts)
    evaluator.process([g["image_id"] for g in gts], dets)
    evaluator.evaluate()
    table = evaluator.summary_text()
    assert "\x1b" not in table and "\\x1b[2Jcat" in table
    assert "d" * 200 + "... (5,000,000 characters)" in table and max(map(len, table.splitlines())) < 400
    figures = plots.pr_curves_figure(np.linspace(0, 1, 101), np.full((101, 4), 0.5), names, [0.5] * 4)
    labels = [text.get_text() for text in figures.axes[0].get_legend().get_texts()]
    assert max(map(len, labels)) < 100 and "\\$\\frac\\$ 0.500" in labels
    paths = evaluator.save_plots(tmp_path)  # drawn, whatever the names
    assert len(paths) == 3 and all(cv2.imread(str(p)) is not None for p in paths)


NAN, INF = float("nan"), float("inf")


NAMES = ["a", "b"]


def one_box_truth():
    """One 64x64 image ``a.jpg`` (id 1) holding one class-0 box."""
    return [dict(image_id=1, file_name="a.jpg", height=64, width=64, boxes=torch.tensor([[1.0, 1, 20, 20]]),
                 labels=torch.tensor([0]))]


def detections(boxes, scores, labels=(0,)):
    return dict(boxes=torch.tensor(boxes), scores=torch.tensor(scores), labels=torch.tensor(labels))


@pytest.mark.parametrize("boxes, scores, message", [
    ([[NAN, 1.0, INF, 20.0]], [0.9], r"image 1: detection box 0 is not finite: [nan, 1.0, inf, 20.0]"),
    ([[1.0, 1.0, 20.0, 20.0]], [NAN], r"image 1: detection score 0 is not finite: nan"),
    ([[1.0, 1.0, 20.0, 20.0]], [INF], r"image 1: detection score 0 is not finite: inf"),
])
def test_non_finite_detections_are_refused(boxes, scores, message):
    evaluator = Evaluator(NAMES, one_box_truth())
    with pytest.raises(ValueError) as info:
        evaluator.process([1], [detections(boxes, scores)])
    assert str(info.value) == message
    assert evaluator.num_processed == 0  # nothing of the refused batch is kept


def test_a_non_finite_image_is_found_in_a_batch_and_the_finite_one_still_scores():
    truth = one_box_truth() + [make_gt(2, [[5, 5, 30, 30]], [1])]
    evaluator = Evaluator(NAMES, truth)
    good = detections([[1.0, 1, 20, 20]], [0.9])
    with pytest.raises(ValueError, match=r"^image 2: detection box 0 is not finite: \[5.0, nan, 30.0, 30.0\]$"):
        evaluator.process([1, 2], [good, detections([[5.0, NAN, 30, 30]], [0.8], [1])])
    evaluator.process([1], [good])
    assert evaluator.evaluate()["mAP50"] == pytest.approx(1.0)


def test_non_finite_ground_truth_is_refused():
    truth = one_box_truth()
    truth[0]["boxes"] = torch.tensor([[NAN, 1.0, 20.0, 20.0]])
    with pytest.raises(ValueError) as info:
        Evaluator(NAMES, truth)
    assert str(info.value) == "image 1 (a.jpg): ground-truth box 0 is not finite: [nan, 1.0, 20.0, 20.0]"


def test_detections_of_mismatched_lengths_are_refused():
    evaluator = Evaluator(NAMES, one_box_truth())
    det = dict(boxes=torch.rand(2, 4), scores=torch.rand(3), labels=torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError) as info:
        evaluator.process([1], [det])
    assert str(info.value) == ("image 1: detections hold 2 boxes, 3 scores and 1 labels: each needs boxes "
                               "Float[K, 4], scores [K] and labels [K]")


@pytest.mark.parametrize("change, message", [
    (dict(boxes=torch.rand(4, 3)), "image 1: detections 'boxes' have shape [4, 3], not [K, 4] (xyxy)"),
    (dict(scores=...), "image 1: detections: no 'scores' (needs boxes, scores, labels)"),
])
def test_detections_with_bad_boxes_or_a_missing_key_are_refused(change, message):
    det = detections([[1.0, 1, 20, 20]], [0.9])
    for key, value in change.items():
        det.pop(key) if value is ... else det.update({key: value})
    with pytest.raises(ValueError) as info:
        Evaluator(NAMES, one_box_truth()).process([1], [det])
    assert str(info.value) == message


@pytest.mark.parametrize("change, message", [
    (dict(labels=...), "image 1 (a.jpg): no 'labels' (needs image_id, height, width, boxes, labels)"),
    (dict(boxes=torch.zeros(2)), "image 1 (a.jpg): ground-truth 'boxes' have shape [2], not [K, 4] (xyxy)"),
    (dict(labels=torch.tensor([0, 1])), "image 1 (a.jpg): ground truth holds 1 boxes and 2 labels"),
    (dict(image_id=...), "ground-truth entry 0: no 'image_id' (needs image_id)"),
])
def test_bad_ground_truth_is_refused_at_construction(change, message):
    truth = one_box_truth()
    for key, value in change.items():
        truth[0].pop(key) if value is ... else truth[0].update({key: value})
    with pytest.raises(ValueError) as info:
        Evaluator(NAMES, truth)
    assert str(info.value) == message


def test_valid_input_of_every_accepted_shape_still_scores():
    """Empty detections of any shape and ``[K, 1]`` scores are taken as before the checks."""
    truth = one_box_truth() + [make_gt(2, [], [])]
    evaluator = Evaluator(NAMES, truth)
    evaluator.process([1, 2], [dict(boxes=torch.tensor([[1.0, 1, 20, 20]]), scores=torch.tensor([[0.9]]),
                                    labels=torch.tensor([0])),
                               dict(boxes=torch.zeros(0), scores=torch.zeros(0), labels=torch.zeros(0).long())])
    assert evaluator.evaluate()["mAP50"] == pytest.approx(1.0)


def test_a_loader_that_yields_nothing_is_refused():
    """Else every ground-truth image would be scored as one where nothing was detected (mAP 0 of 1 image)."""
    model = torch.nn.Conv2d(3, 7, 1)
    with pytest.raises(ValueError) as info:
        evaluate_model(model, [], Evaluator(NAMES, one_box_truth()), progress=False, desc="val 3/10")
    assert str(info.value) == "val 3/10: the loader yielded no batches: nothing to evaluate"


@pytest.mark.parametrize("truth", [[], [make_gt(1, [], [])]], ids=["no images", "no boxes"])
@pytest.mark.parametrize("use_pycocotools", [True, False])
def test_ground_truth_without_boxes_gives_undefined_metrics_as_the_warning_says(truth, use_pycocotools, caplog):
    """COCO's -1 (undefined) for every AP and AR, as with detections; the reports still work."""
    evaluator = Evaluator(NAMES, truth, use_pycocotools=use_pycocotools)
    with caplog.at_level(logging.WARNING, logger="yolo.evaluation.evaluator"):
        metrics = evaluator.evaluate()
    assert "the ground truth holds no boxes: every AP and AR is undefined (-1)" in caplog.messages
    assert "no detections: every AP and AR is 0" not in caplog.messages
    assert metrics["mAP50"] == -1.0 and metrics["mAP50_95"] == -1.0 and metrics["AR100"] == -1.0
    if use_pycocotools:
        assert {metrics[name] for name in COCO_STAT_NAMES} == {-1.0}
    assert metrics["num_instances"] == 0 and metrics["per_class"] == {}
    assert evaluator.class_table().splitlines()[1].split()[-2:] == ["0.000", "0.000"]  # the table shows no AP
    evaluator.summary_text()
