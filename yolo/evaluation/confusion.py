"""The class confusion matrix.

COCOeval has nothing like it: it matches detections to ground truth of the same category only, so
it cannot say which class a box was mistaken for. This small one-to-one matching is the one piece of
the evaluator that does not come from COCOeval; its IoU is pycocotools' own (``mask.iou``).
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np
from pycocotools import mask as coco_mask

from yolo.ops.postprocess_defaults import CONFUSION_MATCH_IOU, DETECT_CONF_THRES

__all__ = ["confusion_matrix"]


def confusion_matrix(
    gts: Sequence[Tuple[np.ndarray, np.ndarray]],
    dts: Sequence[Tuple[np.ndarray, np.ndarray, np.ndarray]],
    num_classes: int,
    conf_thres: float = DETECT_CONF_THRES,
    iou_thres: float = CONFUSION_MATCH_IOU,
) -> np.ndarray:
    """Class confusion ``int64[C + 1, C + 1]``, rows = true class, columns = predicted class.

    Args:
        gts: per image ``(boxes float64[G, 4] COCO corner xywh, labels int64[G])``.
        dts: per image, same order, ``(boxes float64[D, 4] COCO corner xywh, scores float64[D], labels int64[D])``.
        num_classes: ``C``.
        conf_thres: detections scoring below it are left out.
        iou_thres: the IoU a detection needs with a box to be paired with it.

    Index ``C`` is background: ``[g, C]`` counts missed boxes of class ``g``, ``[C, p]`` counts
    detections of class ``p`` that match no box. Detections are matched to boxes one-to-one, greedily
    by decreasing IoU: first pairs of the same class, then the rest across classes (so an overlapping
    box of another class, a rider on a horse, never takes the place of a correct detection).
    """
    bg = num_classes
    matrix = np.zeros((num_classes + 1, num_classes + 1), dtype=np.int64)
    for (gt_boxes, gt_labels), (dt_boxes, dt_scores, dt_labels) in zip(gts, dts):
        keep = dt_scores >= conf_thres
        dt_boxes, dt_labels = dt_boxes[keep], dt_labels[keep]
        gt_used = np.zeros(len(gt_labels), dtype=bool)
        dt_used = np.zeros(len(dt_labels), dtype=bool)
        if len(gt_labels) and len(dt_labels):
            ious = coco_mask.iou(np.asarray(dt_boxes, np.float64), np.asarray(gt_boxes, np.float64),
                                 [0] * len(gt_labels))  # [D, G]
            same = dt_labels[:, None] == gt_labels[None, :]
            for allowed in (same, ~same):
                di, gi = np.nonzero((ious >= iou_thres) & allowed)
                for j in np.argsort(-ious[di, gi], kind="mergesort"):
                    d, g = di[j], gi[j]
                    if dt_used[d] or gt_used[g]:
                        continue
                    dt_used[d] = gt_used[g] = True
                    matrix[gt_labels[g], dt_labels[d]] += 1
        np.add.at(matrix, (gt_labels[~gt_used], bg), 1)
        np.add.at(matrix, (bg, dt_labels[~dt_used]), 1)
    return matrix
