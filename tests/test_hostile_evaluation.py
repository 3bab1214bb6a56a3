"""Hostile input to the evaluator: NaN or infinite boxes and scores, detections whose boxes, scores and labels
disagree in number, ground truth missing a key or shaped wrong, a loader that yields nothing and ground truth
without boxes. Each is one ValueError naming the image (and its file name for ground truth) or an agreed value,
never a perfect mAP from garbage nor an IndexError deep in the confusion matrix."""
import logging

import pytest
import torch

from helpers import make_gt
from yolo.evaluation import Evaluator, evaluate_model
from yolo.evaluation.metrics import COCO_STAT_NAMES

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
