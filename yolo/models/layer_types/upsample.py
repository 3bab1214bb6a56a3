"""Darknet ``[upsample]``: nearest neighbour by an integer ``stride`` (default 2), times ``scale``; a negative
``stride`` downsamples (Darknet's ``reverse``, src/upsample_layer.c).

Float[N, C, H, W] -> Float[N, C, H * stride, W * stride], or with ``stride=-s``
Float[N, C, H, W] -> Float[N, C, H // s, W // s].
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

from yolo.models.cfg import Section
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import LayerInfo, Shape, register


class Upsample(nn.Module):
    """Darknet ``[upsample]``: nearest neighbour by an integer ``stride``, times ``scale``; with ``reverse`` (a
    negative ``stride`` in the cfg) its downsample: each output is ``scale`` times the sum of an ``s x s`` block."""

    def __init__(self, stride: int, scale: float = 1.0, reverse: bool = False):
        super().__init__()
        self.stride, self.scale, self.reverse = stride, scale, reverse

    def forward(self, x):
        if self.reverse:
            return self._downsample(x)
        x = F.interpolate(x, scale_factor=self.stride, mode="nearest")
        return x * self.scale if self.scale != 1.0 else x

    def _downsample(self, x: torch.Tensor) -> torch.Tensor:
        """Darknet's ``forward_upsample_layer`` with ``reverse``: ``upsample_cpu(output, out_w, out_h, ...,
        forward=0)`` adds ``scale * input`` into a zeroed output, reading the input as ``C x (out_h * s) x (out_w *
        s)`` values: the first ``C * out_h * s * out_w * s`` values of the image in memory order, so on a side
        that ``s`` does not divide the rows are read across their ends, as Darknet reads them. The sum runs in
        Darknet's order (block row by block row), so the float result is the same."""
        n, c, h, w = x.shape
        s = self.stride
        out_h, out_w = h // s, w // s
        if (h, w) != (out_h * s, out_w * s):
            x = x.reshape(n, c * h * w)[:, :c * out_h * s * out_w * s].reshape(n, c, out_h * s, out_w * s)
        out = torch.zeros((n, c, out_h, out_w), dtype=x.dtype, device=x.device)
        for dy in range(s):
            for dx in range(s):
                out = out + self.scale * x[:, :, dy::s, dx::s]
        return out


@register("upsample")
def build_upsample(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    stride = section.get_int("stride", 2)
    scale = section.get_float("scale", 1.0)
    if stride == 0:
        raise section.error("'stride' must not be 0 (above 0 upsamples, below 0 downsamples)", "stride")
    if stride < 0:  # Darknet's make_upsample_layer: reverse, out = in / -stride (integer division)
        s = -stride
        if h // s < 1 or w // s < 1:
            raise section.error(f"stride={stride} downsamples a {c}x{h}x{w} input by {s}: nothing is left (the "
                                f"input must be at least {s}x{s})", "stride")
        return LayerInfo(Upsample(s, scale, reverse=True), (c, h // s, w // s), prev)
    check_layer_size(section, 0, (c, h * stride, w * stride), "stride", f"stride={stride} on a {c}x{h}x{w} input")
    return LayerInfo(Upsample(stride, scale), (c, h * stride, w * stride), prev)
