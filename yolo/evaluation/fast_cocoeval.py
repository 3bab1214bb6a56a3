"""``FastCOCOeval``: pycocotools' ``COCOeval`` with its per-image matching done by numpy.

COCOeval spends almost all its time in ``evaluateImg``, three nested Python loops (IoU thresholds x
detections x ground truths) for every image, category and area range. This subclass overrides only
that method: the same greedy matching, vectorized over the IoU thresholds, producing the same
``evalImgs`` records (``dtMatches``, ``gtMatches``, ``dtIgnore``, ``gtIgnore``, ...). ``computeIoU``,
``accumulate`` and ``summarize`` are pycocotools' own, so the numbers are COCOeval's
(tests/test_evaluation.py compares both on noisy and on real detections).

The idea is detectron2's ``COCOeval_opt`` (a C++ ``evaluateImg``), in numpy.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import numpy as np
from pycocotools.cocoeval import COCOeval

__all__ = ["FastCOCOeval", "greedy_match"]


def _last_argmax(values: np.ndarray) -> np.ndarray:
    """Column of the last maximum of each row of ``values`` ``[T, G]`` (COCOeval keeps the last on ties)."""
    return values.shape[1] - 1 - np.argmax(values[:, ::-1], axis=1)


def greedy_match(ious: np.ndarray, gt_ignore: np.ndarray, gt_crowd: np.ndarray, thresholds: Sequence[float]
                 ) -> np.ndarray:
    """COCOeval's matching of score-sorted detections to ground truth, for every IoU threshold at once.

    Args:
        ious: ``float64[D, G]``, detections in decreasing score, ground truths with the ignored ones last.
        gt_ignore: ``bool[G]`` ground truths that are ignored (crowd, or outside the area range).
        gt_crowd: ``bool[G]`` crowd regions, which any number of detections may match.
        thresholds: ``T`` IoU thresholds.

    Returns:
        ``int64[T, D]``: the ground-truth column each detection matches, ``-1`` for none.

    Each detection takes, among the free ground truths with IoU >= threshold, the one of highest IoU
    (the last on ties); it looks at ignored ground truths only when no regular one qualifies.
    """
    limits = np.minimum(np.asarray(thresholds, dtype=np.float64), 1 - 1e-10)
    num_t, (num_d, num_g) = len(limits), ious.shape
    match = np.full((num_t, num_d), -1, dtype=np.int64)
    if num_d == 0 or num_g == 0:
        return match
    num_regular = int(np.count_nonzero(~gt_ignore))
    taken = np.zeros((num_t, num_g), dtype=bool)
    rows = np.arange(num_t)
    # A detection below the lowest threshold with every ground truth never matches: skip it.
    for d in np.flatnonzero(ious.max(axis=1) >= limits.min()):
        free_iou = np.where(taken & ~gt_crowd, -1.0, ious[d][None, :])  # [T, G]
        best = np.full(num_t, -1, dtype=np.int64)
        for start, stop in ((num_regular, num_g), (0, num_regular)):  # the regular group, when it qualifies, wins
            if stop > start:
                col = start + _last_argmax(free_iou[:, start:stop])
                ok = free_iou[rows, col] >= limits
                best[ok] = col[ok]
        hit = best >= 0
        match[hit, d] = best[hit]
        taken[rows[hit], best[hit]] = True
    return match


class FastCOCOeval(COCOeval):
    """``COCOeval`` whose ``evaluateImg`` is vectorized over IoU thresholds (see the module docstring).

    Use it exactly like ``COCOeval`` (``evaluate()``, ``accumulate()``, ``summarize()``); only bbox
    evaluation with ``params.useCats`` is supported.
    """

    def evaluateImg(self, imgId: Any, catId: int, aRng: Sequence[float], maxDet: int) -> Optional[Dict[str, Any]]:
        p = self.params
        if not p.useCats:
            raise NotImplementedError("FastCOCOeval evaluates per category (params.useCats = 1)")
        gt = self._gts[imgId, catId]
        dt = self._dts[imgId, catId]
        if len(gt) == 0 and len(dt) == 0:
            return None
        gt_area = np.array([g["area"] for g in gt], dtype=np.float64)
        gt_ignore = np.array([bool(g["ignore"]) for g in gt], dtype=bool) | (gt_area < aRng[0]) | (gt_area > aRng[1])
        gt_order = np.argsort(gt_ignore, kind="mergesort")  # ignored ground truth last, as COCOeval sorts
        dt_order = np.argsort([-d["score"] for d in dt], kind="mergesort")[:maxDet]
        gt = [gt[i] for i in gt_order]
        dt = [dt[i] for i in dt_order]
        gt_ignore = gt_ignore[gt_order]
        gt_crowd = np.array([bool(g["iscrowd"]) for g in gt], dtype=bool)
        ious = self.ious[imgId, catId]
        # computeIoU sorted the detections by score and kept maxDets[-1] of them: the rows are dt's order.
        ious = np.asarray(ious, dtype=np.float64)[:, gt_order] if len(ious) else np.zeros((len(dt), len(gt)))

        num_t = len(p.iouThrs)
        gt_ids = np.array([g["id"] for g in gt], dtype=np.float64)
        dt_ids = np.array([d["id"] for d in dt], dtype=np.float64)
        match = greedy_match(ious[:len(dt)], gt_ignore, gt_crowd, p.iouThrs)  # [T, D]
        hit = match >= 0
        dtm = np.where(hit, gt_ids[np.maximum(match, 0)] if len(gt) else 0.0, 0.0)
        gtm = np.zeros((num_t, len(gt)))
        t_idx, d_idx = np.nonzero(hit)
        gtm[t_idx, match[t_idx, d_idx]] = dt_ids[d_idx]  # a crowd region keeps its last detection, as in COCOeval
        dt_ignore = hit & (gt_ignore[np.maximum(match, 0)] if len(gt) else False)
        dt_area = np.array([d["area"] for d in dt], dtype=np.float64)
        outside = ((dt_area < aRng[0]) | (dt_area > aRng[1]))[None, :]
        dt_ignore = dt_ignore | (~hit & outside)
        return {
            "image_id": imgId,
            "category_id": catId,
            "aRng": aRng,
            "maxDet": maxDet,
            "dtIds": [d["id"] for d in dt],
            "gtIds": [g["id"] for g in gt],
            "dtMatches": dtm,
            "gtMatches": gtm,
            "dtScores": [d["score"] for d in dt],
            "gtIgnore": gt_ignore.astype(np.int64),
            "dtIgnore": dt_ignore,
        }
