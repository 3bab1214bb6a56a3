"""Evaluation of sliced detection (``tools/eval.py --tile``): each image of the split read at its own size and
detected on slices (:class:`yolo.inference.tiling.TiledDetector`), then scored as :func:`yolo.evaluation.loop.
evaluate_model` scores a batch (the same :class:`~yolo.evaluation.evaluator.Evaluator`).

The data loader cannot serve it: it resizes every image to the network's size first, which is what tiling avoids.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

from tqdm import tqdm

from yolo.evaluation.evaluator import Evaluator
from yolo.files.images import load_image

__all__ = ["evaluate_tiled"]


def evaluate_tiled(tiled, ground_truth: Sequence[Mapping[str, Any]], evaluator: Evaluator, progress: bool = True,
                   desc: str = "evaluating tiled") -> Dict[str, Any]:
    """Detect with ``tiled`` (a ``TiledDetector``) on each image of ``ground_truth`` (the dataset's
    :meth:`ground_truth` dicts: ``image_id``, ``file_name``), feed ``evaluator`` (reset here) and return its
    metrics plus ``speed_ms`` = ``{"preprocess", "inference", "nms"}`` milliseconds per image (all slices)."""
    evaluator.reset()
    times = {"preprocess": 0.0, "inference": 0.0, "nms": 0.0}
    for truth in tqdm(ground_truth, desc=desc, disable=not progress, leave=False):
        det = tiled(load_image(truth["file_name"]))[0]
        evaluator.process([truth["image_id"]], [det])
        for key, value in tiled.timings.items():
            times["nms" if key == "postprocess" else key] += value
    if not ground_truth:
        raise ValueError(f"{desc}: no image to evaluate")
    metrics = evaluator.evaluate()
    metrics["speed_ms"] = {k: 1000.0 * v / len(ground_truth) for k, v in times.items()}
    return metrics
