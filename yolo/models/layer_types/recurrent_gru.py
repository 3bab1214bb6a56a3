"""Darknet ``[gru]`` (src/gru_layer.c ``forward_gru_layer``): Float[N, C, H, W] -> Float[N, output, 1, 1].

Six fully connected inner layers without activation (optional BN), the input read as N vectors of C*H*W::

    z = sigmoid(input_z(x_t) + state_z(s))
    r = sigmoid(input_r(x_t) + state_r(s))
    h = sigmoid(input_h(x_t) + state_h(r * s))     # sigmoid, not tanh: USET is not defined in gru_layer.c
    s = y_t = z * s + (1 - z) * h                  # src/blas.c weighted_sum_cpu(s, h, z)

The state ``s`` carries over between steps and between calls in training and eval alike (Darknet never zeroes
it). Weights order: input_z, input_r, input_h, state_z, state_r, state_h.
Darknet leaves the layer's out_c/out_h/out_w at 0, so Darknet refuses an image layer ([convolutional], [maxpool],
...) right after a [gru]; here the output is Float[N, output, 1, 1] and such a layer builds.
Darknet's CPU path cannot train this layer (``backward_gru_layer`` is empty and ``update_gru_layer`` reads inner
layers a GRU does not have); gradients here are autograd's through the forward above, as Darknet's CUDA path.
"""
from __future__ import annotations

from typing import List

import torch

from yolo.models.cfg import Section
from yolo.models.layer_types.recurrent_base import StepConnected, ConnectedRecurrent, build_connected_recurrent
from yolo.models.layer_types.registry import LayerInfo, Shape, register


class GRU(ConnectedRecurrent):
    gates = 3
    weight_order = ("input_z", "input_r", "input_h", "state_z", "state_r", "state_h")

    def __init__(self, inputs: int, outputs: int, batch_normalize: bool):
        super().__init__()
        self.outputs = outputs
        self.input_z, self.input_r, self.input_h = (StepConnected(inputs, outputs, batch_normalize) for _ in range(3))
        self.state_z, self.state_r, self.state_h = (StepConnected(outputs, outputs, batch_normalize) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = self.split_steps(x.flatten(1))
        (s,) = self.initial_state((steps[0].new_zeros(steps[0].shape[0], self.outputs),))
        outputs = []
        for x_t in steps:
            z = torch.sigmoid(self.input_z(x_t) + self.state_z(s))
            r = torch.sigmoid(self.input_r(x_t) + self.state_r(s))
            h = torch.sigmoid(self.input_h(x_t) + self.state_h(r * s))
            s = z * s + (1 - z) * h
            outputs.append(s)
        self.keep_state((s,))
        return torch.cat(outputs, 0)[:, :, None, None]


@register("gru")
def build_gru(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    return build_connected_recurrent(section, prev, GRU)
