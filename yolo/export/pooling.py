"""Darknet's ``[maxpool]`` as one ONNX ``MaxPool`` with asymmetric pads, for the traced exports.

Darknet pads a pooling window by ``padding`` cells in total, ``padding // 2`` before and the rest after, and ignores
the padded cells. PyTorch's ``max_pool2d`` pads symmetrically only, so the model writes an explicit ``-inf`` Pad
before the pooling (:class:`yolo.models.layer_types.maxpool.MaxPool`). ONNX's ``MaxPool`` takes the begin and end
pads separately and ignores the padded cells as Darknet does, so the export writes that one node instead: runtimes
run it with their pooling kernel (OpenVINO's ``Pad`` with ``-inf`` is a slow reference kernel), and an INT8 graph
keeps its 8-bit values through it (a ``-inf`` fill has no 8-bit value, so a Pad stops OpenVINO's INT8 propagation
and leaves the next convolution in float32).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from yolo.models.layer_types.maxpool import MaxPool


class _PaddedMaxPool(torch.autograd.Function):
    """``max_pool2d`` over ``x`` padded with ``-inf`` by ``before`` and ``after`` cells (top/left, bottom/right);
    exported as one ONNX ``MaxPool`` with ``pads = [before, before, after, after]``."""

    @staticmethod
    def forward(ctx, x, size: int, stride: int, before: int, after: int):
        x = F.pad(x, (before, after, before, after), value=float("-inf"))
        return F.max_pool2d(x, size, stride)

    @staticmethod
    def symbolic(g, x, size: int, stride: int, before: int, after: int):
        return g.op("MaxPool", x, kernel_shape_i=[size, size], strides_i=[stride, stride],
                    pads_i=[before, before, after, after])


class ExportMaxPool(nn.Module):
    """A :class:`MaxPool` whose asymmetric padding is traced as :class:`_PaddedMaxPool` (same output)."""

    def __init__(self, pool: MaxPool):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        p = self.pool
        if p.pad_before == p.pad_after and p.pad_before <= p.size // 2:
            return p(x)  # symmetric: already one MaxPool
        return _PaddedMaxPool.apply(x, p.size, p.stride, p.pad_before, p.pad_after)


def one_node_maxpools(net) -> None:
    """Wrap every :class:`MaxPool` of ``net`` (a :class:`yolo.models.model.Darknet`) in :class:`ExportMaxPool`."""
    for i, module in enumerate(net.module_list):
        if type(module) is MaxPool:
            net.module_list[i] = ExportMaxPool(module)
