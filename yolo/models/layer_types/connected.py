"""Darknet ``[connected]``: a fully connected layer on the flattened previous output.

Input Float[N, C, H, W] is flattened in C, H, W order (Darknet's memory order) to Float[N, C*H*W];
output Float[N, outputs, 1, 1]. With ``batch_normalize=1`` the product is batch-normalized (eps 1e-5)
and the biases act as BatchNorm's beta, exactly as in [convolutional].
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn

from yolo.models.activations import create_activation
from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, activation, positive, register


class Connected(nn.Module):
    """``outputs`` units over ``inputs`` values; weights Float[outputs, inputs] as Darknet stores them."""

    def __init__(self, inputs: int, outputs: int, batch_normalize: bool, activation_name: str):
        super().__init__()
        self.linear = nn.Linear(inputs, outputs, bias=not batch_normalize)
        # Darknet's CUDA path moves the rolling statistics by 0.01 per batch, as for convolutions.
        self.bn = nn.BatchNorm1d(outputs, eps=1e-5, momentum=0.01) if batch_normalize else None
        self.activation = activation_name
        self.act = create_activation(activation_name)

    def forward(self, x):
        if x[0].numel() != self.linear.in_features:
            raise ValueError(f"[connected] was built for {self.linear.in_features} inputs (the cfg's width and height), "
                             f"got {tuple(x.shape[1:])} = {x[0].numel()}: run the network at the cfg's size")
        y = self.linear(x.flatten(1))
        if self.bn is not None:
            y = self.bn(y)
        return self.act(y)[:, :, None, None]

    def darknet_weights(self) -> List[torch.Tensor]:
        """File order: biases, weights [outputs x inputs], then with BN scales, rolling mean, rolling variance."""
        if self.bn is None:
            return [self.linear.bias, self.linear.weight]
        return [self.bn.bias, self.linear.weight, self.bn.weight, self.bn.running_mean, self.bn.running_var]

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        """0: Darknet does not count [connected] layers in its BFLOPs."""
        return 0.0


@register("connected")
def build_connected(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    outputs = positive(section, "output", section.get_int("output", 1))
    bn = bool(section.get_int("batch_normalize", 0))
    act = activation(section, "logistic", refuse=("swish", "mish"))  # generic activate(): 0 for these
    inputs = prev[0] * prev[1] * prev[2]
    return LayerInfo(Connected(inputs, outputs, bn, act), (outputs, 1, 1), prev)
