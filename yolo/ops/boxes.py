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

__all__ = ["box_convert", "box_iou", "cxcywh_to_xyxy", "xyxy_to_cxcywh", "xyxy_to_xywh", "clip_boxes"]


def torchvision_ops():
    """``torchvision.ops``, imported on first use: importing torchvision takes about 2.5 s (it loads
    ``torch._dynamo``), which a tool that only prints its help or refuses its input should not spend."""
    import torchvision.ops  # deferred import: torchvision loads torch._dynamo (about 2.5 s)

    return torchvision.ops


def __getattr__(name: str):
    """``box_convert`` and ``box_iou`` are torchvision's (the xyxy IoU matrix), imported when first asked for."""
    if name in ("box_convert", "box_iou"):
        return getattr(torchvision_ops(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cxcywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    """``Float[..., 4]`` centre + size -> ``Float[..., 4]`` corners, same units."""
    return torchvision_ops().box_convert(boxes, "cxcywh", "xyxy")


def xyxy_to_cxcywh(boxes: torch.Tensor) -> torch.Tensor:
    """``Float[..., 4]`` corners -> ``Float[..., 4]`` centre + size, same units."""
    return torchvision_ops().box_convert(boxes, "xyxy", "cxcywh")


def xyxy_to_xywh(boxes: torch.Tensor) -> torch.Tensor:
    """``Float[..., 4]`` corners -> ``Float[..., 4]`` top-left corner + size (COCO ``bbox``), same units."""
    return torchvision_ops().box_convert(boxes, "xyxy", "xywh")


def clip_boxes(boxes: torch.Tensor, shape_hw: Tuple[int, int]) -> torch.Tensor:
    """Clip ``Float[..., 4]`` xyxy pixel boxes to an image of ``shape_hw = (h, w)``.

    Returns a new tensor: x in ``[0, w]``, y in ``[0, h]``.
    """
    h, w = shape_hw
    out = boxes.clone()
    out[..., 0::2] = out[..., 0::2].clamp(0, w)
    out[..., 1::2] = out[..., 1::2].clamp(0, h)
    return out
