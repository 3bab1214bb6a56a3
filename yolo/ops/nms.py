"""Non-maximum suppression as Darknet does it: the three ``nms_kind`` variants of a ``[yolo]`` section (a cfg's
choice among them is read with the heads, :func:`yolo.models.heads.nms_settings`).

Boxes are ``xyxy`` (see :mod:`yolo.ops.boxes`), in any units.
"""
from __future__ import annotations

import numpy as np
import torch

from yolo.ops.boxes import torchvision_ops
from yolo.ops.postprocess_defaults import BETA_NMS, NMS_KINDS

__all__ = ["NMS_KINDS", "nms"]


# Darknet's NMS variants (NMS_KINDS, named as in a [yolo] section's ``nms_kind``, src/parser.c parse_yolo):
# "default" is do_nms_sort (plain IoU); "greedynms" and "diounms" go through diounms_sort, which compares
# IoU - (d^2 / c^2) ** beta with the threshold (d: distance of the centres, c: diagonal of the enclosing box);
# greedynms always uses beta = 0.6 (box_diou), diounms the section's beta_nms (box_diounms).
_GREEDY_BETA = 0.6


def _pair_distance_iou(a: np.ndarray, b: np.ndarray, beta: float) -> np.ndarray:
    """``IoU - (d^2 / c^2) ** beta`` of box pairs, xyxy ``Float64[P, 4]`` each -> ``Float64[P]`` (Darknet's
    box_diounms: ``d`` the distance of the centres, ``c`` the diagonal of the enclosing box; a pair whose
    enclosing box has no diagonal gets the plain IoU)."""
    iw = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)
    inter = iw * ih
    union = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    d2 = ((a[:, 0] + a[:, 2]) / 2 - (b[:, 0] + b[:, 2]) / 2) ** 2 + ((a[:, 1] + a[:, 3]) / 2 - (b[:, 1] + b[:, 3]) / 2) ** 2
    c2 = (np.maximum(a[:, 2], b[:, 2]) - np.minimum(a[:, 0], b[:, 0])) ** 2 + \
        (np.maximum(a[:, 3], b[:, 3]) - np.minimum(a[:, 1], b[:, 1])) ** 2
    ratio = np.divide(d2, c2, out=np.zeros_like(d2), where=c2 > 0)
    return iou - ratio ** beta


def _iou_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of xyxy ``Float64[M, 4]`` and ``Float64[N, 4]`` -> ``Float64[M, N]``: ``torchvision.ops.box_iou``'s
    values bit for bit (0 where it gives 0/0), but about twice as fast on the small per-class groups DIoU-NMS calls
    it with (no torch dispatch or thread pool; tests/test_nms_kind.py compares the two)."""
    iw = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = iw * ih
    union = ((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]))[:, None] + ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))[None] \
        - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


# Rows of the pairwise test done at once (memory stays O(block * boxes of a class)).
_NMS_BLOCK = 1024


def nms(boxes: torch.Tensor, scores: torch.Tensor, groups: torch.Tensor, iou_thres: float,
        kind: str = "default", beta_nms: float = BETA_NMS) -> torch.Tensor:
    """Greedy NMS within each group (class), Darknet's ``nms_kind`` variants.

    Args:
        boxes: ``Float[K, 4]`` xyxy. scores: ``Float[K]``. groups: ``Int64[K]`` (boxes of different groups
            never suppress each other).
        iou_thres: a box is dropped when its overlap measure with a better box of its group is ``> iou_thres``.
        kind: ``"default"`` (IoU), ``"greedynms"`` (IoU - (d/c)^1.2), ``"diounms"`` (IoU - (d^2/c^2)^beta_nms).

    Returns:
        ``Int64[M]`` indices of the kept boxes, by decreasing score.
    """
    if kind not in NMS_KINDS:
        raise ValueError(f"unknown nms_kind {kind!r}; known: {', '.join(NMS_KINDS)}")
    if kind == "default":
        if boxes.numel() == 0:
            return torch.zeros((0,), dtype=torch.int64, device=boxes.device)
        # torchvision's batched_nms shifts each group by group * (largest coordinate + 1) and runs one NMS (up
        # to 1000 boxes on the CPU, 5000 on CUDA; above, one call per group). With groups over a batch (image x
        # class) the shifts reach millions of pixels, where float32 keeps a quarter pixel: float64 keeps the
        # float32 coordinates exact. Moved to >= 0 first, so that no box reaches into the previous group.
        exact = boxes.double()
        return torchvision_ops().batched_nms(exact - exact.min(), scores.double(), groups, iou_thres)
    beta = _GREEDY_BETA if kind == "greedynms" else float(beta_nms)
    all_boxes = boxes.detach().cpu().double()
    all_scores = scores.detach().cpu().double().numpy()
    all_groups = groups.detach().cpu().numpy()
    kept = []
    for group in np.unique(all_groups):
        idx = np.nonzero(all_groups == group)[0]
        idx = idx[np.argsort(-all_scores[idx], kind="stable")]
        exact = all_boxes[idx].numpy()
        alive = np.ones(len(idx), dtype=bool)
        for start in range(0, len(idx), _NMS_BLOCK):
            stop = min(start + _NMS_BLOCK, len(idx))
            # IoU - penalty <= IoU: only pairs whose IoU exceeds the threshold can suppress, so the
            # penalty is needed for those pairs only.
            rows, cols = np.nonzero(_iou_block(exact[start:stop], exact) > iou_thres)
            later = cols > rows + start
            rows, cols = rows[later], cols[later]
            hit = _pair_distance_iou(exact[rows + start], exact[cols], beta) > iou_thres
            suppress = np.zeros((stop - start, len(idx)), dtype=bool)
            suppress[rows[hit], cols[hit]] = True
            for r in np.nonzero(suppress.any(1))[0]:
                if alive[start + r]:
                    alive &= ~suppress[r]
        kept.append(idx[alive])
    keep = np.concatenate(kept) if kept else np.zeros((0,), dtype=np.int64)
    keep = keep[np.argsort(-all_scores[keep], kind="stable")]
    return torch.from_numpy(keep.astype(np.int64)).to(boxes.device)
