"""Darknet ``[local_avgpool]`` (also ``[local_avg]``): average pooling over ``size`` x ``size`` windows.

Padding as in [maxpool]: ``padding`` (default size-1) in total, ``padding // 2`` before; cells outside the
input are left out of the average (not counted as zeros). Output (in + padding - size) // stride + 1.
Float[N, C, H, W] -> Float[N, C, out_h, out_w].
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn.functional as F

from yolo.models.cfg import Section
from yolo.models.layer_types.maxpool import PoolWindow
from yolo.models.layer_types.registry import LayerInfo, Shape, pool_window, register


class LocalAvgPool(PoolWindow):
    def forward(self, x):
        pads = (self.pad_before, self.pad_after, self.pad_before, self.pad_after)
        total = F.avg_pool2d(F.pad(x, pads), self.size, self.stride, divisor_override=1)
        ones = torch.ones(1, 1, *x.shape[-2:], dtype=x.dtype, device=x.device)
        count = F.avg_pool2d(F.pad(ones, pads), self.size, self.stride, divisor_override=1)
        return total / count

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        return self.size * self.size * in_shape[0] * out_shape[1] * out_shape[2] / 1e9


@register("local_avgpool", "local_avg")
def build_local_avgpool(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    size, stride, padding, out_shape = pool_window(section, prev)
    return LayerInfo(LocalAvgPool(size, stride, padding), out_shape, prev)
