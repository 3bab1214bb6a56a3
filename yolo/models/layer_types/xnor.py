"""Darknet's binary convolutions: ``[convolutional]`` with ``xnor=1`` or ``binary=1``.

``binary=1``: the weights are binarized per filter, w -> sign(w) * mean(|w|) over that filter (w > 0 -> +mean,
else -mean). ``xnor=1``: the same, and the input is binarized too, x -> +1 where x > 0, else -1 (padding
stays 0). Then bias or BatchNorm and the activation, as an ordinary [convolutional].

This is what Darknet's CUDA path computes (``fast_binarize_weights_gpu``, per filter). Darknet's CPU path
passes the whole layer's weight count as the filter size to ``binarize_weights`` and so uses one mean over
all filters (and writes past its buffer); where the filters' mean |w| are equal the two agree, which is how
the tests compare with it. Darknet's bit-packed inference path (``calculate_binary_weights``, used by its
detector CLI) is not reproduced. Backward is straight-through: the gradient of the binarized weights goes to
the real weights, and the input's gradient passes unchanged.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from yolo.models.layers import ConvBNAct


class BinaryConvBNAct(ConvBNAct):
    """A [convolutional] with binarized weights (and with ``xnor`` a binarized input); see the module docstring."""

    def __init__(self, *args, xnor: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.xnor = xnor

    def binarized_weight(self) -> torch.Tensor:
        w = self.conv.weight
        mean = w.abs().mean(dim=(1, 2, 3), keepdim=True)
        binary = torch.where(w > 0, mean, -mean)
        return w + (binary - w).detach()  # straight-through

    def forward(self, x):
        if self.xnor:
            x = x + (torch.where(x > 0, 1.0, -1.0).to(x.dtype) - x).detach()
        conv = self.conv
        x = F.conv2d(x, self.binarized_weight(), conv.bias, conv.stride, conv.padding, conv.dilation, conv.groups)
        if self.bn is not None:
            x = self.bn(x)
        return self.act(x)

    def fuse(self) -> None:
        """Kept unfused: BatchNorm cannot fold into weights that are binarized afterwards."""
