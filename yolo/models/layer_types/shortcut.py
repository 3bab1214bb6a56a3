"""Darknet ``[shortcut]``: the previous output plus the outputs of the ``from`` layers, then the activation.

Float[N, C, H, W] (previous layer) + each source Float[N, Ci, H, W] -> Float[N, C, H, W]: a source with
fewer channels adds to the first Ci channels, one with more adds only its first C (Darknet adds over
flat C*H*W indices, which is this when sizes match; unequal sizes are refused, as Darknet asserts).

Weighted shortcuts (``weights_type``): each input k (0 = previous layer, then the sources in order) is
multiplied by a learned weight, one per input (``per_feature``/``per_layer``) or one per input and channel
(``per_channel``), optionally normalized over the inputs (``weights_normalization``): ``relu`` (or
``avg_relu``): relu(w_k) / (0.0001 + sum relu(w)); ``softmax``: exp(w_k - max) / (0.0001 + sum exp(w - max)).
Weights file: Float[(sources + 1) * (1 or C)], input-major.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch
import torch.nn as nn

from yolo.models.activations import create_activation
from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, activation, layer_indices, register

WEIGHTS_TYPES = {"none": 0, "per_feature": 1, "per_layer": 1, "per_channel": 2}
NORMALIZATIONS = ("none", "relu", "avg_relu", "softmax")


class Shortcut(nn.Module):
    """Darknet ``[shortcut]``: add the output of layer ``source`` then apply the activation.

    When channel counts differ only the overlapping channels add (the result keeps ``x``'s channels).
    """

    def __init__(self, source: int, activation: str = "linear"):
        super().__init__()
        self.source = source
        self.act = create_activation(activation)

    def forward(self, x, other):
        if x.shape[1] == other.shape[1]:
            out = x + other
        else:
            n = min(x.shape[1], other.shape[1])
            out = torch.cat([x[:, :n] + other[:, :n], x[:, n:]], 1)
        return self.act(out)


class MultiShortcut(Shortcut):
    """A [shortcut] with several ``from`` layers and/or learned weights (see the module docstring)."""

    def __init__(self, sources: Sequence[int], channels: int, activation_name: str, weights_type: str = "none",
                 normalization: str = "none"):
        super().__init__(sources[0], activation_name)
        self.sources = list(sources)
        self.normalization = normalization if weights_type != "none" else "none"
        per = {0: 0, 1: 1, 2: channels}[WEIGHTS_TYPES[weights_type]]
        # Darknet starts every weight at 1.
        self.weight: Optional[nn.Parameter] = nn.Parameter(torch.ones(len(sources) + 1, per)) if per else None

    def _normalized_weights(self) -> torch.Tensor:
        w = self.weight
        if self.normalization in ("relu", "avg_relu"):
            w = torch.relu(w)
            return w / (w.sum(0, keepdim=True) + 0.0001)
        if self.normalization == "softmax":
            e = torch.exp(w - w.max(0, keepdim=True).values)
            return e / (e.sum(0, keepdim=True) + 0.0001)
        return w

    def forward(self, x, *others):
        c = x.shape[1]
        w = None
        if self.weight is not None:
            w = self._normalized_weights().reshape(len(self.sources) + 1, -1, 1, 1)  # [inputs, 1 or C, 1, 1]
        out = x * w[0] if w is not None else x
        for k, other in enumerate(others, start=1):
            n = min(c, other.shape[1])
            add = other[:, :n] * w[k][:n] if w is not None else other[:, :n]
            out = out + add if n == c else torch.cat([out[:, :n] + add, out[:, n:]], 1)
        return self.act(out)

    def darknet_weights(self) -> List[torch.Tensor]:
        return [self.weight] if self.weight is not None else []

    def bflops(self, in_shape: Shape, out_shape: Shape) -> float:
        c, h, w = out_shape
        return c * h * w * len(self.sources) * (2 if self.weight is not None else 1) / 1e9


@register("shortcut")
def build_shortcut(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    sources = layer_indices(section, "from")
    for source in sources:
        if shapes[source][1:] != prev[1:]:
            raise section.error(f"layer {source} is {shapes[source][1]}x{shapes[source][2]} but the previous layer is "
                                f"{prev[1]}x{prev[2]}: a shortcut needs equal sizes (Darknet asserts this too)", "from")
    weights_type = section.get_str("weights_type", "none")
    if weights_type not in WEIGHTS_TYPES:
        raise section.error(f"unknown weights_type '{weights_type}' (known: {', '.join(WEIGHTS_TYPES)})",
                            "weights_type")
    normalization = section.get_str("weights_normalization", "none")
    if normalization not in NORMALIZATIONS:
        raise section.error(f"unknown weights_normalization '{normalization}' (known: {', '.join(NORMALIZATIONS)})",
                            "weights_normalization")
    act = activation(section, "linear")
    if len(sources) == 1 and weights_type == "none":
        return LayerInfo(Shortcut(sources[0], act), prev, prev, (sources[0],))
    module = MultiShortcut(sources, prev[0], act, weights_type, normalization)
    return LayerInfo(module, prev, prev, tuple(sources))
