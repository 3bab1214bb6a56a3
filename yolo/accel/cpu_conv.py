"""A fused conv on the CPU by oneDNN: weights reordered once into oneDNN's layout, activation in the kernel.

Tested against the plain PyTorch computation ``act(F.conv2d(x, conv.weight, conv.bias, ...))``
(``tests/test_detector.py``). Uses PyTorch's private ``torch.ops.mkldnn`` operators
(``_reorder_convolution_weight``, ``_convolution_pointwise``); :func:`onednn_conv_available` says whether
this PyTorch build has them.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn

__all__ = ["FusedConvCPU", "onednn_conv_available", "ONEDNN_ACTIVATIONS"]

# Activations that oneDNN can apply inside the conv kernel: Darknet name -> (oneDNN attr, scalars).
ONEDNN_ACTIVATIONS = {
    "linear": ("none", []),
    "leaky": ("leaky_relu", [0.1]),
    "relu": ("relu", []),
    "logistic": ("sigmoid", []),
    "swish": ("swish", []),
    "tanh": ("tanh", []),
}


PRIVATE_OPERATORS = ("_reorder_convolution_weight", "_convolution_pointwise")


def onednn_conv_available() -> bool:
    """Whether this PyTorch build has oneDNN and the private operators used here (the weight reorder and the fused
    convolution); a build without them keeps the plain PyTorch convs."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        return all(hasattr(torch.ops.mkldnn, name) for name in PRIVATE_OPERATORS)
    except RuntimeError:  # a build whose operator registry cannot be asked
        return False


class FusedConvCPU(nn.Module):
    """A fused (BN-folded) conv run by oneDNN with weights reordered once and the activation fused.

    Input/output ``Float[N, C, H, W]`` in channels-last memory (float32, CPU). Gives the same result
    as the plain PyTorch ``act(conv(x))`` to float rounding. ``example_shape`` is the input shape
    ``(1, C, H, W)`` the weights are reordered for (any size runs; that one fastest).
    """

    def __init__(self, conv: nn.Conv2d, activation: str, act_module: nn.Module, example_shape: Sequence[int]):
        super().__init__()
        self.padding = list(conv.padding)
        self.stride = list(conv.stride)
        self.dilation = list(conv.dilation)
        self.groups = conv.groups
        attr, scalars = ONEDNN_ACTIVATIONS.get(activation, ("none", []))
        self.attr, self.scalars = attr, scalars
        # Activations oneDNN cannot fuse (mish, ...) run after the kernel.
        self.post_act = act_module if activation not in ONEDNN_ACTIVATIONS else None
        weight = conv.weight.detach().float().contiguous()
        self.register_buffer("weight", torch.ops.mkldnn._reorder_convolution_weight(
            weight, self.padding, self.stride, self.dilation, self.groups, list(example_shape)), persistent=False)
        bias = conv.bias.detach().float() if conv.bias is not None else None
        self.register_buffer("bias", bias, persistent=False)

    def forward(self, x):
        y = torch.ops.mkldnn._convolution_pointwise(
            x.contiguous(memory_format=torch.channels_last), self.weight, self.bias, self.padding, self.stride,
            self.dilation, self.groups, self.attr, self.scalars, "")
        return self.post_act(y) if self.post_act is not None else y
