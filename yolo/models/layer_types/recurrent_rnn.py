"""Darknet ``[rnn]`` and ``[crnn]``: the plain recurrent layer, fully connected or convolutional.

Both are three inner layers (src/rnn_layer.c, src/crnn_layer.c) applied per time step t::

    state = (state if shortcut else 0) + input_layer(x_t) + self_layer(state)
    y_t   = output_layer(state)

[rnn]: the inner layers are fully connected (inputs -> hidden -> hidden -> output), each with the section's
``activation`` (default logistic) and optional BN, except ``self_layer`` which uses logistic with ``logistic=1``
(``logistic=2`` means loggy). [crnn]: the inner layers are convolutions (c -> hidden -> hidden -> output filters)
sharing ``size``, ``pad``/``padding``, ``groups``, ``activation`` and BN; the state is a hidden-filter map.

State (``forward_rnn_layer``/``forward_crnn_layer``): in eval mode it carries over from step to step and from
call to call; in training mode Darknet zeroes it at the start of every forward call, so each call is a fresh
set of sequences (and the next eval call starts from zeros too).

Weights order: input_layer, self_layer, output_layer, each as its own [connected] / [convolutional].
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn

from yolo.models.activations import ACTIVATIONS
from yolo.models.cfg import Section
from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.recurrent_base import StepConnected, RecurrentLayer, conv_bflops, same_size_conv
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import LayerInfo, Shape, activation, positive, register


class PlainRecurrent(RecurrentLayer):
    """The [rnn]/[crnn] recurrence over three inner layers; Float[T*S, ...] -> Float[T*S, out, H, W].

    ``zero_state(x_t)`` gives the zero state for one step's input ``x_t`` Float[S, ...].
    """

    def __init__(self, input_layer: nn.Module, self_layer: nn.Module, output_layer: nn.Module, shortcut: bool):
        super().__init__()
        self.input_layer, self.self_layer, self.output_layer = input_layer, self_layer, output_layer
        self.shortcut = shortcut

    def zero_state(self, x_t: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        """The layer's view of its input (flattened for [rnn])."""
        return x

    def finish(self, y: torch.Tensor) -> torch.Tensor:
        """The output as Float[N, C, H, W]."""
        return y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = self.split_steps(self.prepare(x))
        zeros = self.zero_state(steps[0])
        # Darknet zeroes the state at each training call; in eval it carries over between calls.
        state = zeros if self.training else self.initial_state((zeros,))[0]
        outputs = []
        for x_t in steps:
            new_state = self.input_layer(x_t) + self.self_layer(state)
            state = state + new_state if self.shortcut else new_state
            outputs.append(self.output_layer(state))
        self.keep_state(None if self.training else (state,))
        return self.finish(torch.cat(outputs, 0))

    def darknet_weights(self) -> List[torch.Tensor]:
        """src/parser.c ``save_weights_upto``: input_layer, self_layer, output_layer, each in its own order."""
        return [t for m in (self.input_layer, self.self_layer, self.output_layer) for t in m.darknet_weights()]


class RNN(PlainRecurrent):
    """Darknet ``[rnn]``: Float[N, C, H, W] (read as N vectors of C*H*W) -> Float[N, outputs, 1, 1]."""

    def __init__(self, inputs: int, hidden: int, outputs: int, act: str, self_act: str, batch_normalize: bool,
                 shortcut: bool):
        super().__init__(StepConnected(inputs, hidden, batch_normalize, act),
                         StepConnected(hidden, hidden, batch_normalize, self_act),
                         StepConnected(hidden, outputs, batch_normalize, act), shortcut)
        self.hidden = hidden

    def zero_state(self, x_t):
        return x_t.new_zeros(x_t.shape[0], self.hidden)

    def prepare(self, x):
        return x.flatten(1)

    def finish(self, y):
        return y[:, :, None, None]

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        return 0.0  # Darknet counts no BFLOPs for connected layers


class CRNN(PlainRecurrent):
    """Darknet ``[crnn]``: Float[N, C, H, W] -> Float[N, output, H, W], the state Float[S, hidden, H, W]."""

    def __init__(self, channels: int, hidden: int, outputs: int, size: int, padding: int, groups: int, act: str,
                 batch_normalize: bool, shortcut: bool):
        def conv(c_in, c_out):
            return ConvBNAct(c_in, c_out, size, 1, padding, groups, batch_normalize, act)
        super().__init__(conv(channels, hidden), conv(hidden, hidden), conv(hidden, outputs), shortcut)
        self.hidden = hidden

    def zero_state(self, x_t):
        return x_t.new_zeros(x_t.shape[0], self.hidden, x_t.shape[2], x_t.shape[3])

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        """The three convs' BFLOPs (src/crnn_layer.c ``l.bflops``)."""
        return sum(conv_bflops(m, out_shape[1], out_shape[2])
                   for m in (self.input_layer, self.self_layer, self.output_layer))


@register("rnn")
def build_rnn(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    outputs = positive(section, "output", section.get_int("output", 1))
    hidden = positive(section, "hidden", section.get_int("hidden", 1))
    act = activation(section, "logistic")
    logistic = section.get_int("logistic", 0)
    if logistic not in (0, 1, 2):
        raise section.error(f"'logistic' must be 0, 1 or 2, got {logistic}", "logistic")
    self_act = {0: act, 1: "logistic", 2: "loggy"}[logistic]
    if self_act not in ACTIVATIONS:
        raise section.error(f"logistic=2 needs the '{self_act}' activation, which is not implemented", "logistic")
    weights = c * h * w * hidden + hidden * hidden + hidden * outputs
    check_layer_size(section, weights, (outputs, 1, 1), "hidden",
                     f"hidden={hidden} output={outputs} on {c * h * w} inputs")
    module = RNN(c * h * w, hidden, outputs, act, self_act, bool(section.get_int("batch_normalize", 0)),
                 bool(section.get_int("shortcut", 0)))
    return LayerInfo(module, (outputs, 1, 1), prev)


@register("crnn")
def build_crnn(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    size, padding, groups = same_size_conv(section, h, w)
    outputs = positive(section, "output", section.get_int("output", 1))
    hidden = positive(section, "hidden", section.get_int("hidden", 1))
    for name, n in (("input channels", c), ("hidden", hidden), ("output", outputs)):
        if n % groups:
            raise section.error(f"groups={groups} does not divide the {name} ({n})", "groups")
    act = activation(section, "logistic", conv=True)  # applied by each inner [convolutional]
    weights = size * size * (c * hidden + hidden * hidden + hidden * outputs) // groups
    check_layer_size(section, weights, (max(hidden, outputs), h, w), "hidden",
                     f"hidden={hidden} output={outputs} size={size} on {c} input channels")
    module = CRNN(c, hidden, outputs, size, padding, groups, act, bool(section.get_int("batch_normalize", 0)),
                  bool(section.get_int("shortcut", 0)))
    return LayerInfo(module, (outputs, h, w), prev)
