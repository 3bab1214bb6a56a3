"""Darknet ``[batchnorm]``: BatchNorm on its own, (x - mean) / sqrt(var + 1e-5) * scale + bias per channel.

Float[N, C, H, W] -> the same. Rolling statistics move by 0.01 per batch, as Darknet's CUDA path does.
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, register


class BatchNorm(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels, eps=1e-5, momentum=0.01)

    def forward(self, x):
        return self.bn(x)

    def darknet_weights(self) -> List[torch.Tensor]:
        """File order: biases, scales, rolling mean, rolling variance."""
        return [self.bn.bias, self.bn.weight, self.bn.running_mean, self.bn.running_var]


@register("batchnorm")
def build_batchnorm(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    return LayerInfo(BatchNorm(prev[0]), prev, prev)
