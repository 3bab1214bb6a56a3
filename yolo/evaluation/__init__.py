"""Detection evaluation: COCO metrics through pycocotools, reports, and the loop over a model.

* :mod:`~yolo.evaluation.fast_cocoeval` - ``FastCOCOeval``, ``COCOeval`` with a vectorized ``evaluateImg``;
* :mod:`~yolo.evaluation.metrics` - running COCOeval and reading per-class AP, PR curves and P/R from it;
* :mod:`~yolo.evaluation.confusion` - the class confusion matrix (the one thing COCOeval has no notion of);
* :mod:`~yolo.evaluation.evaluator` - :class:`Evaluator` (reset / process / evaluate);
* :mod:`~yolo.evaluation.report` - text tables, figures, TensorBoard, metrics JSON;
* :mod:`~yolo.evaluation.loop` - :func:`evaluate_model`, a detector over a data loader.

The COCO JSON side (category tables, ground truth / detections as COCO dicts) is :mod:`yolo.ops.coco`,
re-exported here.
"""
from yolo.evaluation.confusion import confusion_matrix
from yolo.evaluation.evaluator import Evaluator
from yolo.evaluation.fast_cocoeval import FastCOCOeval
from yolo.evaluation.loop import EvaluationStopped, evaluate_model
from yolo.ops.coco import COCO91_IDS, COCO_NAMES, coco_category_ids, detections_to_coco_results, ground_truth_to_coco

__all__ = [
    "COCO_NAMES",
    "COCO91_IDS",
    "coco_category_ids",
    "ground_truth_to_coco",
    "detections_to_coco_results",
    "confusion_matrix",
    "FastCOCOeval",
    "Evaluator",
    "evaluate_model",
    "EvaluationStopped",
]
