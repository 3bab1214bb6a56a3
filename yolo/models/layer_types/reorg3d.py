"""Darknet ``[reorg3d]`` (src/reorg_layer.c): space-to-depth without the quirk of the old ``[reorg]``.

Float[N, C, H, W] -> Float[N, C*s*s, H/s, W/s], output channel (dy*s + dx)*C + c taking input
(c, y*s + dy, x*s + dx). ``reverse=1`` gives C/(s*s) x H*s x W*s by Darknet's ``reorg_cpu(..., forward=1)``
with the output's sizes: the inverse of the old [reorg]'s gather (see :mod:`yolo.models.layer_types.reorg`)
for a C/s^4-channel tensor of (H*s*s) x (W*s*s), not the inverse of the forward [reorg3d].
"""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, positive, register
from yolo.models.layer_types.reorg import reorg_gather_index


class Reorg3d(nn.Module):
    def __init__(self, stride: int, reverse: bool, scatter_index: Optional[torch.Tensor] = None):
        super().__init__()
        self.stride, self.reverse = stride, reverse
        if scatter_index is not None:
            self.register_buffer("scatter_index", scatter_index, persistent=False)

    def forward(self, x):
        n, c, h, w = x.shape
        s = self.stride
        if self.reverse:
            out = torch.empty_like(x).reshape(n, -1)
            out[:, self.scatter_index] = x.reshape(n, -1)
            return out.reshape(n, c // (s * s), h * s, w * s)
        y = x.reshape(n, c, h // s, s, w // s, s).permute(0, 3, 5, 1, 2, 4)
        return y.reshape(n, c * s * s, h // s, w // s)


@register("reorg3d")
def build_reorg3d(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    s = positive(section, "stride", section.get_int("stride", 1))
    reverse = bool(section.get_int("reverse", 0))
    index = None
    if reverse:
        out = (c // (s * s), h * s, w * s)
        index = reorg_gather_index(*out, s) if c % (s * s) == 0 else None
        if index is None or not torch.equal(torch.sort(index).values, torch.arange(index.numel())):
            raise section.error(f"reverse reorg with stride {s} on {c} channels: Darknet writes outside its output "
                                f"(needs channels divisible by stride^4 = {s ** 4})", "stride")
    else:
        if h % s or w % s:
            raise section.error(f"stride {s} does not divide the {h}x{w} input", "stride")
        out = (c * s * s, h // s, w // s)
    return LayerInfo(Reorg3d(s, reverse, index), out, prev)
