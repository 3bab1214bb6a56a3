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
from yolo.models.layer_types.recurrent_base import Connected, RecurrentLayer
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import LayerInfo, Shape, positive, register


class LSTM(RecurrentLayer):
    def __init__(self, inputs: int, outputs: int, batch_normalize: bool):
        super().__init__()
        self.outputs = outputs
        self.wf, self.wi, self.wg, self.wo = (Connected(outputs, outputs, batch_normalize) for _ in range(4))
        self.uf, self.ui, self.ug, self.uo = (Connected(inputs, outputs, batch_normalize) for _ in range(4))

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

    def darknet_weights(self) -> List[torch.Tensor]:
        """src/parser.c ``save_weights_upto``: wf, wi, wg, wo, uf, ui, ug, uo."""
        layers = (self.wf, self.wi, self.wg, self.wo, self.uf, self.ui, self.ug, self.uo)
        return [t for m in layers for t in m.darknet_weights()]

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        return 0.0  # Darknet counts no BFLOPs for connected layers


@register("lstm")
def build_lstm(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    outputs = positive(section, "output", section.get_int("output", 1))
    check_layer_size(section, 4 * (c * h * w + outputs) * outputs, (outputs, 1, 1), "output",
                     f"output={outputs} on {c * h * w} inputs")
    module = LSTM(c * h * w, outputs, bool(section.get_int("batch_normalize", 0)))
    return LayerInfo(module, (outputs, 1, 1), prev)
