"""Darknet ``[contrastive]``: a training-only loss on embeddings (paired with a [yolo] layer through
``yolo_layer``). In inference Darknet computes nothing in it and its output is unused, so here it passes
its input on unchanged (Float[N, C, H, W] -> the same). Its loss is not implemented by this framework's
training: :attr:`Contrastive.training_loss` says so for training code to refuse.
"""
from __future__ import annotations

from typing import List

import torch.nn as nn

from yolo.counts import MAX_CLASSES
from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, layer_index, register


class Contrastive(nn.Module):
    training_loss = "not implemented: Darknet's [contrastive] loss"

    def __init__(self, yolo_layer: int, classes: int, temperature: float):
        super().__init__()
        self.yolo_layer, self.classes, self.temperature = yolo_layer, classes, temperature

    def forward(self, x):
        return x


@register("contrastive")
def build_contrastive(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    raw = section.get_int("yolo_layer", 0)
    if raw == 0:  # Darknet dereferences a missing [yolo] layer here and crashes
        raise section.error("'yolo_layer' must point to a [yolo] layer", "yolo_layer")
    yolo_layer = layer_index(section, "yolo_layer", raw)
    for key in ("cls_normalizer", "max_delta"):
        section.get_float(key, 1.0)  # read: training-only options
    section.get_int("contrastive_neg_max", 3)
    module = Contrastive(yolo_layer, section.get_count("classes", 1000, MAX_CLASSES), section.get_float("temperature", 1.0))
    return LayerInfo(module, prev, prev)
