"""The box-format vocabulary, with torchvision's names (``torchvision.ops.box_convert``).

- ``xyxy``: ``(x1, y1, x2, y2)``, the two corners.
- ``xywh``: ``(x, y, w, h)``, the top-left corner and the size (COCO's ``bbox``).
- ``cxcywh``: ``(cx, cy, w, h)``, the centre and the size (YOLO labels and head outputs).

Coordinates are continuous pixels where pixel ``i`` spans ``[i, i + 1)``; every function keeps the units
it is given (pixels or 0..1 fractions). Shapes are ``(height, width)``.
"""
from __future__ import annotations

from typing import Tuple

import torch
from torchvision.ops import box_convert, box_iou

__all__ = ["box_convert", "box_iou", "cxcywh_to_xyxy", "xyxy_to_cxcywh", "xyxy_to_xywh", "clip_boxes"]


def cxcywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    """``Float[..., 4]`` centre + size -> ``Float[..., 4]`` corners, same units."""
    return box_convert(boxes, "cxcywh", "xyxy")


def xyxy_to_cxcywh(boxes: torch.Tensor) -> torch.Tensor:
    """``Float[..., 4]`` corners -> ``Float[..., 4]`` centre + size, same units."""
    return box_convert(boxes, "xyxy", "cxcywh")


def xyxy_to_xywh(boxes: torch.Tensor) -> torch.Tensor:
    """``Float[..., 4]`` corners -> ``Float[..., 4]`` top-left corner + size (COCO ``bbox``), same units."""
    return box_convert(boxes, "xyxy", "xywh")


def clip_boxes(boxes: torch.Tensor, shape_hw: Tuple[int, int]) -> torch.Tensor:
    """Clip ``Float[..., 4]`` xyxy pixel boxes to an image of ``shape_hw = (h, w)``.

    Returns a new tensor: x in ``[0, w]``, y in ``[0, h]``.
    """
    h, w = shape_hw
    out = boxes.clone()
    out[..., 0::2] = out[..., 0::2].clamp(0, w)
    out[..., 1::2] = out[..., 1::2].clamp(0, h)
    return out
