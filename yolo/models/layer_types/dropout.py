"""Darknet ``[dropout]``: cells zeroed with ``probability`` in training, the shape unchanged."""
from __future__ import annotations

from typing import List

import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, register


class Dropout(nn.Dropout):
    """Darknet ``[dropout]``: identity in eval; in training Darknet scales kept cells by 1/(1-p) too."""


@register("dropout")
def build_dropout(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    p = section.get_float("probability", 0.5)
    if not 0.0 <= p < 1.0:
        raise section.error(f"probability={p} must be in [0, 1)", "probability")
    return LayerInfo(Dropout(p), prev, prev)
