"""``FastCOCOeval``: pycocotools' ``COCOeval`` with its per-image evaluation done on numpy arrays.

``COCOeval.evaluate()`` spends its time in Python: annotation dicts regrouped per image and category
(``_prepare``), then ``evaluateImg``'s three nested loops (IoU thresholds x detections x ground
truths) for every image, category and area range. This subclass replaces ``evaluate()`` only: the
annotations become arrays grouped by (image, category) once, the IoUs are pycocotools' own
(``mask.iou``) and the same greedy matching runs vectorized over the IoU thresholds, giving the same
``evalImgs`` records (``dtMatches``, ``gtMatches``, ``dtIgnore``, ``gtIgnore``, ``dtScores``, ...).
``accumulate()`` and ``summarize()`` are pycocotools' own, so the numbers are COCOeval's, bit for bit
(tests/test_evaluation.py compares the records and arrays of both, crowd regions and area ranges
included). The idea is detectron2's ``COCOeval_opt`` (a C++ ``evaluate``), in numpy.

Why not the ``faster-coco-eval`` package (1.8.0, C++): on yolov3-tiny's 24,629 detections of coco128 at 416 its
twelve numbers equal pycocotools' to 5.6e-17 and its precision array to 2.2e-16, but not bit for bit, where this
class is; and the per-image records that the reports read (``evalImgs``: precision and recall at the best F1) are
empty in its public object, kept only in a private ``_evalImgs_cpp``. It was faster (median of 5 interleaved runs
on a loaded 2-core machine, every area range: 5.5 s against pycocotools' 21.2 s and this class's 14.6 s), but
evaluation runs this class only for the per-epoch validation and ``eval --fast``, restricted to area "all".
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
from pycocotools import mask as coco_mask
from pycocotools.coco import COCO
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
    if num_g == 1:  # the common case, without a loop: the first detection reaching a threshold takes the box
        reach = ious[None, :, 0] >= limits[:, None]  # [T, D]
        if gt_crowd[0]:  # a crowd region takes every detection that reaches it
            match[reach] = 0
        else:
            first = reach.argmax(axis=1)
            hit = reach[np.arange(num_t), first]
            match[hit, first[hit]] = 0
        return match
    num_regular = int(np.count_nonzero(~gt_ignore))
    groups = [(lo, hi) for lo, hi in ((num_regular, num_g), (0, num_regular)) if hi > lo]  # regular last: it wins
    taken = np.zeros((num_t, num_g), dtype=bool)
    rows = np.arange(num_t)
    # A detection below the lowest threshold with every ground truth never matches: skip it.
    for d in np.flatnonzero(ious.max(axis=1) >= limits.min()):
        if taken.all() and not gt_crowd.any():  # every box is taken at every threshold: the rest are misses
            break
        free_iou = np.where(taken & ~gt_crowd, -1.0, ious[d][None, :])  # [T, G]
        best = np.full(num_t, -1, dtype=np.int64)
        for lo, hi in groups:
            col = lo + _last_argmax(free_iou[:, lo:hi])
            ok = free_iou[rows, col] >= limits
            best[ok] = col[ok]
        hit = best >= 0
        match[hit, d] = best[hit]
        taken[rows[hit], best[hit]] = True
    return match


class _Annotations:
    """One COCO object's annotations on the evaluated images and categories, as arrays grouped by
    (image, category) in the order ``COCOeval._prepare`` keeps them (file order within a group)."""

    def __init__(self, coco: COCO, image_ids: Sequence[int], category_ids: Sequence[int]):
        wanted_images, wanted_cats = set(image_ids), set(category_ids)
        anns = [a for a in coco.dataset.get("annotations", [])
                if a["image_id"] in wanted_images and a["category_id"] in wanted_cats]
        keys = [(a["image_id"], a["category_id"]) for a in anns]
        order = sorted(range(len(anns)), key=keys.__getitem__)  # stable: file order within a group
        anns = [anns[i] for i in order]
        self.boxes = np.array([a["bbox"] for a in anns], dtype=np.float64).reshape(-1, 4)
        self.areas = np.array([a["area"] for a in anns], dtype=np.float64)
        self.ids = np.array([a["id"] for a in anns], dtype=np.int64)
        self.scores = np.array([a.get("score", 0.0) for a in anns], dtype=np.float64)
        self.crowd = np.array([bool(a.get("iscrowd", 0)) for a in anns], dtype=bool)  # _prepare: ignore = iscrowd
        self.groups: Dict[Tuple[Any, int], slice] = {}
        start = 0
        for n in range(1, len(anns) + 1):
            if n == len(anns) or keys[order[n]] != keys[order[start]]:
                self.groups[keys[order[start]]] = slice(start, n)
                start = n

    def group(self, image_id: Any, category_id: int) -> slice:
        return self.groups.get((image_id, category_id), slice(0, 0))


class FastCOCOeval(COCOeval):
    """``COCOeval`` whose ``evaluate()`` works on arrays (see the module docstring).

    Use it as ``COCOeval``: ``evaluate()``, ``accumulate()``, ``summarize()``. Only bbox evaluation
    per category (``params.useCats``) is supported; ``self.ious`` is left empty (``accumulate`` does
    not read it), and the stock ``computeIoU``/``evaluateImg`` are not prepared for.
    """

    def evaluate(self) -> None:
        p = self.params
        if p.iouType != "bbox" or not p.useCats:
            raise NotImplementedError("FastCOCOeval evaluates bbox results per category")
        p.imgIds = list(np.unique(p.imgIds))
        p.catIds = list(np.unique(p.catIds))
        p.maxDets = sorted(p.maxDets)
        gt = _Annotations(self.cocoGt, p.imgIds, p.catIds)
        dt = _Annotations(self.cocoDt, p.imgIds, p.catIds)
        self.ious = {}
        self.evalImgs = []
        for cat_id in p.catIds:
            pairs = [(gt.group(i, cat_id), dt.group(i, cat_id)) for i in p.imgIds]
            for area in p.areaRng:
                self.evalImgs.extend(self._evaluate_image(gt, dt, g, d, image_id, cat_id, area, p.maxDets[-1])
                                     for image_id, (g, d) in zip(p.imgIds, pairs))
        self._paramsEval = copy.deepcopy(self.params)

    def _evaluate_image(self, gt: _Annotations, dt: _Annotations, g: slice, d: slice, image_id: Any, cat_id: int,
                        area_range: Sequence[float], max_det: int) -> Optional[Dict[str, Any]]:
        """``evaluateImg``'s record for one image, category and area range."""
        if g.start == g.stop and d.start == d.stop:
            return None
        ignore = gt.crowd[g] | (gt.areas[g] < area_range[0]) | (gt.areas[g] > area_range[1])
        order = np.argsort(ignore, kind="mergesort")  # ignored ground truth last
        gt_order, gt_ignore = g.start + order, ignore[order]
        gt_crowd = gt.crowd[gt_order]
        dt_order = d.start + np.argsort(-dt.scores[d], kind="mergesort")[:max_det]  # best score first
        num_t = len(self.params.iouThrs)
        if len(gt_order) and len(dt_order):
            ious = np.asarray(coco_mask.iou(dt.boxes[dt_order], gt.boxes[gt_order], gt_crowd.astype(np.uint8)),
                              dtype=np.float64)
            match = greedy_match(ious, gt_ignore, gt_crowd, self.params.iouThrs)  # [T, D]
        else:  # the common case at a low confidence threshold: detections of a class absent from the image
            match = np.full((num_t, len(dt_order)), -1, dtype=np.int64)
        hit = match >= 0
        safe = np.maximum(match, 0)
        gt_ids, dt_ids = gt.ids[gt_order], dt.ids[dt_order]
        dtm = np.where(hit, gt_ids[safe] if len(gt_ids) else 0, 0).astype(np.float64)
        gtm = np.zeros((num_t, len(gt_order)))
        t_idx, d_idx = np.nonzero(hit)
        gtm[t_idx, match[t_idx, d_idx]] = dt_ids[d_idx]  # a crowd region keeps its last detection, as in COCOeval
        dt_area = dt.areas[dt_order]
        outside = ((dt_area < area_range[0]) | (dt_area > area_range[1]))[None, :]
        dt_ignore = (hit & (gt_ignore[safe] if len(gt_ids) else False)) | (~hit & outside)
        return {
            "image_id": image_id,
            "category_id": cat_id,
            "aRng": area_range,
            "maxDet": max_det,
            "dtIds": dt_ids.tolist(),
            "gtIds": gt_ids.tolist(),
            "dtMatches": dtm,
            "gtMatches": gtm,
            "dtScores": dt.scores[dt_order].tolist(),
            "gtIgnore": gt_ignore.astype(np.int64),
            "dtIgnore": dt_ignore,
        }
