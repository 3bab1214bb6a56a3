"""Darknet ``[scale_channels]`` (squeeze-and-excitation) and ``[sam]`` (spatial attention): the output of
layer ``from`` multiplied elementwise by the previous layer's output, then the activation.

[scale_channels]: previous Float[N, C, 1, 1] (one factor per channel) times source Float[N, C, H, W];
with ``scale_wh=1`` previous Float[N, 1, H, W] (one factor per pixel) times source Float[N, C, H, W].
[sam]: previous and source both Float[N, C, H, W]. The output has the source's shape.
"""
from __future__ import annotations

from typing import List

import torch.nn as nn

from yolo.models.activations import create_activation
from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, activation, layer_index, register


class ScaleBy(nn.Module):
    """``act(previous * source)``, broadcasting the previous output over the source."""

    def __init__(self, source: int, activation_name: str):
        super().__init__()
        self.source = source
        self.activation = activation_name
        self.act = create_activation(activation_name)

    def forward(self, x, source_output):
        return self.act(x * source_output)


def _source(section: Section, shapes: List[Shape]) -> int:
    raw = section.get_ints("from")
    if len(raw) != 1:
        raise section.error(f"'from' must name exactly one layer, got {raw}", "from")
    return layer_index(section, "from", raw[0])


# Darknet runs its generic activate() here, which gives 0 for swish and mish.
_REFUSED = ("swish", "mish")


@register("scale_channels")
def build_scale_channels(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    source = _source(section, shapes)
    target = shapes[source]
    scale_wh = bool(section.get_int("scale_wh", 0))
    act = activation(section, "linear", refuse=_REFUSED)
    if scale_wh and not (prev[0] == 1 and prev[1:] == target[1:]):
        raise section.error(f"scale_wh=1 needs a 1 x {target[1]} x {target[2]} previous output, got "
                            f"{prev[0]} x {prev[1]} x {prev[2]}", "scale_wh")
    if not scale_wh and not (prev[1:] == (1, 1) and prev[0] == target[0]):
        raise section.error(f"needs a {target[0]} x 1 x 1 previous output (one factor per channel of layer {source}), "
                            f"got {prev[0]} x {prev[1]} x {prev[2]}", "from")
    return LayerInfo(ScaleBy(source, act), target, prev, (source,))


@register("sam")
def build_sam(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    source = _source(section, shapes)
    act = activation(section, "linear", refuse=_REFUSED)
    if shapes[source] != prev:
        s = shapes[source]
        raise section.error(f"layer {source} is {s[0]} x {s[1]} x {s[2]} but the previous output is "
                            f"{prev[0]} x {prev[1]} x {prev[2]}: [sam] needs equal shapes", "from")
    return LayerInfo(ScaleBy(source, act), prev, prev, (source,))
