"""Darknet's ``detector map`` report (``validate_detector_map``, src/detector.c), computed as Darknet computes it.

A pure function from each image's detections and truths to the report: :func:`darknet_map`. What it follows,
line by line, and where it differs from COCO's mAP (pycocotools):

* **Matching.** Each detection (one per box and class whose probability passed Darknet's threshold) takes the truth
  of its class with the highest IoU above ``iou_thresh`` (the first one on a tie). Two detections may take the same
  truth: when the detections are ranked, the first one counts as a true positive, the other as a false positive.
* **The curve.** All detections of all images are ranked by probability (Darknet's ``qsort``; glibc's qsort is a
  stable merge sort, so equal probabilities keep the order in which the detections were made: image by image, box
  by box, class by class). Per class: precision and recall after each rank; ``points=0`` is the area under the
  curve at each unique recall (the precision of a recall step is the best precision at or after the rank before
  it), ``points=N`` the mean over N evenly spaced recalls (``point * (1 / (N - 1))``, as Darknet's ``-Ofast`` build
  computes them) of the best precision at or above each.
* **The mean** is over **all** classes of the names file: a class with no truth has AP 0 and counts in the mean
  (Darknet's quirk, kept: a names file with unused classes lowers mAP).
* **At ``thresh``** (Darknet's ``-thresh``, 0.25): TP/FP per detection above it, where a detection whose truth an
  earlier detection of the same image already took (at any probability) is a false positive; FN = truths - TP;
  "average IoU" is the sum of the TPs' IoUs over TP + FP (false positives count as IoU 0). Precision, recall, F1
  and the average IoU are Darknet's single-precision floats; AP and mAP its doubles.

Boxes are Darknet's ``box``: ``cx, cy, w, h`` as fractions of the original image, float32; IoUs are Darknet's
``box_iou`` in float32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["ClassAP", "DarknetMapReport", "ImageDetections", "ImageTruths", "cxcywh_iou_one_to_many", "darknet_map", "pairwise_iou"]

F32 = np.float32


@dataclass
class ImageDetections:
    """One image's detections in the order Darknet makes them (box by box, then class by class).

    Attributes:
        boxes: ``Float32[K, 4]`` cx, cy, w, h as fractions of the original image.
        probs: ``Float32[K]`` objectness * class probability (above Darknet's threshold).
        classes: ``Int64[K]`` class index of each.
    """

    boxes: np.ndarray
    probs: np.ndarray
    classes: np.ndarray

    @classmethod
    def empty(cls) -> "ImageDetections":
        return cls(np.zeros((0, 4), F32), np.zeros(0, F32), np.zeros(0, np.int64))


@dataclass
class ImageTruths:
    """One image's truths as Darknet reads a label file: ``boxes`` ``Float32[G, 4]`` cx, cy, w, h (fractions of the
    image), ``classes`` ``Int64[G]``, in the file's order."""

    boxes: np.ndarray
    classes: np.ndarray


@dataclass
class ClassAP:
    """One class's line of the report: ``ap`` (a fraction) and the TP/FP of its detections above ``thresh``."""

    name: str
    ap: float
    tp: int
    fp: int


@dataclass
class DarknetMapReport:
    """What ``detector map`` prints (fractions, not percent); ``None`` where Darknet divides 0 by 0 and prints nan."""

    map: float
    points: int
    iou_thresh: float
    thresh: float
    precision: Optional[float]
    recall: Optional[float]
    f1: Optional[float]
    tp: int
    fp: int
    fn: int
    average_iou: float
    classes: List[ClassAP] = field(default_factory=list)
    detections_count: int = 0
    unique_truth_count: int = 0

    def as_dict(self) -> Dict[str, Any]:
        """The ``darknet_map`` object of ``metrics.json``."""
        return {"map": self.map, "points": self.points, "iou_thresh": self.iou_thresh, "thresh": self.thresh,
                "precision": self.precision, "recall": self.recall, "f1": self.f1, "tp": self.tp, "fp": self.fp,
                "fn": self.fn, "average_iou": self.average_iou,
                "detections_count": self.detections_count, "unique_truth_count": self.unique_truth_count,
                "classes": {c.name: {"ap": c.ap, "tp": c.tp, "fp": c.fp} for c in self.classes}}

    def text(self) -> str:
        """The report in Darknet's layout (its printf formats), from ``detections_count`` to the mAP line."""
        lines = [f" detections_count = {self.detections_count}, unique_truth_count = {self.unique_truth_count}  "]
        for i, c in enumerate(self.classes):
            lines.append(f"class_id = {i}, name = {c.name}, ap = {c.ap * 100:2.2f}%   \t (TP = {c.tp}, FP = {c.fp}) ")
        thresh = float(F32(self.thresh))
        lines += ["", f" for conf_thresh = {thresh:1.2f}, precision = {_c_float(self.precision)}, "
                      f"recall = {_c_float(self.recall)}, F1-score = {_c_float(self.f1)} ",
                  f" for conf_thresh = {thresh:0.2f}, TP = {self.tp}, FP = {self.fp}, FN = {self.fn}, "
                  f"average IoU = {float(F32(self.average_iou) * F32(100)):2.2f} % ", ""]
        curve = f"used {self.points} Recall-points " if self.points else "used Area-Under-Curve for each unique Recall "
        lines.append(f" IoU threshold = {float(F32(self.iou_thresh) * F32(100)):2.0f} %, {curve}")
        lines.append(f" mean average precision (mAP@{float(F32(self.iou_thresh)):0.2f}) = {self.map:f}, "
                     f"or {self.map * 100:2.2f} % ")
        return "\n".join(lines)


def _c_float(value: Optional[float]) -> str:
    """``%1.2f`` of a float that may be C's 0/0 (x86's default NaN prints as ``-nan``)."""
    return "-nan" if value is None else f"{value:1.2f}"


def cxcywh_iou_one_to_many(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Darknet's ``box_iou`` (src/box.c) in float32: ``box`` ``Float32[4]`` against ``others`` ``Float32[G, 4]``,
    cx, cy, w, h -> ``Float32[G]`` (0 where the boxes do not overlap or the union is 0)."""
    return pairwise_iou(np.asarray(box, F32).reshape(1, 4), others)[0]


def pairwise_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Darknet's ``box_iou`` of every pair, ``Float32[P, 4]`` x ``Float32[Q, 4]`` (cx, cy, w, h) -> ``Float32[P, Q]``:
    the same float32 operations as the C function, element by element (it is symmetric in its two boxes)."""
    a = np.asarray(a, F32).reshape(-1, 1, 4)
    b = np.asarray(b, F32).reshape(1, -1, 4)
    two = F32(2)

    def overlap(x1, w1, x2, w2):
        left = np.maximum(x1 - w1 / two, x2 - w2 / two)  # l1 > l2 ? l1 : l2 (no NaN here)
        right = np.minimum(x1 + w1 / two, x2 + w2 / two)
        return right - left

    w = overlap(a[..., 0], a[..., 2], b[..., 0], b[..., 2])
    h = overlap(a[..., 1], a[..., 3], b[..., 1], b[..., 3])
    inter = np.where((w < 0) | (h < 0), F32(0), w * h).astype(F32)
    union = (a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3]) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
    return np.where((inter == 0) | (union == 0), F32(0), iou).astype(F32)


def _check_points(points: int) -> int:
    points = int(points)
    if points < 0 or points == 1:  # Darknet divides by points - 1: every AP would be 0
        raise ValueError(f"points={points}: use 0 (area under the curve), 11, 101 or any N >= 2")
    return points


def _average_precision(precision: np.ndarray, recall: np.ndarray, points: int) -> float:
    """One class's AP from its precision/recall after each of its ranks (doubles, in rank order), as Darknet sums
    it. Ranks of other classes leave the curve where it is and add exact zeros in Darknet's loops, so only this
    class's ranks are needed for the same double."""
    if not len(precision):
        return 0.0
    if points == 0:
        # From the last rank back: each recall step times the best precision at or after the rank before it,
        # summed in that order (the steps of 0, at false positives, add exact zeros and are skipped).
        best_after = np.maximum.accumulate(precision[::-1])[::-1]
        steps = np.diff(recall) * best_after[:-1]
        ap = 0.0
        for step in steps[::-1][steps[::-1] != 0].tolist():
            ap += step
        return ap + (float(recall[0]) - 0) * float(best_after[0])
    rec = recall
    best_after = np.maximum.accumulate(precision[::-1])[::-1]  # best precision from each rank on
    ap = 0.0
    for point in range(points):
        # Darknet is built with -Ofast, whose reciprocal math computes `point * 1.0 / (map_points-1)` as
        # point times the reciprocal: 6 * (1 / 10) is 0.6000000000000001, above a recall of 3 / 5.
        cur_recall = point * (1.0 / (points - 1))
        first = int(np.searchsorted(rec, cur_recall, side="left"))  # recall is non-decreasing along the ranks
        if first < len(rec) and best_after[first] > 0:
            ap += float(best_after[first])
    return ap / points


def darknet_map(detections: Sequence[ImageDetections], truths: Sequence[ImageTruths], names: Sequence[str],
                points: int = 0, iou_thresh: float = 0.5, thresh: float = 0.25) -> DarknetMapReport:
    """Darknet's ``validate_detector_map`` report.

    Args:
        detections: per image (in the valid list's order), its detections as Darknet makes them
            (:class:`ImageDetections`; :mod:`yolo.evaluation.darknet_detections` makes them from a model's output).
        truths: per image, its truths (:class:`ImageTruths`), same order.
        names: the names file: one AP per name, and the mean over all of them.
        points: 0 (area under the curve at each unique recall), 11 (PascalVOC 2007), 101 (COCO), any N >= 2.
        iou_thresh: a detection matches a truth of its class whose IoU is above this (``-iou_thresh``).
        thresh: the probability above which TP/FP, precision, recall, F1 and average IoU are counted (``-thresh``).
    """
    points = _check_points(points)
    if len(detections) != len(truths):
        raise ValueError(f"{len(detections)} images of detections for {len(truths)} images of truths")
    num_classes = len(names)
    iou_t, thresh_t = F32(iou_thresh), F32(thresh)
    truth_count = np.zeros(num_classes, np.int64)
    tp_class = np.zeros(num_classes, np.int64)
    fp_class = np.zeros(num_classes, np.int64)
    avg_iou = F32(0)
    all_probs, all_classes, all_truth = [], [], []  # per detection, in the order made; truth index -1: none
    unique_truth_count = 0
    for dets, gts in zip(detections, truths):
        gt_classes = np.asarray(gts.classes, np.int64).reshape(-1)
        gt_boxes = np.asarray(gts.boxes, F32).reshape(-1, 4)
        if gt_classes.size and (gt_classes.min() < 0 or gt_classes.max() >= num_classes):
            raise ValueError(f"a truth's class is outside 0..{num_classes - 1} ({num_classes} names)")
        np.add.at(truth_count, gt_classes, 1)
        probs = np.asarray(dets.probs, F32).reshape(-1)
        classes = np.asarray(dets.classes, np.int64).reshape(-1)
        boxes = np.asarray(dets.boxes, F32).reshape(-1, 4)
        if classes.size and (classes.min() < 0 or classes.max() >= num_classes):
            raise ValueError(f"a detection's class is outside 0..{num_classes - 1} ({num_classes} names)")
        truth_index = np.full(len(probs), -1, np.int64)
        max_iou = np.zeros(len(probs), F32)
        if len(gt_classes) and len(probs):
            ious = pairwise_iou(boxes, gt_boxes)
            qualifies = (ious > iou_t) & (classes[:, None] == gt_classes[None, :]) & (ious > 0)
            best = np.argmax(np.where(qualifies, ious, F32(-1)), 1)  # the first of equal best IoUs
            found = qualifies.any(1)
            truth_index[found] = unique_truth_count + best[found]
            max_iou[found] = ious[np.flatnonzero(found), best[found]]
        # At thresh, a detection is a TP when it has a truth that no earlier detection of the image (at any
        # probability) has.
        _, first = np.unique(truth_index, return_index=True)
        first_of_truth = np.zeros(len(probs), bool)
        first_of_truth[first] = True
        above = probs > thresh_t
        is_tp = above & (truth_index > -1) & first_of_truth
        for iou in max_iou[is_tp].tolist():
            avg_iou = F32(avg_iou + F32(iou))
        np.add.at(tp_class, classes[is_tp], 1)
        np.add.at(fp_class, classes[above & ~is_tp], 1)
        all_probs.append(probs)
        all_classes.append(classes)
        all_truth.append(truth_index)
        unique_truth_count += len(gt_classes)

    tp, fp = int(tp_class.sum()), int(fp_class.sum())
    if tp + fp > 0:
        avg_iou = F32(avg_iou / F32(tp + fp))

    probs = np.concatenate(all_probs) if all_probs else np.zeros(0, F32)
    order = np.argsort(-probs, kind="stable")  # glibc's qsort: a stable merge sort
    ranked_classes = np.concatenate(all_classes)[order] if all_classes else np.zeros(0, np.int64)
    ranked_truth = np.concatenate(all_truth)[order] if all_truth else np.zeros(0, np.int64)
    # In the ranking a truth counts once, for the first detection that has it; the others are false positives.
    _, first = np.unique(ranked_truth, return_index=True)
    ranked_tp = np.zeros(len(ranked_truth), bool)
    ranked_tp[first] = True
    ranked_tp &= ranked_truth > -1
    precision, recall = [], []
    for c in range(num_classes):
        tp_c = ranked_tp[ranked_classes == c]
        tp_run = np.cumsum(tp_c, dtype=np.int64)
        fp_run = np.cumsum(~tp_c, dtype=np.int64)
        precision.append(tp_run / np.maximum(tp_run + fp_run, 1))  # doubles, as Darknet's (double)tp / (tp + fp)
        recall.append(tp_run / truth_count[c] if truth_count[c] > 0 else np.zeros(len(tp_c)))

    report_classes = []
    mean = 0.0
    for c in range(num_classes):
        ap = _average_precision(precision[c], recall[c], points)
        report_classes.append(ClassAP(str(names[c]), ap, int(tp_class[c]), int(fp_class[c])))
        mean += ap
    mean = mean / num_classes if num_classes else 0.0

    fn = unique_truth_count - tp
    cur_precision = _f32_ratio(tp, tp + fp)
    cur_recall = _f32_ratio(tp, tp + fn)
    f1 = None
    if cur_precision is not None and cur_recall is not None:
        p, r = F32(cur_precision), F32(cur_recall)
        f1 = None if p + r == 0 else float(F32(F32(F32(2) * p) * r) / F32(p + r))
    return DarknetMapReport(map=mean, points=points, iou_thresh=float(iou_thresh), thresh=float(thresh),
                            precision=cur_precision, recall=cur_recall, f1=f1, tp=tp, fp=fp, fn=fn,
                            average_iou=float(avg_iou), classes=report_classes, detections_count=len(probs),
                            unique_truth_count=unique_truth_count)


def _f32_ratio(num: int, den: int) -> Optional[float]:
    """``(float)num / (float)den`` as Darknet divides; None for 0/0 (Darknet's nan)."""
    if den == 0:
        return None if num == 0 else math.inf
    return float(F32(num) / F32(den))
