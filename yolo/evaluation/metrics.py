"""COCO detection metrics: pycocotools' ``COCOeval`` and what the reports read from its arrays.

:func:`run_cocoeval` scores COCO results entries against a COCO ground truth with the stock
``COCOeval`` (the reference, every area range) or :class:`FastCOCOeval` (same matching, vectorized;
only the "all areas, 100 detections" setting that mAP50 / mAP50_95 / AR100 need). Everything else
the evaluator reports is read from the evaluated object:

* :func:`area_all_stats` - mAP50_95, mAP50, mAP75, AR100 from ``eval["precision"]`` / ``eval["recall"]``
  (what ``summarize()`` computes, for a ``FastCOCOeval`` restricted to area "all");
* :func:`per_class_ap` - per-class AP, AP50 and precision-recall curves from ``eval["precision"]``;
* :func:`precision_recall_at_confidence` - per-class precision / recall at one confidence from
  ``evalImgs`` (the same score-sorted true-positive flags ``accumulate()`` builds).
"""
from __future__ import annotations

import contextlib
import io
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from yolo.evaluation.fast_cocoeval import FastCOCOeval

__all__ = ["COCO_STAT_NAMES", "coco_ground_truth", "run_cocoeval", "area_all_stats", "per_class_ap",
           "precision_recall_at_confidence"]

# The names of COCOeval.stats, in its order.
COCO_STAT_NAMES = ("mAP50_95", "mAP50", "mAP75", "AP_small", "AP_medium", "AP_large",
                   "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large")
MAX_DETS = 100  # COCO's AP is computed on the 100 best detections per image and category


def coco_ground_truth(dataset: Mapping[str, Any]) -> COCO:
    """A ``pycocotools.coco.COCO`` over an in-memory COCO dataset dict (which it does not modify)."""
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
        coco = COCO()
        coco.dataset = {key: list(value) if isinstance(value, list) else value for key, value in dataset.items()}
        coco.createIndex()
    return coco


def _load_results(coco_gt: COCO, results: List[Dict[str, Any]]) -> COCO:
    """``coco_gt.loadRes(results)``; an empty result set (which loadRes rejects) as an empty COCO."""
    if results:
        return coco_gt.loadRes(results)
    empty = COCO()
    empty.dataset = {"images": list(coco_gt.dataset["images"]), "categories": list(coco_gt.dataset["categories"]),
                     "annotations": []}
    empty.createIndex()
    return empty


def run_cocoeval(coco_gt: COCO, results: List[Dict[str, Any]], image_ids: Sequence[int], fast: bool = False
                 ) -> Tuple[COCOeval, str]:
    """Evaluate bbox ``results`` (COCO results entries, consumed: loadRes edits them) on ``image_ids``.

    Returns ``(evaluated COCOeval, summary text)``: with ``fast=False`` the stock ``COCOeval`` and its
    12-line ``summarize()`` text; with ``fast=True`` a :class:`FastCOCOeval` restricted to area "all"
    and 100 detections (``summarize()`` needs every area range, so the text is empty).
    """
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
        coco_eval = (FastCOCOeval if fast else COCOeval)(coco_gt, _load_results(coco_gt, results), "bbox")
        coco_eval.params.imgIds = list(image_ids)
        if fast:
            coco_eval.params.areaRng, coco_eval.params.areaRngLbl = [[0, 1e5 ** 2]], ["all"]
            coco_eval.params.maxDets = [MAX_DETS]
        coco_eval.evaluate()
        coco_eval.accumulate()
    summary = ""
    if not fast:
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            coco_eval.summarize()
        summary = text.getvalue().rstrip()
    return coco_eval, summary


def _area_all(coco_eval: COCOeval) -> Tuple[int, int]:
    """Indices of area "all" and of 100 detections in the ``eval`` arrays."""
    return coco_eval.params.areaRngLbl.index("all"), coco_eval.params.maxDets.index(MAX_DETS)


def _mean_defined(x: np.ndarray) -> float:
    """Mean of the entries > -1 (COCO's convention for undefined values); -1 when there are none."""
    x = x[x > -1]
    return float(np.mean(x)) if x.size else -1.0


def area_all_stats(coco_eval: COCOeval) -> Dict[str, float]:
    """``COCO_STAT_NAMES`` -> value, computed as ``summarize()`` does for the "all areas, 100
    detections" entries (mAP50_95, mAP50, mAP75, AR100); the others are -1."""
    a, m = _area_all(coco_eval)
    precision = coco_eval.eval["precision"][:, :, :, a, m]  # [T, R, K]
    iou_thrs = coco_eval.params.iouThrs
    stats = {name: -1.0 for name in COCO_STAT_NAMES}
    stats["mAP50_95"] = _mean_defined(precision)
    stats["mAP50"] = _mean_defined(precision[np.where(iou_thrs == 0.5)[0]])
    stats["mAP75"] = _mean_defined(precision[np.where(iou_thrs == 0.75)[0]])
    stats["AR100"] = _mean_defined(coco_eval.eval["recall"][:, :, a, m])
    return stats


def _category_index(coco_eval: COCOeval, category_ids: Sequence[int]) -> np.ndarray:
    """For each class, its position on the K axis of the ``eval`` arrays (``params.catIds`` is sorted)."""
    position = {int(c): k for k, c in enumerate(coco_eval.params.catIds)}
    return np.array([position.get(int(c), -1) for c in category_ids], dtype=np.int64)


def per_class_ap(coco_eval: COCOeval, category_ids: Sequence[int]) -> Dict[str, np.ndarray]:
    """Per-class results of an accumulated COCOeval, classes in ``category_ids`` order (``C`` of them).

    Returns ``ap`` ``[C]`` (mean over IoU 0.5:0.95 and recall), ``ap50`` ``[C]`` and ``pr_curves``
    ``[R, C]`` (interpolated precision at IoU 0.5 at each of the ``R`` = 101 recall thresholds), all
    area "all", 100 detections; -1 for a class without ground truth.
    """
    a, m = _area_all(coco_eval)
    k = _category_index(coco_eval, category_ids)
    precision = coco_eval.eval["precision"][:, :, :, a, m]  # [T, R, K]
    defined = (precision > -1).all(axis=(0, 1))
    ap = np.where(defined, precision.mean(axis=(0, 1)), -1.0)  # [K]; means taken before reordering, as summarize
    ap50 = np.where(defined, precision[0].mean(axis=0), -1.0)
    known = k >= 0
    return {"ap": np.where(known, ap[np.maximum(k, 0)], -1.0),
            "ap50": np.where(known, ap50[np.maximum(k, 0)], -1.0),
            "pr_curves": np.where(known, precision[0][:, np.maximum(k, 0)], -1.0)}


def _ranked_true_positives(coco_eval: COCOeval, k: int) -> Tuple[np.ndarray, np.ndarray, int]:
    """Category ``k``'s detections pooled over images as ``accumulate()`` ranks them (area "all", 100
    per image, decreasing score, ignored ones dropped): ``(scores [D], true positive at IoU 0.5 [D],
    number of non-ignored ground truths)``."""
    a, _ = _area_all(coco_eval)
    num_a, num_i = len(coco_eval.params.areaRng), len(coco_eval.params.imgIds)
    start = k * num_a * num_i + a * num_i
    records = [e for e in coco_eval.evalImgs[start:start + num_i] if e is not None]
    if not records:
        return np.zeros(0), np.zeros(0, dtype=bool), 0
    scores = np.concatenate([np.asarray(e["dtScores"][:MAX_DETS], dtype=np.float64) for e in records])
    matched = np.concatenate([e["dtMatches"][0, :MAX_DETS] for e in records]) != 0
    ignored = np.concatenate([np.asarray(e["dtIgnore"][0, :MAX_DETS], dtype=bool) for e in records])
    num_gt = int(sum(np.count_nonzero(np.asarray(e["gtIgnore"]) == 0) for e in records))
    order = np.argsort(-scores, kind="mergesort")
    keep = ~ignored[order]
    return scores[order][keep], matched[order][keep], num_gt


def precision_recall_at_confidence(coco_eval: COCOeval, category_ids: Sequence[int], grid: int = 1001
                                   ) -> Dict[str, Any]:
    """Per-class precision and recall at IoU 0.5 at the confidence maximising the mean F1.

    The confidence is searched on ``grid`` values in 0..1; the mean F1 is taken over classes with
    ground truth. Returns ``{"conf", "precision" [C], "recall" [C], "f1" [C]}`` (classes in
    ``category_ids`` order; precision is 0 for a class with no detection above ``conf``).
    """
    conf_grid = np.linspace(0.0, 1.0, grid)
    num_classes = len(category_ids)
    p_curve = np.zeros((num_classes, grid))
    r_curve = np.zeros((num_classes, grid))
    has_gt = np.zeros(num_classes, dtype=bool)
    for c, k in enumerate(_category_index(coco_eval, category_ids)):
        if k < 0:
            continue
        scores, tp, num_gt = _ranked_true_positives(coco_eval, int(k))
        has_gt[c] = num_gt > 0
        if num_gt == 0 or len(scores) == 0:
            continue
        tp_sum = np.cumsum(tp)
        n = np.searchsorted(-scores, -conf_grid, side="right")  # detections with score >= conf
        tp_at = np.where(n > 0, tp_sum[np.maximum(n - 1, 0)], 0)
        p_curve[c] = np.where(n > 0, tp_at / np.maximum(n, 1), 0.0)
        r_curve[c] = tp_at / num_gt
    f1 = 2 * p_curve * r_curve / np.maximum(p_curve + r_curve, 1e-16)
    best = int(np.argmax(f1[has_gt].mean(axis=0))) if has_gt.any() else 0
    return {"conf": float(conf_grid[best]), "precision": p_curve[:, best], "recall": r_curve[:, best],
            "f1": f1[:, best]}
