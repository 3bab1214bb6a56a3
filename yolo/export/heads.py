"""Everything export does differently for one kind of head ([yolo], [region], [Gaussian_yolo], ...).

The exporters and verifiers call only these functions for head-specific behaviour, so support for another
head type lands here: what its eval rows hold (the file's metadata), whether NMS can be baked in after it,
how it runs inside a float16 network, and how its rows line up with OpenCV DNN's output.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from yolo.models.opencv_importer import opencv_lacks
from yolo.models import heads
from yolo.models.layer_types.region import RegionLayer

EVAL_COLUMNS = "cx, cy, w, h (input pixels), objectness, class probabilities"
GAUSSIAN_COLUMNS = ", sigma_tx, sigma_ty, sigma_tw, sigma_th"


def has_gaussian_heads(model) -> bool:
    """Whether ``model`` has [Gaussian_yolo] heads: then every eval row ends with four box uncertainties (zero
    for the rows of its other heads, :func:`yolo.models.heads.uniform_eval_rows`)."""
    return heads.has_gaussian_heads(getattr(model, "yolo_layers", []))


def output_columns(model) -> str:
    """What each row of the eval output ``Float[N, boxes, 5 + C (+ 4)]`` holds, for the file's metadata."""
    return EVAL_COLUMNS + (GAUSSIAN_COLUMNS if has_gaussian_heads(model) else "")


def opencv_reads(model) -> bool:
    """Whether OpenCV's Darknet importer knows ``model``'s heads (it has no ``[detection]`` or ``[Gaussian_yolo]``
    layer: :func:`yolo.models.opencv_importer.opencv_lacks`)."""
    return opencv_lacks(model) is None


def check_runtime(model) -> str:
    """What checks a ``.weights`` export of ``model``: OpenCV DNN, or our own loader alone where OpenCV lacks
    the head."""
    missing = opencv_lacks(model)
    return "OpenCV DNN" if missing is None else f"our loader (bit-exact read-back; OpenCV has no {missing})"


def check_nms_supported(model) -> None:
    """Raise ``ValueError`` when the NMS graph of :mod:`yolo.export.nms` cannot follow ``model``'s heads."""
    if not model.yolo_layers:
        raise ValueError("NMS needs a detection model; this cfg has no [yolo]/[region]/[detection] head")
    if has_gaussian_heads(model):
        raise ValueError("NMS in the graph is not available for [Gaussian_yolo] heads (their scores use the "
                         "box uncertainties): export without it and post-process with yolo.Detector")


class ExportedFloat32Head(nn.Module):
    """Runs a head in float32 inside a float16 network to be exported: the decode (grids, exp, pixel boxes) keeps
    full precision, and ONNX ``Range`` (the grid) has no float16 kernel. (The Detector's float16 model has its own,
    :class:`yolo.inference.prepare.Float32Head`, which also leaves channels-last in the cast.)"""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head.float()

    def forward(self, x, input_hw):
        return self.head(x.float(), input_hw)


def keep_heads_float32(net) -> None:
    """Wrap every head of a float16 ``net`` (a :class:`yolo.models.model.Darknet`) in :class:`ExportedFloat32Head`."""
    for i, module in enumerate(net.module_list):
        if net._is_head[i]:
            net.module_list[i] = ExportedFloat32Head(module)


def opencv_columns(model) -> Optional[int]:
    """How many leading columns of OpenCV DNN's rows can be compared with ours (``None``: all).

    For ``[region]`` heads only boxes and objectness: OpenCV applies its own NMS to their class scores.
    """
    return 5 if any(isinstance(h, RegionLayer) for h in model.yolo_layers) else None


def opencv_layout(model, out: torch.Tensor, input_hw: Tuple[int, int]) -> np.ndarray:
    """Our eval output Float[N, rows, 5+C] in OpenCV's layout: rows ordered (y, x, anchor) within each
    head instead of (anchor, y, x), boxes relative to the input, class scores times objectness."""
    out = out.detach().float().cpu().numpy()
    n = out.shape[0]
    in_h, in_w = input_hw
    parts, start = [], 0
    for head in model.yolo_layers:
        h, w = round(in_h / head.stride[0]), round(in_w / head.stride[1])
        count = head.num_anchors * h * w
        part = out[:, start:start + count].reshape(n, head.num_anchors, h, w, -1).transpose(0, 2, 3, 1, 4)
        parts.append(part.reshape(n, count, -1))
        start += count
    rows = np.concatenate(parts, 1)
    rows[..., 0:4] /= np.array([in_w, in_h, in_w, in_h], dtype=rows.dtype)
    rows[..., 5:] *= rows[..., 4:5]
    return rows
