"""Darknet ``[upsample]``: nearest neighbour by an integer ``stride`` (default 2), times ``scale``.

Float[N, C, H, W] -> Float[N, C, H * stride, W * stride].
"""
from __future__ import annotations

from typing import List

import torch.nn as nn
import torch.nn.functional as F

from yolo.models.cfg import Section
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import LayerInfo, Shape, positive, register


class Upsample(nn.Module):
    """Darknet ``[upsample]``: nearest neighbour by an integer ``stride``, times ``scale``."""

    def __init__(self, stride: int, scale: float = 1.0):
        super().__init__()
        self.stride, self.scale = stride, scale

    def forward(self, x):
        x = F.interpolate(x, scale_factor=self.stride, mode="nearest")
        return x * self.scale if self.scale != 1.0 else x


@register("upsample")
def build_upsample(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    stride = positive(section, "stride", section.get_int("stride", 2))
    scale = section.get_float("scale", 1.0)
    check_layer_size(section, 0, (c, h * stride, w * stride), "stride", f"stride={stride} on a {c}x{h}x{w} input")
    return LayerInfo(Upsample(stride, scale), (c, h * stride, w * stride), prev)
