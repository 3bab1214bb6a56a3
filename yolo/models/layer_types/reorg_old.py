"""Darknet ``[reorg]`` on a channel count that stride^2 does not divide (src/reorg_old_layer.c).

Darknet reads its input as in_c = C // s^2 channels of (H*s) x (W*s) and writes, for every (k, j, i) of
C x H x W, out[k, j, i] = in_flat[w2 + W*s*(h2 + H*s*c2)] with c2 = k % in_c, d = k // in_c,
w2 = i*s + d % s, h2 = j*s + d // s; the result is read as C*s*s x H/s x W/s. When s^2 divides C this is
:class:`yolo.models.layers.Reorg`; otherwise it is a fixed gather, computed here per image (Darknet's batched
index strides by in_c*s^2*H*W, not C*H*W, and so reads the next image's values for images after the first).
"""
from __future__ import annotations

from typing import Optional

import torch

from yolo.models.layers import Reorg


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
