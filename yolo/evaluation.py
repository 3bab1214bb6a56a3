"""Detection metrics: COCO AP through pycocotools, plus an exact in-house twin for fast progress display.

The :class:`Evaluator` follows the reset / process / evaluate protocol:

    evaluator = Evaluator(names, dataset.ground_truth())
    evaluator.reset()
    evaluator.process(image_ids, detections)   # per batch, boxes xyxy in original-image pixels
    metrics = evaluator.evaluate()             # {"mAP50", "mAP50_95", ..., "per_class": {...}}

Inside the package classes are contiguous indices ``0..C-1`` and boxes are xyxy pixels. The COCO
side (category ids, ``[x, y, w, h]`` boxes) exists only at the boundary: the ground truth handed to
pycocotools and the results JSON.

:func:`coco_match` / :func:`coco_average_precision` re-implement COCOeval's matching and
101-point interpolated precision for the "all areas, 100 detections" setting. They give the same
``mAP50`` and ``mAP50_95`` as pycocotools (the tests check it on real detections), at a fraction of
its cost, so the same names are used for both. They also give the per-class precision / recall at a
confidence threshold, which pycocotools does not report.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from yolo.boxes import xyxy_to_xywh

logger = logging.getLogger(__name__)

__all__ = [
    "COCO_NAMES",
    "COCO91_IDS",
    "IOU_THRESHOLDS",
    "RECALL_THRESHOLDS",
    "coco_category_ids",
    "ground_truth_to_coco",
    "detections_to_coco_results",
    "bbox_iou_xywh",
    "coco_match",
    "coco_average_precision",
    "MatchResult",
    "confusion_matrix",
    "Evaluator",
    "evaluate_model",
]

# COCOeval's default thresholds, built the same way so comparisons with it are exact.
IOU_THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
MAX_DETS = 100  # COCO's AP is computed on the 100 best detections per image and category

# The 80 COCO class names in Darknet's coco.names order, and their official COCO category ids.
COCO_NAMES = (
    "person", "bicycle", "car", "motorbike", "aeroplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "sofa",
    "pottedplant", "bed", "diningtable", "toilet", "tvmonitor", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
    "scissors", "teddy bear", "hair drier", "toothbrush",
)
COCO91_IDS = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32,
    33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
    60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
)
# The same classes as spelled in COCO's own annotation files (Darknet renamed a few).
_COCO_ALIASES = {"motorcycle": "motorbike", "airplane": "aeroplane", "couch": "sofa", "potted plant": "pottedplant",
                 "dining table": "diningtable", "tv": "tvmonitor"}

ImageId = Union[int, str]
Detections = Mapping[str, torch.Tensor]


def coco_category_ids(names: Sequence[str]) -> List[int]:
    """COCO category ids for contiguous classes ``0..C-1``.

    The 80 COCO classes (Darknet or COCO spelling, in order) get the official ids (1..90 with gaps),
    so a results JSON can be scored against COCO's own annotation files; any other dataset gets
    ``1..C``.
    """
    canonical = [_COCO_ALIASES.get(n.strip().lower(), n.strip().lower()) for n in names]
    if tuple(canonical) == COCO_NAMES:
        return list(COCO91_IDS)
    return list(range(1, len(names) + 1))


def _as_numpy(x: Any, dtype) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def _xyxy_to_xywh(boxes: Any) -> np.ndarray:
    """``[K, 4]`` xyxy (tensor or array) -> float64 ``[K, 4]`` COCO ``[x, y, w, h]``."""
    return xyxy_to_xywh(torch.tensor(_as_numpy(boxes, np.float64).reshape(-1, 4))).numpy()


def ground_truth_to_coco(
    ground_truth: Iterable[Mapping[str, Any]],
    names: Sequence[str],
    category_ids: Optional[Sequence[int]] = None,
) -> Dict[str, Any]:
    """Per-image ground truth -> a COCO-format dataset dict for ``pycocotools.coco.COCO``.

    Args:
        ground_truth: one dict per image: ``image_id`` (int), ``file_name``, ``height``, ``width``,
            ``boxes`` ``Float[K, 4]`` xyxy original pixels, ``labels`` ``Int64[K]`` in ``0..C-1``.
        names: class names, index = contiguous label.
        category_ids: COCO id of each class (default :func:`coco_category_ids`).

    Every image is listed, with or without boxes. Annotation ids start at 1 (COCOeval treats a
    matched id of 0 as "no match"); ``area`` is the box area and ``iscrowd`` is 0.
    """
    category_ids = list(category_ids) if category_ids is not None else coco_category_ids(names)
    if len(category_ids) != len(names):
        raise ValueError(f"{len(category_ids)} category ids for {len(names)} class names")
    images, annotations = [], []
    for gt in ground_truth:
        image_id = gt["image_id"]
        images.append({"id": image_id, "file_name": str(gt.get("file_name", image_id)),
                       "height": int(gt["height"]), "width": int(gt["width"])})
        xywh = _xyxy_to_xywh(gt["boxes"])
        labels = _as_numpy(gt["labels"], np.int64).reshape(-1)
        for box, label in zip(xywh, labels):
            if not 0 <= label < len(names):
                raise ValueError(f"image {image_id} ({gt.get('file_name', '?')}): class {label} outside "
                                 f"0..{len(names) - 1}")
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": int(category_ids[label]), "bbox": [float(v) for v in box],
                                "area": float(box[2] * box[3]), "iscrowd": 0})
    return {
        "info": {"description": "ground truth converted from per-image boxes"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": [{"id": int(cid), "name": str(name), "supercategory": ""}
                       for cid, name in zip(category_ids, names)],
    }


def detections_to_coco_results(
    image_id: ImageId, boxes_xywh: np.ndarray, scores: np.ndarray, labels: np.ndarray, category_ids: Sequence[int]
) -> List[Dict[str, Any]]:
    """One image's detections -> COCO results entries ``{image_id, category_id, bbox [x, y, w, h], score}``."""
    return [{"image_id": image_id, "category_id": int(category_ids[int(c)]), "bbox": [float(v) for v in box],
             "score": float(s)} for box, s, c in zip(boxes_xywh, scores, labels)]


# ------------------------------------------------------------------------------ COCO-exact matching
def bbox_iou_xywh(dt: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """IoU ``[D, G]`` of ``[x, y, w, h]`` boxes, computed as ``pycocotools.mask.iou`` does (non-crowd)."""
    dx, dy, dw, dh = (dt[:, i:i + 1] for i in range(4))
    gx, gy, gw, gh = (gt[None, :, i] for i in range(4))
    w = np.minimum(dx + dw, gx + gw) - np.maximum(dx, gx)
    h = np.minimum(dy + dh, gy + gh) - np.maximum(dy, gy)
    inter = np.where((w > 0) & (h > 0), w * h, 0.0)
    union = dw * dh + gw * gh - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(inter > 0, inter / union, 0.0)


def _match_one(ious: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """COCOeval's greedy matching of score-sorted detections to ground truth, for every threshold.

    ``ious`` is ``[D, G]`` with detections in decreasing score. Each detection takes, among the
    not-yet-matched ground truths with IoU >= threshold, the one with the highest IoU (the last
    one on ties, as COCOeval does). Returns ``matched`` ``bool[T, D]``.
    """
    num_t = len(thresholds)
    num_d, num_g = ious.shape
    matched = np.zeros((num_t, num_d), dtype=bool)
    if num_d == 0 or num_g == 0:
        return matched
    limits = np.minimum(thresholds, 1 - 1e-10)[:, None]  # [T, 1]
    if num_g == 1:  # common case, vectorized: the first detection reaching each threshold takes the box
        reach = ious[None, :, 0] >= limits  # [T, D]
        hit = reach.any(axis=1)
        matched[np.flatnonzero(hit), reach.argmax(axis=1)[hit]] = True
        return matched
    taken = np.zeros((num_t, num_g), dtype=bool)
    # A detection below the lowest threshold with every ground truth can never match: skip it.
    for d in np.flatnonzero(ious.max(axis=1) >= limits.min()):
        if taken.all():  # every box is matched at every threshold: the rest are false positives
            break
        cand = np.where(taken, -1.0, ious[d][None, :])  # [T, G]
        reversed_best = np.argmax(cand[:, ::-1], axis=1)  # last maximum wins, as in COCOeval
        best = num_g - 1 - reversed_best
        best_iou = cand[np.arange(num_t), best]
        ok = best_iou >= limits[:, 0]
        matched[ok, d] = True
        taken[np.flatnonzero(ok), best[ok]] = True
    return matched


@dataclass
class MatchResult:
    """Per-class matching of detections to ground truth, pooled over images (COCO's setting).

    Attributes:
        scores: per class, ``float64[D_k]`` detection scores sorted decreasingly (stable).
        matched: per class, ``bool[T, D_k]`` true-positive flags at each IoU threshold, same order.
        num_gt: ``int64[C]`` ground-truth boxes per class.
        num_images: ``int64[C]`` images holding at least one box of the class.
    """

    scores: List[np.ndarray]
    matched: List[np.ndarray]
    num_gt: np.ndarray
    num_images: np.ndarray
    iou_thresholds: np.ndarray = field(default_factory=lambda: IOU_THRESHOLDS.copy())


def coco_match(
    gts: Sequence[Tuple[np.ndarray, np.ndarray]],
    dts: Sequence[Tuple[np.ndarray, np.ndarray, np.ndarray]],
    num_classes: int,
    iou_thresholds: np.ndarray = IOU_THRESHOLDS,
    max_dets: int = MAX_DETS,
) -> MatchResult:
    """Match detections to ground truth per image and class exactly as COCOeval (area "all").

    Args:
        gts: per image ``(boxes_xywh float64[G, 4], labels int64[G])``, images in increasing id order.
        dts: per image (same order) ``(boxes_xywh float64[D, 4], scores float64[D], labels int64[D])``.
        num_classes: ``C``.
        iou_thresholds: ``T`` IoU thresholds.
        max_dets: detections kept per image and class (best scores first).
    """
    per_scores: List[List[np.ndarray]] = [[] for _ in range(num_classes)]
    per_matched: List[List[np.ndarray]] = [[] for _ in range(num_classes)]
    num_gt = np.zeros(num_classes, dtype=np.int64)
    num_images = np.zeros(num_classes, dtype=np.int64)
    t = len(iou_thresholds)
    for (gt_boxes, gt_labels), (dt_boxes, dt_scores, dt_labels) in zip(gts, dts):
        gt_count = np.bincount(gt_labels, minlength=num_classes)
        num_gt += gt_count
        num_images += gt_count > 0
        # Detections grouped by class, each group by decreasing score; ties keep their input order
        # (lexsort is stable), as COCOeval's mergesort does.
        order = np.lexsort((-dt_scores, dt_labels))
        sorted_labels = dt_labels[order]
        present, starts = np.unique(sorted_labels, return_index=True)
        ends = np.append(starts[1:], len(order))
        for c, start, end in zip(present, starts, ends):
            idx = order[start:min(end, start + max_dets)]
            per_scores[c].append(dt_scores[idx])
            if gt_count[c] == 0:  # nothing to match: all false positives
                per_matched[c].append(np.zeros((t, len(idx)), dtype=bool))
            else:
                ious = bbox_iou_xywh(dt_boxes[idx], gt_boxes[gt_labels == c])
                per_matched[c].append(_match_one(ious, iou_thresholds))
    scores, matched = [], []
    for c in range(num_classes):
        s = np.concatenate(per_scores[c]) if per_scores[c] else np.zeros(0)
        m = np.concatenate(per_matched[c], axis=1) if per_matched[c] else np.zeros((t, 0), dtype=bool)
        order = np.argsort(-s, kind="mergesort")
        scores.append(s[order])
        matched.append(m[:, order])
    return MatchResult(scores, matched, num_gt, num_images, np.asarray(iou_thresholds))


def coco_average_precision(match: MatchResult) -> Dict[str, np.ndarray]:
    """COCO's 101-point interpolated precision from a :class:`MatchResult`.

    Returns a dict of arrays (``-1`` where a class has no ground truth, as in COCOeval):
        ``precision`` ``[T, R, C]`` interpolated precision at each recall threshold,
        ``ap`` ``[T, C]`` its mean over recall thresholds, ``recall`` ``[T, C]`` final recall.
    """
    t, r, k = len(match.iou_thresholds), len(RECALL_THRESHOLDS), len(match.num_gt)
    precision = -np.ones((t, r, k))
    recall = -np.ones((t, k))
    for c in range(k):
        npig = match.num_gt[c]
        if npig == 0:
            continue
        tps = match.matched[c]
        tp_sum = np.cumsum(tps, axis=1).astype(float)
        fp_sum = np.cumsum(~tps, axis=1).astype(float)
        for ti in range(t):
            tp, fp = tp_sum[ti], fp_sum[ti]
            nd = len(tp)
            q = np.zeros(r)
            recall[ti, c] = tp[-1] / npig if nd else 0.0
            if nd:
                rc = tp / npig
                pr = tp / (fp + tp + np.spacing(1))
                pr = np.maximum.accumulate(pr[::-1])[::-1]  # precision envelope
                inds = np.searchsorted(rc, RECALL_THRESHOLDS, side="left")
                valid = inds < nd
                q[valid] = pr[inds[valid]]
            precision[ti, :, c] = q
    ap = np.where(recall >= 0, precision.mean(axis=1), -1.0)
    return {"precision": precision, "ap": ap, "recall": recall}


def _mean_defined(x: np.ndarray) -> float:
    """Mean of the entries > -1 (COCO's convention for undefined values); -1 when there are none."""
    x = x[x > -1]
    return float(x.mean()) if x.size else -1.0


def precision_recall_at_confidence(match: MatchResult, grid: int = 1001) -> Dict[str, Any]:
    """Per-class precision and recall at IoU 0.5 at the confidence maximising the mean F1.

    The mean F1 is taken over classes with ground truth. Returns ``{"conf", "precision" [C],
    "recall" [C], "f1" [C]}`` (precision is 0 for a class with no detection above ``conf``).
    """
    conf_grid = np.linspace(0.0, 1.0, grid)
    k = len(match.num_gt)
    p_curve = np.zeros((k, grid))
    r_curve = np.zeros((k, grid))
    for c in range(k):
        scores, tp = match.scores[c], match.matched[c][0]
        if match.num_gt[c] == 0 or len(scores) == 0:
            continue
        tp_sum = np.cumsum(tp)
        # number of detections with score >= conf (scores are sorted decreasingly)
        n = np.searchsorted(-scores, -conf_grid, side="right")
        tp_at = np.where(n > 0, tp_sum[np.maximum(n - 1, 0)], 0)
        p_curve[c] = np.where(n > 0, tp_at / np.maximum(n, 1), 0.0)
        r_curve[c] = tp_at / match.num_gt[c]
    f1 = 2 * p_curve * r_curve / np.maximum(p_curve + r_curve, 1e-16)
    has_gt = match.num_gt > 0
    best = int(np.argmax(f1[has_gt].mean(axis=0))) if has_gt.any() else 0
    return {"conf": float(conf_grid[best]), "precision": p_curve[:, best], "recall": r_curve[:, best],
            "f1": f1[:, best]}


def confusion_matrix(
    gts: Sequence[Tuple[np.ndarray, np.ndarray]],
    dts: Sequence[Tuple[np.ndarray, np.ndarray, np.ndarray]],
    num_classes: int,
    conf_thres: float = 0.25,
    iou_thres: float = 0.45,
) -> np.ndarray:
    """Class confusion ``int64[C + 1, C + 1]``, rows = true class, columns = predicted class.

    Index ``C`` is background: ``[g, C]`` counts missed boxes of class ``g``, ``[C, p]`` counts
    detections of class ``p`` that match no box. Detections with score ``>= conf_thres`` are matched to
    boxes one-to-one, greedily by decreasing IoU, pairs needing IoU ``>= iou_thres``: first pairs of the
    same class, then the rest across classes (so an overlapping box of another class, a rider on a
    horse, never takes the place of a correct detection). Inputs as in :func:`coco_match`.
    """
    bg = num_classes
    matrix = np.zeros((num_classes + 1, num_classes + 1), dtype=np.int64)
    for (gt_boxes, gt_labels), (dt_boxes, dt_scores, dt_labels) in zip(gts, dts):
        keep = dt_scores >= conf_thres
        dt_boxes, dt_labels = dt_boxes[keep], dt_labels[keep]
        gt_used = np.zeros(len(gt_labels), dtype=bool)
        dt_used = np.zeros(len(dt_labels), dtype=bool)
        if len(gt_labels) and len(dt_labels):
            ious = bbox_iou_xywh(dt_boxes, gt_boxes)
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


# ------------------------------------------------------------------------------------- evaluator
_COCO_STAT_NAMES = ("mAP50_95", "mAP50", "mAP75", "AP_small", "AP_medium", "AP_large",
                    "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large")


class Evaluator:
    """COCO detection metrics over one dataset split (reset / process / evaluate).

    Args:
        names: class names; the contiguous label ``i`` is ``names[i]``.
        ground_truth: one dict per image: ``image_id``, ``file_name``, ``height``, ``width``,
            ``boxes`` ``Float[K, 4]`` xyxy original pixels, ``labels`` ``Int64[K]`` (``dataset.ground_truth()``).
        category_ids: COCO category id per class (default :func:`coco_category_ids`).
        use_pycocotools: compute the reported AP with pycocotools (the reference). When False, the
            in-house twin gives the same ``mAP50`` / ``mAP50_95`` / ``AR100`` without area breakdowns.
        conf_thres_confusion, iou_thres_confusion: operating point of the confusion matrix.
        annotation_file: for a COCO-format split, its JSON: pycocotools then scores against the
            original annotations (crowd regions ignored as COCO does) instead of ``ground_truth``.
            Image ids and ``category_ids`` must then be the file's.

    Image ids are passed as the dataset gives them. COCO needs integers: when some id is not an
    integer (a file stem), every image gets ``1..N`` in ground-truth order instead, and the results
    JSON and :attr:`coco_gt_dict` (which keeps each ``file_name``) use those.
    """

    def __init__(
        self,
        names: Sequence[str],
        ground_truth: Iterable[Mapping[str, Any]],
        category_ids: Optional[Sequence[int]] = None,
        use_pycocotools: bool = True,
        conf_thres_confusion: float = 0.25,
        iou_thres_confusion: float = 0.45,
        annotation_file: Union[str, Path, None] = None,
    ):
        self.names = [str(n) for n in names]
        self.num_classes = len(self.names)
        self.category_ids = list(category_ids) if category_ids is not None else coco_category_ids(self.names)
        if len(self.category_ids) != self.num_classes:
            raise ValueError(f"{len(self.category_ids)} category ids for {self.num_classes} class names")
        self.use_pycocotools = use_pycocotools
        self.conf_thres_confusion = conf_thres_confusion
        self.iou_thres_confusion = iou_thres_confusion
        self.annotation_file = Path(annotation_file) if annotation_file is not None else None

        gt_list = list(ground_truth)
        raw_ids = [g["image_id"] for g in gt_list]
        if len(set(raw_ids)) != len(raw_ids):
            raise ValueError("ground truth lists an image id twice")
        integer_ids = all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in raw_ids)
        self._coco_id = {i: (int(i) if integer_ids else n + 1) for n, i in enumerate(raw_ids)}
        self._gt: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        coco_gt_input = []
        for g in gt_list:
            cid = self._coco_id[g["image_id"]]
            labels = _as_numpy(g["labels"], np.int64).reshape(-1)
            bad = labels[(labels < 0) | (labels >= self.num_classes)]
            if bad.size:
                raise ValueError(f"image {g['image_id']} ({g.get('file_name', '?')}): class {int(bad[0])} outside "
                                 f"0..{self.num_classes - 1} ({self.num_classes} names)")
            self._gt[cid] = (_xyxy_to_xywh(g["boxes"]), labels)
            coco_gt_input.append({**g, "image_id": cid})
        self.coco_gt_dict = ground_truth_to_coco(coco_gt_input, self.names, self.category_ids)
        self._coco_gt = None  # built lazily: only pycocotools needs it
        self.results: Dict[str, Any] = {}  # arrays of the last evaluate(): curves, confusion matrix
        self.reset()

    # ---------------------------------------------------------------- protocol
    def reset(self) -> None:
        """Forget every processed detection."""
        self._dt: Dict[int, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.results = {}

    def process(self, image_ids: Sequence[ImageId], detections: Sequence[Detections]) -> None:
        """Record one batch: ``detections[i]`` (``boxes`` ``Float[K, 4]`` xyxy original-image pixels,
        ``scores`` ``Float[K]``, ``labels`` ``Int64[K]``) belongs to ``image_ids[i]``."""
        if len(image_ids) != len(detections):
            raise ValueError(f"{len(image_ids)} image ids for {len(detections)} detection dicts")
        for image_id, det in zip(image_ids, detections):
            if isinstance(image_id, torch.Tensor):
                image_id = image_id.item()
            cid = self._coco_id.get(image_id)
            if cid is None:
                raise KeyError(f"image id {image_id!r} is not in the ground truth")
            labels = _as_numpy(det["labels"], np.int64).reshape(-1)
            if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
                raise ValueError(f"image {image_id!r}: detection label outside 0..{self.num_classes - 1}")
            # Scores go through float32 -> Python float exactly as in the results JSON.
            scores = _as_numpy(det["scores"], np.float32).reshape(-1).astype(np.float64)
            self._dt[cid] = (_xyxy_to_xywh(det["boxes"]), scores, labels)

    @property
    def num_processed(self) -> int:
        return len(self._dt)

    def state(self) -> Dict[int, Tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The processed detections (picklable), e.g. for ``torch.distributed.all_gather_object``."""
        return dict(self._dt)

    def merge(self, states: Iterable[Mapping[int, Tuple[np.ndarray, np.ndarray, np.ndarray]]]) -> None:
        """Add detections recorded by other evaluators (other processes) from their :meth:`state`."""
        for state in states:
            self._dt.update(state)

    def _evaluated_ids(self) -> List[int]:
        """The images scored: those processed (all ground-truth images when none was processed)."""
        ids = sorted(self._dt) if self._dt else sorted(self._gt)
        if self._dt and len(ids) < len(self._gt):
            logger.info("evaluating %d of %d ground-truth images (only those processed)", len(ids), len(self._gt))
        return ids

    def results_json(self) -> List[Dict[str, Any]]:
        """COCO results entries ``{image_id, category_id, bbox [x, y, w, h] original pixels, score}``."""
        out: List[Dict[str, Any]] = []
        for cid in sorted(self._dt):
            boxes, scores, labels = self._dt[cid]
            out.extend(detections_to_coco_results(cid, boxes, scores, labels, self.category_ids))
        return out

    def save_results_json(self, path: Union[str, Path]) -> Path:
        """Write :meth:`results_json` to ``path``; returns it."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.results_json()))
        return path

    def evaluate(self, use_pycocotools: Optional[bool] = None) -> Dict[str, Any]:
        """Score the processed detections.

        Returns a JSON-ready dict: ``mAP50``, ``mAP50_95``, ``mAP75``, ``AP_small``, ``AP_medium``,
        ``AP_large``, ``AR1``, ``AR10``, ``AR100``, ``AR_small``, ``AR_medium``, ``AR_large`` (fractions
        0..1; -1 where COCO leaves a value undefined, e.g. no small objects), ``precision``/``recall``
        (mean over classes at ``conf``, the confidence of best mean F1, IoU 0.5), ``per_class``
        ``{name: {images, instances, P, R, AP50, AP}}`` for classes with ground truth, ``num_images``,
        ``num_detections`` and ``source`` (``"pycocotools"`` or ``"fast"``). The fast path fills the
        area-range entries with -1. Arrays for plots are kept in :attr:`results`.
        """
        use_coco = self.use_pycocotools if use_pycocotools is None else use_pycocotools
        self.results = {}
        ids = self._evaluated_ids()
        empty_dt = (np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=np.int64))
        gts = [self._gt[i] for i in ids]
        dts = [self._dt.get(i, empty_dt) for i in ids]
        num_det = int(sum(len(d[1]) for d in dts))

        match = coco_match(gts, dts, self.num_classes)
        fast = coco_average_precision(match)
        op = precision_recall_at_confidence(match)
        stats = {name: -1.0 for name in _COCO_STAT_NAMES}
        stats["mAP50_95"] = _mean_defined(fast["ap"])
        stats["mAP50"] = _mean_defined(fast["ap"][0])
        stats["mAP75"] = _mean_defined(fast["ap"][5])
        stats["AR100"] = _mean_defined(fast["recall"])
        ap_per_class, ap50_per_class = fast["ap"].mean(axis=0), fast["ap"][0]
        pr_curves = fast["precision"][0]  # [R, C] at IoU 0.5
        source = "fast"

        if use_coco:
            source = "pycocotools"
            if num_det == 0:
                # pycocotools cannot load an empty result list: nothing detected scores 0 everywhere.
                logger.warning("no detections: every AP and AR is 0")
                stats = {name: 0.0 for name in _COCO_STAT_NAMES}
            else:
                coco_eval = self._run_pycocotools(ids)
                stats = {name: float(v) for name, v in zip(_COCO_STAT_NAMES, coco_eval.stats)}
                precision = coco_eval.eval["precision"][:, :, :, 0, -1]  # [T, R, K], area all, 100 dets
                defined = (precision > -1).all(axis=(0, 1))
                ap_per_class = np.where(defined, precision.mean(axis=(0, 1)), -1.0)
                ap50_per_class = np.where(defined, precision[0].mean(axis=0), -1.0)
                pr_curves = precision[0]
                self.results["coco_summary"] = self._coco_summary_text
        has_gt = match.num_gt > 0
        per_class = {}
        for c in np.flatnonzero(has_gt):
            per_class[self.names[c]] = {
                "images": int(match.num_images[c]), "instances": int(match.num_gt[c]),
                "P": float(op["precision"][c]), "R": float(op["recall"][c]),
                "AP50": float(max(ap50_per_class[c], 0.0)), "AP": float(max(ap_per_class[c], 0.0)),
            }
        metrics: Dict[str, Any] = dict(stats)
        metrics.update({
            "precision": float(op["precision"][has_gt].mean()) if has_gt.any() else 0.0,
            "recall": float(op["recall"][has_gt].mean()) if has_gt.any() else 0.0,
            "conf": op["conf"],
            "num_images": len(ids),
            "num_instances": int(match.num_gt.sum()),
            "num_detections": num_det,
            "source": source,
            "per_class": per_class,
        })
        if not has_gt.any():
            logger.warning("the ground truth holds no boxes: metrics are undefined (-1)")
        self.results.update({
            "recall_thresholds": RECALL_THRESHOLDS.copy(),
            "pr_curves": np.where(pr_curves > -1, pr_curves, np.nan),  # [R, C], NaN for classes without GT
            "ap50_per_class": ap50_per_class,
            "confusion_matrix": confusion_matrix(gts, dts, self.num_classes, self.conf_thres_confusion,
                                                 self.iou_thres_confusion),
            "metrics": metrics,
        })
        return metrics

    def _run_pycocotools(self, image_ids: List[int]):
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval

        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet):
            if self._coco_gt is None and self.annotation_file is not None:
                self._coco_gt = COCO(str(self.annotation_file))
            elif self._coco_gt is None:
                self._coco_gt = COCO()
                self._coco_gt.dataset = copy.deepcopy(self.coco_gt_dict)
                self._coco_gt.createIndex()
            coco_dt = self._coco_gt.loadRes(self.results_json())  # loadRes edits the entries: pass fresh ones
            coco_eval = COCOeval(self._coco_gt, coco_dt, "bbox")
            coco_eval.params.imgIds = image_ids
            coco_eval.evaluate()
            coco_eval.accumulate()
        summary = io.StringIO()
        with contextlib.redirect_stdout(summary):
            coco_eval.summarize()
        self._coco_summary_text = summary.getvalue().rstrip()
        return coco_eval

    # ---------------------------------------------------------------- reports
    def class_table(self, metrics: Optional[Mapping[str, Any]] = None) -> str:
        """The per-class table (images, instances, P, R, AP50, AP) with an ``all`` row first."""
        metrics = metrics if metrics is not None else self.results.get("metrics")
        if metrics is None:
            raise RuntimeError("call evaluate() before class_table()")
        per_class = metrics["per_class"]
        width = max([len("class")] + [len(n) for n in per_class]) + 2
        head = f"{'class':>{width}}{'images':>9}{'instances':>11}{'P':>8}{'R':>8}{'AP50':>8}{'AP':>8}"
        lines = [head]

        def row(name, images, instances, p, r, ap50, ap):
            lines.append(f"{name:>{width}}{images:>9}{instances:>11}{p:>8.3f}{r:>8.3f}{ap50:>8.3f}{ap:>8.3f}")

        row("all", metrics["num_images"], metrics["num_instances"], metrics["precision"], metrics["recall"],
            max(metrics["mAP50"], 0.0), max(metrics["mAP50_95"], 0.0))
        for name, m in per_class.items():
            row(name, m["images"], m["instances"], m["P"], m["R"], m["AP50"], m["AP"])
        return "\n".join(lines)

    def summary_text(self, metrics: Optional[Mapping[str, Any]] = None) -> str:
        """COCO's 12-line summary (pycocotools' own text when it ran) followed by the class table."""
        metrics = metrics if metrics is not None else self.results.get("metrics")
        if metrics is None:
            raise RuntimeError("call evaluate() before summary_text()")
        coco = self.results.get("coco_summary")
        if coco is None:
            coco = "\n".join(f"{k:>10}: {metrics[k]:.4f}" for k in _COCO_STAT_NAMES if metrics[k] > -1)
        note = f"(P and R at confidence {metrics['conf']:.3f}, the best mean F1, IoU 0.5)"
        return f"{coco}\n{self.class_table(metrics)}\n{note}"

    def figures(self) -> Dict[str, Any]:
        """Matplotlib figures of the last :meth:`evaluate` (for TensorBoard ``add_figure``):
        ``pr_curves`` (every class + mean), ``pr_curves_per_class`` (one panel per class) and
        ``confusion_matrix``. They are standalone figures (no pyplot state): nothing to close."""
        from yolo import plots

        if "pr_curves" not in self.results:
            raise RuntimeError("call evaluate() before figures()")
        r = self.results
        return {
            "pr_curves": plots.pr_curves_figure(r["recall_thresholds"], r["pr_curves"], self.names,
                                                r["ap50_per_class"]),
            "pr_curves_per_class": plots.pr_curves_grid_figure(r["recall_thresholds"], r["pr_curves"], self.names,
                                                               r["ap50_per_class"]),
            "confusion_matrix": plots.confusion_matrix_figure(r["confusion_matrix"], self.names,
                                                              self.conf_thres_confusion, self.iou_thres_confusion),
        }

    def save_plots(self, save_dir: Union[str, Path]) -> List[Path]:
        """Write ``pr_curves.png``, ``pr_curves_per_class.png`` and ``confusion_matrix.png`` into ``save_dir``."""
        from yolo import plots

        save_dir = Path(save_dir)
        save_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, fig in self.figures().items():
            paths.append(plots.save_figure(fig, save_dir / f"{name}.png"))
        return paths

    def write_tensorboard(self, writer, step: int, prefix: str = "val", plots: bool = True) -> None:
        """Log the last metrics to a ``torch.utils.tensorboard.SummaryWriter``: the COCO scalars,
        precision/recall, per-class AP50 and (with ``plots``) the figures of :meth:`figures`."""
        metrics = self.results.get("metrics")
        if metrics is None:
            raise RuntimeError("call evaluate() before write_tensorboard()")
        for key in ("mAP50", "mAP50_95", "mAP75", "AR100", "precision", "recall"):
            if metrics[key] > -1:
                writer.add_scalar(f"{prefix}/{key}", metrics[key], step)
        for name, m in metrics["per_class"].items():
            writer.add_scalar(f"{prefix}_AP50/{name}", m["AP50"], step)
        if plots:
            for name, fig in self.figures().items():
                writer.add_figure(f"{prefix}/{name}", fig, step, close=False)

    def save_metrics(self, path: Union[str, Path], extra: Optional[Mapping[str, Any]] = None) -> Path:
        """Write the last metrics (plus ``extra`` entries) as JSON; returns the path."""
        if "metrics" not in self.results:
            raise RuntimeError("call evaluate() before save_metrics()")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**self.results["metrics"], **(extra or {})}, indent=2))
        return path


# --------------------------------------------------------------------------- model over a loader
def _info_get(info: Any, *keys: str, default: Any = None) -> Any:
    """Read a field from a per-image info record (a dict or an object with attributes)."""
    for key in keys:
        if isinstance(info, Mapping):
            if key in info:
                return info[key]
        elif hasattr(info, key):
            return getattr(info, key)
    return default


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate_model(
    model: torch.nn.Module,
    loader: Iterable,
    evaluator: Evaluator,
    conf_thres: float = 0.001,
    iou_thres: float = 0.6,
    device: Union[str, torch.device, None] = None,
    max_det: int = 300,
    multi_label: bool = True,
    amp: bool = False,
    progress: bool = True,
    desc: str = "evaluating",
) -> Dict[str, Any]:
    """Run ``model`` over ``loader``, feed ``evaluator`` and return its metrics plus ``speed_ms``.

    This is the one evaluation path, shared by ``tools/eval.py`` and the trainer.

    Args:
        model: a detector whose eval-mode forward maps ``Float[B, 3, H, W]`` (RGB 0..1) to
            ``Float[B, N, 5 + C]`` (cx, cy, w, h input pixels, objectness, class probabilities).
            Its train/eval mode is restored afterwards.
        loader: yields ``(images, targets, infos)``; ``infos[i]`` (dict or object) gives ``image_id``,
            the original ``shape`` ``(h, w)`` and the ``letterbox`` :class:`yolo.inference.preprocess.LetterboxInfo`.
        evaluator: reset here, then fed every batch.
        conf_thres, iou_thres, max_det, multi_label: passed to :func:`yolo.inference.postprocess.postprocess`.
        amp: autocast the forward pass (CUDA only).

    Returns:
        :meth:`Evaluator.evaluate`'s dict plus ``speed_ms`` = ``{"preprocess", "inference", "nms"}``
        milliseconds per image (pre-processing is the wait for the loader plus the copy to the device).
    """
    from tqdm import tqdm

    from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer, postprocess_gaussian
    from yolo.inference.postprocess import nms_settings, postprocess, scale_boxes_to_original

    # Darknet's own NMS variant for the cfg (its last [yolo]'s nms_kind / beta_nms).
    nms_kind, beta_nms = nms_settings(getattr(getattr(model, "module", model), "sections", ()))
    # [Gaussian_yolo] rows end with four uncertainties, which Darknet's score for them uses.
    heads = getattr(getattr(model, "module", model), "yolo_layers", ())
    select = postprocess_gaussian if any(isinstance(h, GaussianYOLOLayer) for h in heads) else postprocess
    if device is None:
        device = next(model.parameters()).device
    device = torch.device(device)
    was_training = model.training
    model.eval()
    evaluator.reset()
    times = {"preprocess": 0.0, "inference": 0.0, "nms": 0.0}
    num_images = 0
    bar = tqdm(loader, desc=desc, disable=not progress, leave=False)
    it = iter(bar)
    try:
        with torch.inference_mode():
            while True:
                t0 = time.perf_counter()
                try:
                    images, _targets, infos = next(it)
                except StopIteration:
                    break
                images = images.to(device, non_blocking=True)
                images = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
                _sync(device)
                t1 = time.perf_counter()
                with torch.autocast(device_type=device.type, enabled=amp and device.type == "cuda"):
                    preds = model(images)
                if isinstance(preds, (list, tuple)):
                    raise TypeError("the model returned raw head maps: is it an eval-mode Darknet detector?")
                _sync(device)
                t2 = time.perf_counter()
                dets = select(preds.float(), conf_thres, iou_thres, multi_label=multi_label, max_det=max_det,
                              nms_kind=nms_kind, beta_nms=beta_nms)
                image_ids, out = [], []
                for det, info in zip(dets, infos):
                    shape = _info_get(info, "shape", "original_shape", "orig_shape")
                    placement = _info_get(info, "letterbox", "letterbox_info", "lb")
                    if shape is None or placement is None:
                        raise ValueError("each batch info needs the original 'orig_shape' and the 'letterbox' "
                                         "placement: evaluate on a dataset built with augment=False")
                    image_ids.append(_info_get(info, "image_id", "id"))
                    boxes = scale_boxes_to_original(det["boxes"].float(), placement, tuple(shape))
                    out.append({"boxes": boxes.cpu(), "scores": det["scores"].cpu(), "labels": det["labels"].cpu()})
                evaluator.process(image_ids, out)
                t3 = time.perf_counter()
                times["preprocess"] += t1 - t0
                times["inference"] += t2 - t1
                times["nms"] += t3 - t2
                num_images += len(image_ids)
    finally:
        bar.close()
        model.train(was_training)
    metrics = evaluator.evaluate()
    metrics["speed_ms"] = {k: 1000.0 * v / max(num_images, 1) for k, v in times.items()}
    return metrics
