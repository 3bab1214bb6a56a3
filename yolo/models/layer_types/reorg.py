"""Darknet ``[reorg]`` (YOLOv2's passthrough): Float[N, C, H, W] -> Float[N, C*s*s, H/s, W/s] for ``stride = s``.

Darknet's reorg reads its input as if it had C/s^2 channels of size (H*s, W*s) (a known quirk that trained
weights depend on): :class:`Reorg` reproduces that permutation when s^2 divides C.

On a channel count that s^2 does not divide (src/reorg_old_layer.c), Darknet reads its input as
in_c = C // s^2 channels of (H*s) x (W*s) and writes, for every (k, j, i) of C x H x W,
out[k, j, i] = in_flat[w2 + W*s*(h2 + H*s*c2)] with c2 = k % in_c, d = k // in_c, w2 = i*s + d % s,
h2 = j*s + d // s; the result is read as C*s*s x H/s x W/s. That is a fixed gather (:class:`ReorgAnyChannels`),
computed here per image (Darknet's batched index strides by in_c*s^2*H*W, not C*H*W, and so reads the next
image's values for images after the first).
"""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, positive, register


class Reorg(nn.Module):
    """Darknet ``[reorg]`` (YOLOv2 passthrough): C x H x W -> C*s*s x H/s x W/s.

    Darknet's reorg reads its input as if it had C/s^2 channels of size (H*s, W*s) (a known quirk
    that trained weights depend on); this reproduces that exact permutation.
    """

    def __init__(self, stride: int):
        super().__init__()
        self.stride = stride

    def forward(self, x):
        n, c, h, w = x.shape
        s = self.stride
        x = x.reshape(n, c // (s * s), h, s, w, s)
        x = x.permute(0, 3, 5, 1, 2, 4).reshape(n, c, h, w)
        return x.reshape(n, c * s * s, h // s, w // s)


def reorg_gather_index(c: int, h: int, w: int, s: int) -> Optional[torch.Tensor]:
    """Long[C*H*W] source index of each output value, or None where Darknet divides by zero or reads outside."""
    in_c = c // (s * s)
    if in_c == 0:
        return None
    k = torch.arange(c).reshape(c, 1, 1)
    j = torch.arange(h).reshape(1, h, 1)
    i = torch.arange(w).reshape(1, 1, w)
    c2, d = k % in_c, k // in_c
    w2, h2 = i * s + d % s, j * s + d // s
    index = (w2 + w * s * (h2 + h * s * c2)).reshape(-1)
    return index if int(index.max()) < c * h * w else None


class ReorgAnyChannels(Reorg):
    """Float[N, C, H, W] -> Float[N, C*s*s, H/s, W/s] by :func:`reorg_gather_index`."""

    def __init__(self, stride: int, index: torch.Tensor):
        super().__init__(stride)
        self.register_buffer("index", index, persistent=False)

    def forward(self, x):
        n, c, h, w = x.shape
        s = self.stride
        out = x.reshape(n, -1)[:, self.index]
        return out.reshape(n, c * s * s, h // s, w // s)


@register("reorg")
def build_reorg(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    stride = positive(section, "stride", section.get_int("stride", 1))
    if h % stride or w % stride:
        raise section.error(f"reorg stride {stride} does not divide the {h}x{w} input", "stride")
    out = (c * stride * stride, h // stride, w // stride)
    if c % (stride * stride):
        index = reorg_gather_index(c, h, w, stride)
        if index is None:
            raise section.error(f"reorg stride {stride} on {c} channels: Darknet divides by zero or reads outside "
                                "its input", "stride")
        return LayerInfo(ReorgAnyChannels(stride, index), out, prev)
    return LayerInfo(Reorg(stride), out, prev)
