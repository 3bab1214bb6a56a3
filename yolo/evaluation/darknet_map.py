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
  it), ``points=N`` the mean over N evenly spaced recalls of the best precision at or above each.
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

__all__ = ["ClassAP", "DarknetMapReport", "ImageDetections", "ImageTruths", "box_iou", "darknet_map"]

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


def box_iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Darknet's ``box_iou`` (src/box.c) in float32: ``box`` ``Float32[4]`` against ``others`` ``Float32[G, 4]``,
    cx, cy, w, h -> ``Float32[G]`` (0 where the boxes do not overlap or the union is 0)."""
    box = box.astype(F32)
    others = others.astype(F32).reshape(-1, 4)
    two = F32(2)

    def overlap(x1, w1, x2, w2):
        left = np.maximum(x1 - w1 / two, x2 - w2 / two)  # l1 > l2 ? l1 : l2 (no NaN here)
        right = np.minimum(x1 + w1 / two, x2 + w2 / two)
        return right - left

    w = overlap(box[0], box[2], others[:, 0], others[:, 2])
    h = overlap(box[1], box[3], others[:, 1], others[:, 3])
    inter = np.where((w < 0) | (h < 0), F32(0), w * h).astype(F32)
    union = (box[2] * box[3] + others[:, 2] * others[:, 3]) - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
    return np.where((inter == 0) | (union == 0), F32(0), iou).astype(F32)


def _check_points(points: int) -> int:
    points = int(points)
    if points < 0 or points == 1:  # Darknet divides by points - 1: every AP would be 0
        raise ValueError(f"points={points}: use 0 (area under the curve), 11, 101 or any N >= 2")
    return points


def _average_precision(precision: List[float], recall: List[float], points: int) -> float:
    """One class's AP from its precision/recall after each of its ranks (doubles, in rank order), as Darknet sums
    it. Ranks of other classes leave the curve where it is and add exact zeros in Darknet's loops, so only this
    class's ranks are needed for the same double."""
    if not precision:
        return 0.0
    if points == 0:
        ap = 0.0
        last_recall, last_precision = recall[-1], precision[-1]
        for rank in range(len(precision) - 2, -1, -1):
            delta = last_recall - recall[rank]
            last_recall = recall[rank]
            if precision[rank] > last_precision:
                last_precision = precision[rank]
            ap += delta * last_precision
        return ap + (last_recall - 0) * last_precision
    rec = np.asarray(recall)
    best_after = np.maximum.accumulate(np.asarray(precision)[::-1])[::-1]  # best precision from each rank on
    ap = 0.0
    for point in range(points):
        cur_recall = point * 1.0 / (points - 1)
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
        taken = set()  # truths matched by earlier detections of this image (at any probability)
        for box, prob, cls in zip(boxes, probs, classes):
            truth_index, max_iou = -1, F32(0)
            if len(gt_classes):
                ious = box_iou(box, gt_boxes)
                qualifies = (ious > iou_t) & (gt_classes == cls) & (ious > 0)
                if qualifies.any():
                    j = int(np.argmax(np.where(qualifies, ious, F32(-1))))  # the first of equal best IoUs
                    truth_index, max_iou = unique_truth_count + j, ious[j]
            if prob > thresh_t:
                if truth_index > -1 and truth_index not in taken:
                    avg_iou = F32(avg_iou + max_iou)
                    tp_class[cls] += 1
                else:
                    fp_class[cls] += 1
            taken.add(truth_index)
            all_probs.append(prob)
            all_classes.append(cls)
            all_truth.append(truth_index)
        unique_truth_count += len(gt_classes)

    tp, fp = int(tp_class.sum()), int(fp_class.sum())
    if tp + fp > 0:
        avg_iou = F32(avg_iou / F32(tp + fp))

    probs = np.asarray(all_probs, F32)
    order = np.argsort(-probs, kind="stable")  # glibc's qsort: a stable merge sort
    ranked_classes = np.asarray(all_classes, np.int64)[order]
    ranked_truth = np.asarray(all_truth, np.int64)[order]
    truth_flags = np.zeros(unique_truth_count, bool)
    precision: List[List[float]] = [[] for _ in range(num_classes)]
    recall: List[List[float]] = [[] for _ in range(num_classes)]
    tp_run = np.zeros(num_classes, np.int64)
    fp_run = np.zeros(num_classes, np.int64)
    for cls, truth_index in zip(ranked_classes.tolist(), ranked_truth.tolist()):
        if truth_index > -1 and not truth_flags[truth_index]:
            truth_flags[truth_index] = True
            tp_run[cls] += 1
        else:
            fp_run[cls] += 1
        t, f, n = int(tp_run[cls]), int(fp_run[cls]), int(truth_count[cls])
        precision[cls].append(t / (t + f) if t + f > 0 else 0.0)
        recall[cls].append(t / n if n > 0 else 0.0)  # tp + fn = the class's truths

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
                            average_iou=float(avg_iou), classes=report_classes, detections_count=len(all_probs),
                            unique_truth_count=unique_truth_count)


def _f32_ratio(num: int, den: int) -> Optional[float]:
    """``(float)num / (float)den`` as Darknet divides; None for 0/0 (Darknet's nan)."""
    if den == 0:
        return None if num == 0 else math.inf
    return float(F32(num) / F32(den))
