"""Darknet ``[lstm]`` (src/lstm_layer.c ``forward_lstm_layer``): Float[N, C, H, W] -> Float[N, output, 1, 1].

Eight fully connected inner layers without activation (optional BN): ``u*`` read the input (N vectors of
C*H*W), ``w*`` read the previous output h::

    f = sigmoid(wf(h) + uf(x_t));  i = sigmoid(wi(h) + ui(x_t))
    g = tanh(wg(h) + ug(x_t));     o = sigmoid(wo(h) + uo(x_t))
    c = f * c + i * g;             h = y_t = o * tanh(c)

h and c carry over between steps and between calls, in training and eval alike (Darknet never zeroes them).
Weights order: wf, wi, wg, wo, uf, ui, ug, uo. Darknet trains this layer only on CUDA (its CPU forward in
training mode clears ``l.delta``, which the CPU build never allocates); gradients here are autograd's.
"""
from __future__ import annotations

from typing import List

import torch

from yolo.models.cfg import Section
from yolo.models.layer_types.recurrent_base import StepConnected, ConnectedRecurrent, build_connected_recurrent
from yolo.models.layer_types.registry import LayerInfo, Shape, register


class LSTM(ConnectedRecurrent):
    gates = 4
    weight_order = ("wf", "wi", "wg", "wo", "uf", "ui", "ug", "uo")

    def __init__(self, inputs: int, outputs: int, batch_normalize: bool):
        super().__init__()
        self.outputs = outputs
        self.wf, self.wi, self.wg, self.wo = (StepConnected(outputs, outputs, batch_normalize) for _ in range(4))
        self.uf, self.ui, self.ug, self.uo = (StepConnected(inputs, outputs, batch_normalize) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = self.split_steps(x.flatten(1))
        zeros = steps[0].new_zeros(steps[0].shape[0], self.outputs)
        h, c = self.initial_state((zeros, zeros))
        outputs = []
        for x_t in steps:
            f = torch.sigmoid(self.wf(h) + self.uf(x_t))
            i = torch.sigmoid(self.wi(h) + self.ui(x_t))
            g = torch.tanh(self.wg(h) + self.ug(x_t))
            o = torch.sigmoid(self.wo(h) + self.uo(x_t))
            c = f * c + i * g
            h = o * torch.tanh(c)
            outputs.append(h)
        self.keep_state((h, c))
        return torch.cat(outputs, 0)[:, :, None, None]


@register("lstm")
def build_lstm(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    return build_connected_recurrent(section, prev, LSTM)
