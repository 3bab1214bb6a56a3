"""Darknet's truths through the augmentation (src/data.c ``correct_boxes``, ``fill_truth_detection``,
``blend_truth``): label boxes moved by a :class:`yolo.data.darknet_draw.DarknetDraw`'s crop and mirror, and the
conversions between label-file truths and pixel boxes. Float32 arithmetic as in C.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from yolo.data.darknet_draw import F32, DarknetDraw


def augment_truths(truths: np.ndarray, draw: DarknetDraw, orig_hw: Tuple[int, int], net_hw: Tuple[int, int]
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """Label boxes through the crop and mirror: ``correct_boxes`` then ``fill_truth_detection``'s checks.

    Args:
        truths: Float[N, 4] ``(x, y, w, h)`` centre boxes normalized to the original image (the label file).
    Returns:
        ``(boxes Float32[K, 4] (x, y, w, h) normalized to the network input, keep Bool[N])``.
    """
    oh, ow = orig_hw
    sheight, swidth = draw.crop_size(orig_hw)
    sx, sy = F32(swidth) / F32(ow), F32(sheight) / F32(oh)
    dx = (F32(draw.pleft) / F32(ow)) / sx
    dy = (F32(draw.ptop) / F32(oh)) / sy
    inv_sx, inv_sy = F32(1.0 / float(sx)), F32(1.0 / float(sy))
    # The two axes side by side (rows x then y), the same float32 operations on each.
    t = np.asarray(truths, dtype=F32).reshape(-1, 4).T  # x, y, w, h
    centre, half = t[:2], t[2:] / F32(2)
    low, high = centre - half, centre + half  # left, top / right, bottom in the original image
    invalid = ((t[0] == 0) & (t[1] == 0)) | (high < 0).any(0) | (low > 1).any(0)
    scale, shift = np.array([[inv_sx], [inv_sy]], F32), np.array([[dx], [dy]], F32)
    low, high = low * scale - shift, high * scale - shift
    if draw.flip:
        low[0], high[0] = F32(1) - high[0], F32(1) - low[0]
    low, high = np.clip(low, 0, 1), np.clip(high, 0, 1)
    middle, size = (low + high) / F32(2), np.clip(high - low, 0, 1)
    net_h, net_w = net_hw
    keep = (~invalid & (size >= np.array([[F32(1) / F32(net_w)], [F32(1) / F32(net_h)]], F32)).all(0)
            & (middle > 0).all(0) & (middle <= 1).all(0))
    return np.concatenate([middle, size]).T[keep].astype(F32), keep


def input_matrix(draw: DarknetDraw, orig_hw: Tuple[int, int], net_hw: Tuple[int, int]) -> np.ndarray:
    """3x3 matrix mapping original-image pixels to network-input pixels (the truths' mapping)."""
    sheight, swidth = draw.crop_size(orig_hw)
    net_h, net_w = net_hw
    sx, sy = net_w / swidth, net_h / sheight
    matrix = np.array([[sx, 0.0, -draw.pleft * sx], [0.0, sy, -draw.ptop * sy], [0.0, 0.0, 1.0]])
    if draw.flip:
        matrix = np.array([[-1.0, 0.0, float(net_w)], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]) @ matrix
    return matrix


def mixup_images(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Darknet's ``blend_images(new, 0.5, old, 0.5)``: ``new * 0.5 + old * 0.5`` in float32."""
    return (new.astype(F32) * F32(0.5) + old.astype(F32) * F32(0.5)).astype(F32)


def mixup_truths(new: np.ndarray, old: np.ndarray, max_boxes: int) -> np.ndarray:
    """Darknet's ``blend_truth``: the rows of ``new`` then those of ``old``, at most ``max_boxes`` in all
    (works on any per-truth rows, e.g. Float[K, 4] boxes or Int64[K] labels)."""
    return np.concatenate([new, old])[:max_boxes]


def truths_from_xyxy(boxes: np.ndarray, orig_hw: Tuple[int, int]) -> np.ndarray:
    """Float32[N, 4] xyxy boxes in original pixels -> Float32[N, 4] Darknet truths ``(x, y, w, h)``, centre boxes
    normalized to the image (what a label file holds)."""
    oh, ow = orig_hw
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    return np.stack([(boxes[:, 0] + boxes[:, 2]) / 2 / ow, (boxes[:, 1] + boxes[:, 3]) / 2 / oh,
                     (boxes[:, 2] - boxes[:, 0]) / ow, (boxes[:, 3] - boxes[:, 1]) / oh], 1)


def xyxy_from_truths(truths: np.ndarray, net_hw: Tuple[int, int]) -> np.ndarray:
    """Float32[K, >=4] truths ``(x, y, w, h, ...)`` normalized to the network input -> Float32[K, 4] xyxy input
    pixels."""
    net_h, net_w = net_hw
    t = np.asarray(truths, np.float32)
    xyxy = np.stack([(t[:, 0] - t[:, 2] / 2) * net_w, (t[:, 1] - t[:, 3] / 2) * net_h,
                     (t[:, 0] + t[:, 2] / 2) * net_w, (t[:, 1] + t[:, 3] / 2) * net_h], 1)
    return xyxy.astype(np.float32).reshape(-1, 4)
