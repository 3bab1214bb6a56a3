"""Darknet ``[conv_lstm]`` (src/conv_lstm_layer.c ``forward_conv_lstm_layer``): Float[N, C, H, W] ->
Float[N, output, H, W].

Inner convolutions sharing ``size``, ``pad``/``padding``, ``groups``, BN and ``activation`` (default linear,
applied by each conv to its own output): ``u*`` read the input (C -> output filters), ``w*`` the previous h,
and with ``peephole=1`` ``v*`` the cell c (output -> output filters)::

    f = sigmoid(wf(h) + uf(x_t) [+ vf(c)]);  i = sigmoid(wi(h) + ui(x_t) [+ vi(c)])
    g = tanh(wg(h) + ug(x_t))
    c = f * c + i * g
    o = sigmoid(wo(h) + uo(x_t) [+ vo(c)])       # vo reads the *new* c
    h = y_t = o * tanh(c)
    c = clamp(c, -state_constrain, state_constrain)   # after h; default 32 * time_steps (src/parser.c)

h and c carry over between steps and between calls, in training and eval alike (Darknet never zeroes them).
Weights order: vf, vi, vo (peephole only), wf, wi, wg, wo, uf, ui, ug, uo.

Refused, with the reason: ``bottleneck=1`` (Darknet computes it only on CUDA; the CPU forward,
src/conv_lstm_layer.c:693, runs wi/wg/wo, which a bottleneck layer never builds), ``lstm_activation`` other than
tanh (the CPU path ignores it, src/conv_lstm_layer.c:724 and :744 hard-code tanh, while CUDA honours it), and
whatever changes the map size (see :func:`recurrent_base.same_size_conv`). ``shortcut`` acts only with a
bottleneck (CUDA), so it changes nothing here; ``time_normalizer`` scales only the bottleneck's backward.
Darknet's CPU build cannot train this layer (``l.delta`` is never allocated there); gradients here are autograd's.
"""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.recurrent_base import RecurrentLayer, conv_bflops, refuse_options, same_size_conv
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import LayerInfo, Shape, activation, positive, register


class ConvLSTM(RecurrentLayer):
    def __init__(self, channels: int, outputs: int, size: int, padding: int, groups: int, act: str,
                 batch_normalize: bool, peephole: bool, state_constrain: Optional[int] = None):
        super().__init__()
        self.outputs, self.peephole = outputs, peephole
        self.state_constrain = state_constrain  # None: Darknet's default, 32 * time_steps; 0: no clamp

        def conv(c_in):
            return ConvBNAct(c_in, outputs, size, 1, padding, groups, batch_normalize, act)
        if peephole:
            self.vf, self.vi, self.vo = conv(outputs), conv(outputs), conv(outputs)
        self.wf, self.wi, self.wg, self.wo = (conv(outputs) for _ in range(4))
        self.uf, self.ui, self.ug, self.uo = (conv(channels) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = self.split_steps(x)
        zeros = steps[0].new_zeros(steps[0].shape[0], self.outputs, *steps[0].shape[2:])
        h, c = self.initial_state((zeros, zeros))
        limit = 32 * self.time_steps if self.state_constrain is None else self.state_constrain
        outputs = []
        for x_t in steps:
            f = self.wf(h) + self.uf(x_t)
            i = self.wi(h) + self.ui(x_t)
            if self.peephole:
                f, i = f + self.vf(c), i + self.vi(c)
            g = torch.tanh(self.wg(h) + self.ug(x_t))
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * g
            o = self.wo(h) + self.uo(x_t)
            if self.peephole:
                o = o + self.vo(c)
            h = torch.sigmoid(o) * torch.tanh(c)
            if limit:
                c = c.clamp(-limit, limit)
            outputs.append(h)
        self.keep_state((h, c))
        return torch.cat(outputs, 0)

    def inner_convs(self) -> List[nn.Module]:
        """The convolutions in .weights order (src/parser.c ``save_weights_upto``)."""
        peep = [self.vf, self.vi, self.vo] if self.peephole else []
        return peep + [self.wf, self.wi, self.wg, self.wo, self.uf, self.ui, self.ug, self.uo]

    def darknet_weights(self) -> List[torch.Tensor]:
        return [t for m in self.inner_convs() for t in m.darknet_weights()]

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        """The convs' BFLOPs plus 9 (12 with peephole) operations per output value, for one sequence
        (Darknet's inference batch; src/conv_lstm_layer.c ``l.bflops``)."""
        c, h, w = out_shape
        convs = sum(conv_bflops(m, h, w) for m in self.inner_convs())
        return convs + (12 if self.peephole else 9) * c * h * w / 1e9


@register("conv_lstm")
def build_conv_lstm(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    size, padding, groups = same_size_conv(section, h, w)
    outputs = positive(section, "output", section.get_int("output", 1))
    for name, n in (("input channels", c), ("output", outputs)):
        if n % groups:
            raise section.error(f"groups={groups} does not divide the {name} ({n})", "groups")
    refuse_options(section, {
        "bottleneck": ("0", "Darknet computes it only on CUDA (its CPU forward, src/conv_lstm_layer.c:693, "
                            "runs inner convolutions a bottleneck layer never builds)"),
        "lstm_activation": ("tanh", "Darknet's CPU path hard-codes tanh (src/conv_lstm_layer.c:724, :744) while "
                                    "CUDA uses this option, so Darknet itself gives two answers"),
    })
    state_constrain = section.get_int("state_constrain", None)
    if state_constrain is not None and state_constrain < 0:
        raise section.error(f"'state_constrain' must not be negative, got {state_constrain}", "state_constrain")
    check_layer_size(section, size * size * (4 * c + 7 * outputs) * outputs // groups, (outputs, h, w), "output",
                     f"output={outputs} size={size} on {c} input channels")
    section.get_int("shortcut", 0)  # acts only with a bottleneck (CUDA): no effect here
    section.get_float("time_normalizer", 1.0)  # scales only the bottleneck's backward
    act = activation(section, "linear", conv=True)  # applied by each inner [convolutional]
    module = ConvLSTM(c, outputs, size, padding, groups, act,
                      bool(section.get_int("batch_normalize", 0)), bool(section.get_int("peephole", 0)),
                      state_constrain)
    return LayerInfo(module, (outputs, h, w), prev)
