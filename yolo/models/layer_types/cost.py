"""Darknet ``[cost]``: the classifier's training loss (sse/masked/smooth) against the labels.

In inference it computes nothing (Darknet's network output is the layer before it), so here it passes
its input on unchanged: Float[N, C, H, W] -> the same. The loss itself, equal to Darknet's delta, is
:func:`yolo.cost_loss.cost_loss`: :attr:`Cost.loss` and :attr:`Cost.scale` carry the cfg's ``type`` and ``scale``.
"""
from __future__ import annotations

from typing import List

import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, register

COST_TYPES = ("sse", "masked", "smooth")


class Cost(nn.Module):
    def __init__(self, loss: str, scale: float, where: str = "<cfg>"):
        super().__init__()
        self.loss, self.scale = loss, scale
        self.where = where  # "path:line" of the section, for messages about its truth

    def forward(self, x):
        return x


@register("cost")
def build_cost(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    loss = section.get_str("type", "sse")
    if loss not in COST_TYPES:
        raise section.error(f"unknown cost type '{loss}' (known: {', '.join(COST_TYPES)})", "type")
    section.get_float("ratio", 0.0)  # read: Darknet's top-k suppression, whose threshold it forces to 0
    return LayerInfo(Cost(loss, section.get_float("scale", 1.0), f"{section.source}:{section.line}"), prev, prev)
