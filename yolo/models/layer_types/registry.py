"""The builder registry: Darknet section name -> function that builds that layer.

A builder gets the section, the output shapes of every earlier layer and the previous layer's output
shape ``(channels, height, width)``; it checks its options and returns a :class:`LayerInfo`. Builders
raise ``section.error(...)`` so that a bad cfg fails at build time with the file and line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch.nn as nn

from yolo.counts import MAX_IMAGE_SIDE
from yolo.models.activations import ACTIVATIONS, CONV_ONLY
from yolo.models.cfg import Section

Shape = Tuple[int, int, int]  # (channels, height, width)


@dataclass
class LayerInfo:
    """What a builder reports about one layer, for shape checks and the summary."""

    module: nn.Module
    out_shape: Shape
    in_shape: Shape
    inputs: Tuple[int, ...] = ()  # absolute indices of earlier layers this one reads (route, shortcut)
    shares: Optional[int] = None  # absolute index of an earlier layer whose weights this one uses (share_index)


Builder = Callable[[Section, List[Shape], Shape], LayerInfo]
BUILDERS: Dict[str, Builder] = {}


def register(*names: str):
    """Register a builder for one or more Darknet section names."""
    def wrap(fn: Builder) -> Builder:
        for name in names:
            BUILDERS[name] = fn
        return fn
    return wrap


def positive(section: Section, key: str, value: int) -> int:
    """``value`` if it is positive, else the cfg error naming ``key``'s line."""
    if value <= 0:
        raise section.error(f"'{key}' must be positive, got {value}", key)
    return value


def positive_anchors(section: Section, anchors: List[float], key: str = "anchors") -> List[float]:
    """``anchors`` (w, h pairs) when every size is positive, else the cfg error naming ``key``'s line: a zero
    or negative anchor gives boxes of no or negative size, which train and detect without a word."""
    bad = [v for v in anchors if v <= 0]
    if bad:
        raise section.error(f"anchor sizes must be positive, got {', '.join(f'{v:g}' for v in bad[:4])}"
                            f"{' ...' if len(bad) > 4 else ''}", key)
    return anchors


def activation(section: Section, default: str, conv: bool = False, refuse: Tuple[str, ...] = ()) -> str:
    """The section's ``activation`` name, checked against the known activations.

    ``conv=False`` (every layer but [convolutional]) also refuses the activations that only Darknet's
    convolution computes (elsewhere its generic ``activate()`` returns 0 for them); ``refuse`` names more
    (swish and mish, which only [convolutional] and [shortcut] compute).
    """
    name = section.get_str("activation", default)
    if name in refuse or (not conv and name in CONV_ONLY):
        raise section.error(f"activation '{name}' is computed by Darknet only in [convolutional] layers "
                            f"(elsewhere Darknet outputs 0)", "activation")
    if name not in ACTIVATIONS:
        raise section.error(f"unknown activation '{name}' (known: {', '.join(sorted(ACTIVATIONS))})", "activation")
    return name


def layer_index(section: Section, key: str, value: int) -> int:
    """Darknet's rule: negative indices are relative to this layer, others absolute; must point back."""
    index = section.index + value if value < 0 else value
    if not 0 <= index < section.index:
        raise section.error(f"'{key}' refers to layer {value} -> {index}, outside layers 0..{section.index - 1}", key)
    return index


def layer_indices(section: Section, key: str) -> List[int]:
    """The absolute indices of the earlier layers that ``key`` lists (``layers`` of a [route], ``from`` of a
    [shortcut]), each checked by :func:`layer_index`; an empty list is a cfg error."""
    values = section.get_ints(key)
    if not values:
        raise section.error(f"'{key}' names no layer", key)
    return [layer_index(section, key, v) for v in values]


def pool_window(section: Section, prev: Shape) -> Tuple[int, int, int, Shape]:
    """``(size, stride, padding, out_shape)`` of a Darknet pooling section ([maxpool], [local_avgpool]).

    ``padding`` is the total padding (default size-1); out = (in + padding - size) // stride + 1.
    """
    c, h, w = prev
    stride = positive(section, "stride", section.get_int("stride", 1))
    size = positive(section, "size", section.get_int("size", stride))
    padding = section.get_int("padding", size - 1)
    if padding < 0:
        raise section.error(f"'padding' must not be negative, got {padding}", "padding")
    for key, value in (("size", size), ("padding", padding), ("stride", stride)):
        # Darknet computes any window, but no input side is over MAX_IMAGE_SIDE: a larger window reads nothing
        # more (cells outside the input are left out) and only costs memory (size=100000 asked for 10 TB)
        if value > MAX_IMAGE_SIDE:
            raise section.error(f"'{key}'={value} is larger than any input can be ({MAX_IMAGE_SIDE}, the largest "
                                "image side)", key)
    out_h = (h + padding - size) // stride + 1
    out_w = (w + padding - size) // stride + 1
    if out_h <= 0 or out_w <= 0:
        raise section.error(f"input {h}x{w} is too small for size={size} stride={stride}")
    return size, stride, padding, (c, out_h, out_w)
