"""Darknet ``[maxpool]``: the largest value of each ``size`` x ``size`` window, moved by ``stride``.

Float[N, C, H, W] -> Float[N, C, out_h, out_w], out = (in + padding - size) // stride + 1, ``padding`` (default
size-1) in total, ``padding // 2`` before. :class:`PoolWindow` is the window that [local_avgpool] shares.
"""
from __future__ import annotations

from typing import List

import torch.nn as nn
import torch.nn.functional as F

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, pool_window, register


class PoolWindow(nn.Module):
    """Base of Darknet's pooling layers: a ``size`` x ``size`` window moved by ``stride`` over the input padded by
    ``padding`` in total, ``pad_before = padding // 2`` left/top and the rest right/bottom.
    Output size: (in + padding - size) // stride + 1."""

    def __init__(self, size: int, stride: int, padding: int):
        super().__init__()
        self.size, self.stride, self.padding = size, stride, padding
        self.pad_before = padding // 2
        self.pad_after = padding - self.pad_before


class MaxPool(PoolWindow):
    """Darknet ``[maxpool]``: total padding ``padding`` (default size-1), split left/top = padding//2.

    Cells outside the input are ignored (padded with -inf), never read as zeros: with
    ``size=2 stride=1`` (yolov3-tiny) this repeats the last row/column.
    """

    def forward(self, x):
        if self.pad_before == self.pad_after and self.pad_before <= self.size // 2:
            # Symmetric case: PyTorch's own padding already ignores out-of-range cells.
            return F.max_pool2d(x, self.size, self.stride, self.pad_before)
        if self.pad_before or self.pad_after:
            x = F.pad(x, (self.pad_before, self.pad_after, self.pad_before, self.pad_after), value=float("-inf"))
        return F.max_pool2d(x, self.size, self.stride)


@register("maxpool")
def build_maxpool(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    size, stride, padding, out_shape = pool_window(section, prev)
    return LayerInfo(MaxPool(size, stride, padding), out_shape, prev)
