"""Darknet ``[local]``: a locally connected layer, a convolution with its own weights at each output cell.

Float[N, C, H, W] -> Float[N, filters, out_h, out_w], out = (H - 1) // stride + 1 with ``pad=1``, else
(H - size) // stride + 1. Darknet passes the ``pad`` flag itself (0 or 1) as the pixel padding, so it
is used here the same way. Weights Float[locations, filters, C*size*size] (each cell's matrix, cells in
row-major order); one bias per output value, Float[filters, out_h, out_w].
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

from yolo.models.activations import create_activation
from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, activation, positive, register


class Local(nn.Module):
    def __init__(self, in_shape: Shape, filters: int, size: int, stride: int, pad: int, out_hw, activation_name: str):
        super().__init__()
        c = in_shape[0]
        self.size, self.stride, self.pad = size, stride, pad
        self.out_h, self.out_w = out_hw
        locations = self.out_h * self.out_w
        self.weight = nn.Parameter(torch.randn(locations, filters, c * size * size) / (c * size * size) ** 0.5)
        self.bias = nn.Parameter(torch.zeros(filters, self.out_h, self.out_w))
        self.activation = activation_name
        self.act = create_activation(activation_name)

    def forward(self, x):
        cols = F.unfold(x, self.size, padding=self.pad, stride=self.stride)  # [N, C*k*k, locations]
        y = torch.einsum("lok,nkl->nol", self.weight, cols)
        y = y.reshape(x.shape[0], -1, self.out_h, self.out_w) + self.bias
        return self.act(y)

    def darknet_weights(self) -> List[torch.Tensor]:
        """File order: biases (one per output value), then every cell's weights."""
        return [self.bias, self.weight]

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        return 0.0  # Darknet prints no count for [local]


@register("local")
def build_local(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    filters = positive(section, "filters", section.get_int("filters", 1))
    size = positive(section, "size", section.get_int("size", 1))
    stride = positive(section, "stride", section.get_int("stride", 1))
    pad = section.get_int("pad", 0)
    if pad not in (0, 1):
        raise section.error(f"pad={pad} must be 0 or 1", "pad")
    act = activation(section, "logistic", refuse=("swish", "mish"))
    out_h = (h - (1 if pad else size)) // stride + 1
    out_w = (w - (1 if pad else size)) // stride + 1
    # Darknet sizes the layer with the formula above but gathers its input with `pad` pixels of padding;
    # where the two disagree (pad=1 with size != 3) it reads outside its buffer.
    cols_h = (h + 2 * pad - size) // stride + 1
    cols_w = (w + 2 * pad - size) // stride + 1
    if (cols_h, cols_w) != (out_h, out_w) or out_h <= 0 or out_w <= 0:
        raise section.error(f"size={size} pad={pad} stride={stride} on a {h}x{w} input: Darknet's output size "
                            f"{out_h}x{out_w} disagrees with its {cols_h}x{cols_w} input windows", "size")
    return LayerInfo(Local(prev, filters, size, stride, pad, (out_h, out_w), act), (filters, out_h, out_w), prev)
