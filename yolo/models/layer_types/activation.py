"""Darknet ``[activation]``: the activation alone, applied to the previous layer's output (same shape)."""
from __future__ import annotations

from typing import List

import torch.nn as nn

from yolo.models.activations import create_activation
from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, activation, register


class Activation(nn.Module):
    """Float[N, C, H, W] -> the same, through Darknet's activation ``name``."""

    def __init__(self, name: str):
        super().__init__()
        self.activation = name
        self.act = create_activation(name)

    def forward(self, x):
        return self.act(x)


@register("activation")
def build_activation(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    # Darknet's [activation] runs the generic activate(), which yields 0 for swish and mish.
    name = activation(section, "linear", refuse=("swish", "mish"))
    return LayerInfo(Activation(name), prev, prev)
