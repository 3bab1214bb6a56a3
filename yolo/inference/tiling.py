"""Sliced detection for images larger than the network input (small objects that the whole image, shrunk to
the network's size, would make too small to see).

An image is cut into slices of the network's input size that overlap by ``overlap`` (a fraction of the slice),
the last slice of each row and column flush with the image's edge; the whole image, resized to the network's
size as usual, is added so that objects larger than a slice are still found. All of them go through the model in
batches (the Detector's own pre-processing, model and thresholds), each slice's boxes are moved to the original
image's pixels, and the union is merged per class:

- ``merge="nms"``: the Detector's NMS (the cfg's ``nms_kind``, its IoU threshold): the best box of a cluster
  stays;
- ``merge="greedy"``: greedy non-maximum merging as SAHI describes it (Akyon et al., "Slicing Aided Hyper
  Inference", 2022): boxes sorted by score; each kept box absorbs the remaining boxes of its class whose
  intersection over the *smaller* box's area exceeds ``merge_thres``, and becomes their enclosing box with the
  best score. It joins the halves of an object cut by a slice's edge, which NMS (IoU) cannot.

An image no larger than one slice is detected exactly as without tiling (one pass, the same result).

Boxes are ``xyxy`` original-image pixels, as the Detector's.
"""
from __future__ import annotations

import math
import time
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

from yolo.ops.nms import nms

__all__ = ["MERGE_KINDS", "slice_origins", "slice_windows", "greedy_merge", "TiledDetector"]

MERGE_KINDS = ("nms", "greedy")
GREEDY_MERGE_THRES = 0.5  # SAHI's default match threshold (intersection over the smaller box)


def slice_origins(length: int, size: int, overlap: float) -> List[int]:
    """Starts of the slices of ``size`` pixels along an axis of ``length``, consecutive ones ``size * (1 -
    overlap)`` apart (rounded down), the last one ending at ``length``: ``[0]`` when one slice covers it."""
    if length <= size:
        return [0]
    step = max(1, int(size * (1.0 - overlap)))
    count = math.ceil((length - size) / step) + 1
    return sorted({min(i * step, length - size) for i in range(count)})


def slice_windows(shape_hw: Tuple[int, int], slice_hw: Tuple[int, int],
                  overlap: float) -> List[Tuple[int, int, int, int]]:
    """The slices of an image ``shape_hw = (h, w)`` as ``(left, top, right, bottom)`` pixel windows, row by row;
    a slice is ``slice_hw`` or, along an axis shorter than it, the whole axis."""
    h, w = shape_hw
    sh, sw = slice_hw
    return [(x, y, min(x + sw, w), min(y + sh, h))
            for y in slice_origins(h, sh, overlap) for x in slice_origins(w, sw, overlap)]


def greedy_merge(boxes: torch.Tensor, scores: torch.Tensor, groups: torch.Tensor,
                 thres: float = GREEDY_MERGE_THRES) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Greedy non-maximum merging (SAHI's GREEDYNMM with its IOS match metric).

    Args:
        boxes: ``Float[K, 4]`` xyxy. scores: ``Float[K]``. groups: ``Int64[K]`` (classes; boxes of different
            groups never merge). thres: the intersection over the smaller box's area above which two boxes merge.

    Returns:
        ``(boxes, scores, keep)``: the merged boxes ``Float[M, 4]`` (each the enclosing box of the kept box and
        those it absorbed), their scores (the kept box's, the best of its cluster) and ``keep`` ``Int64[M]``, the
        index of each cluster's best box in the input, by decreasing score.
    """
    order = torch.argsort(scores, descending=True, stable=True)
    b = boxes.double().numpy()
    area = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    g = groups.numpy()
    taken = np.zeros(len(b), dtype=bool)
    merged, keep = [], []
    for i in order.tolist():
        if taken[i]:
            continue
        taken[i] = True
        rest = np.flatnonzero(~taken & (g == g[i]))
        ix = np.clip(np.minimum(b[rest, 2], b[i, 2]) - np.maximum(b[rest, 0], b[i, 0]), 0, None)
        iy = np.clip(np.minimum(b[rest, 3], b[i, 3]) - np.maximum(b[rest, 1], b[i, 1]), 0, None)
        smaller = np.minimum(area[rest], area[i])
        ios = np.where(smaller > 0, ix * iy / np.where(smaller > 0, smaller, 1), 0.0)
        absorbed = rest[ios > thres]
        taken[absorbed] = True
        cluster = b[np.concatenate(([i], absorbed))]
        merged.append([cluster[:, 0].min(), cluster[:, 1].min(), cluster[:, 2].max(), cluster[:, 3].max()])
        keep.append(i)
    keep_t = torch.as_tensor(keep, dtype=torch.int64)
    out = torch.as_tensor(np.asarray(merged, dtype=np.float64).reshape(-1, 4)).to(boxes.dtype)
    return out, scores[keep_t], keep_t


class TiledDetector:
    """A :class:`~yolo.inference.detector.Detector` that detects on slices (see the module docstring); called
    like it: ``tiled(images)`` -> one dict per image, ``boxes`` ``Float[K, 4]`` xyxy original pixels, ``scores``,
    ``labels``, ``names``. The Detector's other attributes (``names``, ``img_size``, ...) read through.

    Args:
        detector: the Detector (its input size is the slice size; its thresholds, NMS and ``max_det`` apply).
        overlap: the fraction of a slice shared with its neighbour, ``0 <= overlap <= 0.95``.
        merge: ``"nms"`` or ``"greedy"`` (see the module docstring).
        batch_size: slices per call of the Detector (which on the CPU still runs one per forward pass).
    """

    def __init__(self, detector, overlap: float = 0.2, merge: str = "nms", batch_size: int = 8):
        if not 0.0 <= float(overlap) <= 0.95:
            raise ValueError(f"tile_overlap {overlap}: must be between 0 and 0.95")
        if merge not in MERGE_KINDS:
            raise ValueError(f"tile_merge {merge!r}: use one of {', '.join(MERGE_KINDS)}")
        self.detector, self.overlap, self.merge = detector, float(overlap), merge
        self.batch_size = max(1, int(batch_size))
        self.timings: Dict[str, float] = {}
        self.slices = 0  # slices (and whole images) of the last call

    def __getattr__(self, name):  # names, img_size, resize, num_classes, ... of the Detector
        return getattr(self.detector, name)

    @torch.inference_mode()
    def __call__(self, images) -> List[Dict]:
        loaded = self.detector._load(images)
        totals = {"preprocess": 0.0, "inference": 0.0, "postprocess": 0.0}
        out, self.slices = [], 0
        for image in loaded:
            out.append(self._detect_one(image, totals))
        self.timings = totals
        return out

    def _detect_one(self, image: np.ndarray, totals: Dict[str, float]) -> Dict:
        h, w = image.shape[:2]
        windows = slice_windows((h, w), tuple(self.detector.img_size), self.overlap)
        if windows == [(0, 0, w, h)]:  # one slice is the whole image: the untiled detection itself
            det = self.detector([image])[0]
            self.slices += 1
            for k, v in self.detector.timings.items():
                totals[k] += v
            return det
        windows.append((0, 0, w, h))  # the whole image at the network's size, for objects larger than a slice
        crops = [image[top:bottom, left:right] for left, top, right, bottom in windows]
        self.slices += len(crops)
        parts = []
        for start in range(0, len(crops), self.batch_size):
            dets = self.detector(crops[start:start + self.batch_size])
            for k, v in self.detector.timings.items():
                totals[k] += v
            parts += dets
        t0 = time.perf_counter()
        merged = self._merge(parts, windows)
        totals["postprocess"] += time.perf_counter() - t0
        return merged

    def _merge(self, parts: Sequence[Dict], windows: Sequence[Tuple[int, int, int, int]]) -> Dict:
        """The slices' detections moved to the image's pixels and merged per class (all together with the
        Detector's ``agnostic``); at most its ``max_det``, by decreasing score."""
        options = self.detector.postprocess_options
        offsets = [torch.tensor([x0, y0, x0, y0], dtype=torch.float32) for x0, y0, _, _ in windows]
        boxes = torch.cat([d["boxes"].float() + o for d, o in zip(parts, offsets)])
        scores = torch.cat([d["scores"].float() for d in parts])
        labels = torch.cat([d["labels"] for d in parts])
        groups = torch.zeros_like(labels) if options.agnostic else labels
        if self.merge == "greedy":
            boxes, scores, keep = greedy_merge(boxes, scores, groups)
        else:
            keep = nms(boxes, scores, groups, options.iou_thres, options.nms_kind, options.beta_nms).cpu()
            boxes, scores = boxes[keep], scores[keep]
        keep, boxes, scores = keep[:options.max_det], boxes[:options.max_det], scores[:options.max_det]
        labels = labels[keep]
        return {"boxes": boxes, "scores": scores, "labels": labels,
                "names": [self.detector.names[k] for k in labels.tolist()]}
