"""Darknet ``[softmax]``: a softmax over each of ``groups`` contiguous groups of an image's values (the
shape unchanged); ``temperature`` divides the inputs first.
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, positive, register


class Softmax(nn.Module):
    """Darknet ``[softmax]``: each image's C*H*W values (C, H, W order) cut into ``groups`` contiguous groups,
    one softmax over each whole group, spatial cells included (src/softmax_layer.c ``softmax_cpu``)."""

    def __init__(self, groups: int = 1, temperature: float = 1.0):
        super().__init__()
        self.groups, self.temperature = groups, temperature

    def forward(self, x):
        y = x.reshape(x.shape[0], self.groups, -1) / self.temperature
        return torch.softmax(y, dim=2).reshape(x.shape)


@register("softmax")
def build_softmax(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    groups = positive(section, "groups", section.get_int("groups", 1))
    if prev[0] % groups:
        raise section.error(f"groups={groups} does not divide {prev[0]} channels", "groups")
    return LayerInfo(Softmax(groups, section.get_float("temperature", 1.0)), prev, prev)
