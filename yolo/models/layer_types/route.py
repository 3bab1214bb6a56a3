"""Darknet ``[route]``: the outputs of the ``layers`` it lists, concatenated along channels.

Each Float[N, Ci, H, W] (equal H, W) -> Float[N, sum Ci / groups, H, W]; with ``groups`` each input is cut into
``groups`` channel slices and slice ``group_id`` is kept (yolov4-tiny).
"""
from __future__ import annotations

from typing import List, Sequence

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, layer_indices, positive, register


class Route(nn.Module):
    """Darknet ``[route]``: concatenate earlier outputs along channels.

    With ``groups > 1`` each input is cut into ``groups`` channel slices and slice ``group_id`` is kept.
    """

    def __init__(self, layers: Sequence[int], groups: int = 1, group_id: int = 0):
        super().__init__()
        self.layers = list(layers)
        self.groups, self.group_id = groups, group_id

    def forward(self, inputs: List[torch.Tensor]):
        if self.groups > 1:
            inputs = [t.chunk(self.groups, dim=1)[self.group_id] for t in inputs]
        return inputs[0] if len(inputs) == 1 else torch.cat(inputs, 1)


@register("route")
def build_route(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    layers = layer_indices(section, "layers")
    groups = positive(section, "groups", section.get_int("groups", 1))
    group_id = section.get_int("group_id", 0)
    if not 0 <= group_id < groups:
        raise section.error(f"group_id={group_id} must be in 0..{groups - 1}", "group_id")
    in_shapes = [shapes[i] for i in layers]
    hw = in_shapes[0][1:]
    for i, s in zip(layers, in_shapes):
        if s[1:] != hw:
            raise section.error(f"layers {layers} have different sizes: layer {i} is {s[1]}x{s[2]}, "
                                f"layer {layers[0]} is {hw[0]}x{hw[1]}", "layers")
        if s[0] % groups:
            raise section.error(f"groups={groups} does not divide the {s[0]} channels of layer {i}", "groups")
    channels = sum(s[0] for s in in_shapes) // groups
    return LayerInfo(Route(layers, groups, group_id), (channels, *hw), prev, tuple(layers))
