"""Size limits checked at build time, before any tensor is allocated.

A typo in a cfg (``filters=2550000``, ``size=100001``) would otherwise allocate gigabytes and then fail
in the allocator, or later with a message about the weights file. The limits lie far above any layer of a
published Darknet cfg (the largest, VGG-16's first ``[connected]``, has 103 million weights; YOLOv4 at
608x608 has at most 12 million values in one layer output), so they refuse only absurd values.
"""
from __future__ import annotations

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import Shape

MAX_LAYER_WEIGHTS = 2 ** 28  # 268 million: 1 GiB of float32
MAX_LAYER_OUTPUT = 2 ** 31   # values per image in one layer output: 8 GiB of float32


def _gib(values: int) -> str:
    return f"{values * 4 / 2 ** 30:.1f} GiB"


def check_layer_size(section: Section, weights: int, out_shape: Shape, key: str, detail: str) -> None:
    """Refuse a layer with more than :data:`MAX_LAYER_WEIGHTS` weights or an output over
    :data:`MAX_LAYER_OUTPUT` values per image, with the cfg line of ``key``.

    ``detail`` says where the figures come from (``filters=... size=... on 256 input channels``).
    """
    if weights > MAX_LAYER_WEIGHTS:
        raise section.error(f"{detail} make {weights:,} weights ({_gib(weights)} of float32), beyond the "
                            f"{MAX_LAYER_WEIGHTS:,} allowed per layer: is '{key}' a typo?", key)
    c, h, w = out_shape
    values = c * h * w
    if values > MAX_LAYER_OUTPUT:
        raise section.error(f"{detail} make an output of {c}x{h}x{w} = {values:,} values per image "
                            f"({_gib(values)}), beyond the {MAX_LAYER_OUTPUT:,} allowed: is '{key}' or the input size "
                            "([net] width and height) a typo?", key)
