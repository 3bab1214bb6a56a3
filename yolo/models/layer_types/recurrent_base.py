"""What Darknet's sequence layers ([rnn], [crnn], [gru], [lstm], [conv_lstm]) share: time steps and state.

**Time steps.** Darknet runs a sequence layer on a batch of N = T x S images, *time-major*: image
``t * S + s`` is time step ``t`` of sequence ``s`` (src/rnn_layer.c ``forward_rnn_layer`` advances its input by
``l.inputs * l.batch`` per step, with ``l.batch = batch / steps``). T is Darknet's ``time_steps``: the [net]
value when training (src/parser.c ``parse_net_options``), and 1 for detection, demo and every other inference
entry point (src/detector.c ``parse_network_cfg_custom(cfgfile, 1, 1)``). So a model built here starts with
``time_steps = 1`` (one frame per call, as Darknet detects) and :func:`set_time_steps` switches it, e.g. to
``model.net.get_int("time_steps", 1)`` for sequence training.

**State.** Each layer keeps its hidden state between forward calls, per sequence, as Darknet keeps it in the
layer's buffers: the next call's first step continues from the last call's last step. The stored state is
detached (gradients stop at the call boundary, as Darknet's backward does), starts at zeros, and starts again
at zeros when the sequence count or the spatial size changes, or after :meth:`RecurrentLayer.reset_state`.
How training mode treats the state depends on the type (see each module).

Every module here returns ``Float[N, C, H, W]`` for ``Float[N, C_in, H_in, W_in]``; fully connected types
read the input flattened in C, H, W order (as Darknet's memory layout) and return ``H = W = 1``.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.connected import Connected as ConnectedLayer
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import LayerInfo, Shape, positive


class RecurrentLayer(nn.Module):
    """Base of the sequence layers: splits a time-major batch into steps and keeps the state between calls."""

    def __init__(self):
        super().__init__()
        self.time_steps = 1
        self._state: Optional[Tuple[torch.Tensor, ...]] = None

    def reset_state(self) -> None:
        """Forget the carried state: the next call starts from zeros."""
        self._state = None

    def split_steps(self, x: torch.Tensor) -> List[torch.Tensor]:
        """Float[T * S, ...] -> T tensors Float[S, ...], step t being images t*S .. t*S + S - 1."""
        if x.shape[0] % self.time_steps:
            raise ValueError(f"{type(self).__name__}: a batch of {x.shape[0]} images does not split into "
                             f"time_steps={self.time_steps} steps (N must be time_steps x sequences)")
        return list(x.chunk(self.time_steps, dim=0)) if self.time_steps > 1 else [x]

    def initial_state(self, zeros: Tuple[torch.Tensor, ...]) -> Tuple[torch.Tensor, ...]:
        """The carried state if it fits ``zeros`` (same shapes, device, dtype), else ``zeros``."""
        state = self._state
        if state is None or len(state) != len(zeros) or any(
                s.shape != z.shape or s.device != z.device or s.dtype != z.dtype for s, z in zip(state, zeros)):
            return zeros
        return state

    def keep_state(self, state: Optional[Tuple[torch.Tensor, ...]]) -> None:
        """Store the state for the next call (detached), or ``None`` for zeros."""
        self._state = None if state is None else tuple(s.detach() for s in state)


def set_time_steps(model: nn.Module, time_steps: int) -> None:
    """Set Darknet's ``time_steps`` on every sequence layer of ``model`` (and forget their states)."""
    if time_steps < 1:
        raise ValueError(f"time_steps must be positive, got {time_steps}")
    for module in model.modules():
        if isinstance(module, RecurrentLayer):
            module.time_steps = time_steps
            module.reset_state()


def reset_states(model: nn.Module) -> None:
    """Forget the carried state of every sequence layer of ``model`` (a new set of sequences starts)."""
    for module in model.modules():
        if isinstance(module, RecurrentLayer):
            module.reset_state()


class StepConnected(ConnectedLayer):
    """A [connected] layer on one time step, as [rnn], [gru] and [lstm] use it inside (src/connected_layer.c):
    Float[B, inputs] -> Float[B, outputs], same weights, file order and BN (eps 1e-5, the biases as BN beta)."""

    def __init__(self, inputs: int, outputs: int, batch_normalize: bool, activation: str = "linear"):
        super().__init__(inputs, outputs, batch_normalize, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        if self.bn is not None:
            x = self.bn(x)
        return self.act(x)


class ConnectedRecurrent(RecurrentLayer):
    """Base of [gru] and [lstm]: ``gates`` pairs of fully connected inner layers, one reading the input
    (``inputs -> outputs``), one the state (``outputs -> outputs``); :attr:`weight_order` names them in the
    ``.weights`` file's order (src/parser.c ``save_weights_upto``)."""

    gates = 0
    weight_order: Tuple[str, ...] = ()

    def darknet_weights(self) -> List[torch.Tensor]:
        return [t for name in self.weight_order for t in getattr(self, name).darknet_weights()]

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        return 0.0  # Darknet counts no BFLOPs for connected layers


def build_connected_recurrent(section: Section, prev: Shape, layer_type: type) -> LayerInfo:
    """The [gru]/[lstm] builder: ``layer_type(inputs, output, batch_normalize)`` on the input flattened to
    C*H*W values; the output is Float[N, output, 1, 1]."""
    c, h, w = prev
    outputs = positive(section, "output", section.get_int("output", 1))
    check_layer_size(section, layer_type.gates * (c * h * w + outputs) * outputs, (outputs, 1, 1), "output",
                     f"output={outputs} on {c * h * w} inputs")
    module = layer_type(c * h * w, outputs, bool(section.get_int("batch_normalize", 0)))
    return LayerInfo(module, (outputs, 1, 1), prev)


def conv_bflops(conv: nn.Module, out_h: int, out_w: int) -> float:
    """Darknet's count for one conv (src/convolutional_layer.c): 2 * weights * out_h * out_w / 1e9."""
    return 2.0 * conv.conv.weight.numel() * out_h * out_w / 1e9


# ----------------------------------------------------------------------------- option checks shared by builders


def refuse_options(section: Section, refused: dict) -> None:
    """Refuse options whose value is not the neutral one: ``{key: (neutral value, reason)}``."""
    for key, (neutral, reason) in refused.items():
        if section.has(key) and section.get_str(key) != neutral:
            raise section.error(f"'{key}={section.options[key]}' is not supported: {reason}", key)


def same_size_conv(section: Section, in_h: int, in_w: int) -> Tuple[int, int, int]:
    """``(size, padding, groups)`` of a [crnn]/[conv_lstm]'s inner convolutions, read as src/parser.c reads them
    (``pad=1`` means padding = size/2, else ``padding``, default 0; size defaults to 3).

    Their state is a map of the *input's* size (src/crnn_layer.c ``l.hidden = h * w * hidden_filters``;
    src/conv_lstm_layer.c feeds ``h_cpu`` to convs built for an h x w input), so Darknet computes garbage unless
    every inner conv keeps the size: stride 1, dilation 1 and padding = (size - 1) / 2. Anything else is refused.
    """
    size = section.get_int("size", 3)
    if size <= 0:
        raise section.error(f"'size' must be positive, got {size}", "size")
    padding = size // 2 if section.get_int("pad", 0) else section.get_int("padding", 0)
    refuse_options(section, {
        "stride": ("1", "the recurrent state must keep the input size (Darknet reads past its state buffer)"),
        "dilation": ("1", "dilated inner convolutions are not implemented"),
        "xnor": ("0", "XNOR (binary) inner convolutions are not implemented"),
    })
    if 2 * padding != size - 1:
        raise section.error(f"size={size} with padding={padding} changes the map size ({in_h}x{in_w} -> "
                            f"{in_h + 2 * padding - size + 1}x{in_w + 2 * padding - size + 1}); the recurrent "
                            "state must keep the input size: use an odd size with pad=1", "size")
    groups = section.get_int("groups", 1)
    if groups <= 0:
        raise section.error(f"'groups' must be positive, got {groups}", "groups")
    return size, padding, groups
