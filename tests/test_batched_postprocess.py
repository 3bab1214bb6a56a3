"""Thresholds and NMS for a whole batch at once (:func:`yolo.inference.postprocess.threshold_and_nms`, what the
Detector runs on the model's device) against a plain per-image, per-class reference built on
``torchvision.ops.nms``, and the Detector's batched results against its image-by-image results."""
import pytest
import torch
import torchvision

from conftest import asset
from yolo.inference.detector import Detector
from yolo.inference.postprocess import _ONE_CALL_MAX, PostprocessOptions, postprocess, threshold_and_nms
from yolo.ops.nms import nms

IMAGES = ["dog.jpg", "horses.jpg", "person.jpg", "eagle.jpg", "giraffe.jpg", "kite.jpg", "scream.jpg"]


def random_predictions(seed: int, images: int = 4, boxes: int = 600, classes: int = 5) -> torch.Tensor:
    """Float[N, B, 5+C] eval rows whose boxes crowd a 120-pixel field, so that NMS has work to do."""
    g = torch.Generator().manual_seed(seed)
    centre = torch.rand(images, boxes, 2, generator=g) * 120
    size = 5 + torch.rand(images, boxes, 2, generator=g) * 40
    obj = torch.rand(images, boxes, 1, generator=g)
    cls = torch.rand(images, boxes, classes, generator=g)
    pred = torch.cat((centre, size, obj, cls), -1)
    pred[1, :, 4] = 0.0  # one image without any candidate
    return pred


def reference(pred: torch.Tensor, conf: float, iou: float, max_det: int, multi_label: bool = False,
              agnostic: bool = False, classes=None, kind: str = "default"):
    """One image at a time; one ``torchvision.ops.nms`` call per class (Darknet's variants: :func:`nms` on
    one image, checked against Darknet in tests/test_nms_kind.py)."""
    out = []
    for rows in pred:
        rows = rows[rows[:, 4] > conf]
        scores_all = rows[:, 5:] * rows[:, 4:5]
        cx, cy, w, h = rows[:, :4].unbind(1)
        boxes = torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h), 1)
        if multi_label:
            index, labels = (scores_all > conf).nonzero(as_tuple=True)
            boxes, scores = boxes[index], scores_all[index, labels]
        else:
            scores, labels = scores_all.max(1)
            boxes, scores, labels = boxes[scores > conf], scores[scores > conf], labels[scores > conf]
        if classes is not None:
            mask = torch.isin(labels, torch.tensor(classes))
            boxes, scores, labels = boxes[mask], scores[mask], labels[mask]
        groups = torch.zeros_like(labels) if agnostic else labels
        if kind == "default":
            kept = [torch.nonzero(groups == g).squeeze(1) for g in groups.unique()]
            keep = torch.cat([idx[torchvision.ops.nms(boxes[idx], scores[idx], iou)] for idx in kept]) \
                if kept else torch.zeros(0, dtype=torch.int64)
            keep = keep[torch.sort(scores[keep], descending=True, stable=True).indices]
        else:
            keep = nms(boxes, scores, groups, iou, kind, 0.6)
        keep = keep[:max_det]
        out.append((boxes[keep], scores[keep], labels[keep]))
    return out


def assert_same(results, expected):
    assert len(results) == len(expected)
    for det, (boxes, scores, labels) in zip(results, expected):
        assert torch.equal(det["labels"], labels)
        assert torch.allclose(det["boxes"], boxes, atol=1e-5, rtol=0)
        assert torch.allclose(det["scores"], scores, atol=1e-7, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("options", [
    {}, {"max_det": 7}, {"multi_label": True}, {"agnostic": True}, {"classes": (1, 3)},
    {"kind": "greedynms"}, {"kind": "diounms"},
])
def test_batched_equals_per_image_reference(seed, options):
    pred = random_predictions(seed)
    conf, iou = 0.3, 0.45
    max_det = options.get("max_det", 300)
    expected = reference(pred, conf, iou, max_det, options.get("multi_label", False), options.get("agnostic", False),
                         options.get("classes"), options.get("kind", "default"))
    config = PostprocessOptions(conf, iou, classes=options.get("classes"), agnostic=options.get("agnostic", False),
                               multi_label=options.get("multi_label", False), max_det=max_det,
                               nms_kind=options.get("kind", "default"))
    results = postprocess(pred, config)
    assert_same(results, expected)
    assert sum(len(d["labels"]) for d in results) > 20  # NMS had boxes to keep and to drop
    assert len(results[1]["labels"]) == 0 and results[1]["boxes"].shape == (0, 4)


def test_flat_detections_are_grouped_by_image_and_score():
    flat = threshold_and_nms(random_predictions(3), PostprocessOptions(0.3, 0.45))
    assert torch.all(flat.image_index[1:] >= flat.image_index[:-1])
    for i in range(flat.num_images):
        scores = flat.scores[flat.image_index == i]
        assert torch.all(scores[1:] <= scores[:-1])
    assert flat.counts().tolist() == [int((flat.image_index == i).sum()) for i in range(flat.num_images)]


def test_no_candidates_at_all():
    pred = random_predictions(0)
    pred[..., 4] = 0.0
    results = postprocess(pred, PostprocessOptions(0.3, 0.45))
    assert [len(d["labels"]) for d in results] == [0] * len(pred)
    assert all(d["boxes"].shape == (0, 4) and d["labels"].dtype == torch.int64 for d in results)


@pytest.mark.slow
def test_detector_batch_equals_one_image_at_a_time():
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    detector = Detector(cfg, weights, device="cpu", img_size=320, conf_thres=0.1)
    paths = [asset(f"images/{name}") for name in IMAGES]
    batched = detector(paths)
    assert sum(len(d["labels"]) for d in batched) > 10
    for path, det in zip(paths, batched):
        (alone,) = detector(path)
        assert torch.equal(det["labels"], alone["labels"]) and det["names"] == alone["names"]
        assert torch.allclose(det["boxes"], alone["boxes"], atol=1e-4, rtol=0)
        assert torch.allclose(det["scores"], alone["scores"], atol=1e-6, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("multi_label", [False, True])
def test_large_batch_goes_image_by_image_with_the_same_result(multi_label):
    # Past one NMS call's bound the batch is done one image at a time; the result must not change.
    pred = random_predictions(4, images=3, boxes=4000, classes=3)
    config = PostprocessOptions(0.05, 0.45, multi_label=multi_label, max_det=100000)
    flat = threshold_and_nms(pred, config)
    assert int((pred[..., 4] > 0.05).sum()) > _ONE_CALL_MAX["cpu"]
    expected = reference(pred, 0.05, 0.45, 100000, multi_label)
    assert_same(postprocess(pred, config), expected)
    assert len(flat.labels) == sum(len(e[2]) for e in expected)
