"""Darknet ``[avgpool]``: the mean over each channel, Float[N, C, H, W] -> Float[N, C, 1, 1]."""
from __future__ import annotations

from typing import List

import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, register


class GlobalAvgPool(nn.Module):
    """Darknet ``[avgpool]``: mean over H and W -> Float[N, C, 1, 1]."""

    def forward(self, x):
        return x.mean(dim=(2, 3), keepdim=True)


@register("avgpool")
def build_avgpool(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    return LayerInfo(GlobalAvgPool(), (prev[0], 1, 1), prev)
