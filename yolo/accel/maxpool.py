"""Darknet's maxpool (:class:`yolo.models.layer_types.maxpool.MaxPool`) without padding copies where they change
nothing.

Tested against that plain PyTorch module itself, which it falls back to (``tests/test_detector.py``).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["FastMaxPool"]


class FastMaxPool(nn.Module):
    """Darknet maxpool (see :class:`yolo.models.layer_types.maxpool.MaxPool`) without padding copies where they
    change nothing.

    Input/output ``Float[N, C, H, W]``; equal to ``pool(x)``, the plain module it replaces.
    """

    def __init__(self, pool: nn.Module):
        super().__init__()
        self.size, self.stride, self.padding = pool.size, pool.stride, pool.padding
        self.pad_before = pool.padding // 2
        self.pad_after = pool.padding - self.pad_before
        self.reference = pool

    def forward(self, x):
        n, c, h, w = x.shape
        k, s, p = self.size, self.stride, self.padding
        if k == 2 and s == 2 and self.pad_before == 0 and h % 2 == 0 and w % 2 == 0 \
                and x.is_contiguous(memory_format=torch.channels_last):
            # 2x2/2 on channels-last: two elementwise maxima over views, faster than max_pool2d here.
            v = x.permute(0, 2, 3, 1).reshape(n, h // 2, 2, w // 2, 2 * c)
            rows = torch.maximum(v[:, :, 0], v[:, :, 1]).view(n, h // 2, w // 2, 2, c)
            return torch.maximum(rows[..., 0, :], rows[..., 1, :]).permute(0, 3, 1, 2)
        if self.pad_before == 0 and (h + p - k) // s == (h - k) // s and (w + p - k) // s == (w - k) // s:
            # The padded cells lie in no window: plain pooling gives the same windows.
            return F.max_pool2d(x, k, s)
        if self.pad_before <= k - 1 and self.pad_after <= k - 1:
            # Every window keeps at least one real cell next to the padding: repeating the edge
            # equals ignoring out-of-range cells.
            x = F.pad(x, (self.pad_before, self.pad_after, self.pad_before, self.pad_after), mode="replicate")
            return F.max_pool2d(x, k, s)
        return self.reference(x)
