"""Darknet ``[crop]``: cut a ``crop_height`` x ``crop_width`` window and map 0..1 pixels to -1..1.

Inference (Darknet's test path): the centred window, offsets (H - crop_h) // 2 and (W - crop_w) // 2,
then x * 2 - 1 (``noadjust=1``: unchanged values). Training: a random window and, with ``flip=1``, a random
horizontal flip, one draw per batch as Darknet's CPU path. Darknet's CUDA path also rotates (``angle``)
and jitters colours (``saturation``, ``exposure``) in training; that is not done here, so a training
forward with those options set is refused.
Float[N, C, H, W] -> Float[N, C, crop_h, crop_w].
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import LayerInfo, Shape, positive, register


class Crop(nn.Module):
    def __init__(self, crop_h: int, crop_w: int, flip: bool, noadjust: bool, training_refusal: str = ""):
        super().__init__()
        self.crop_h, self.crop_w = crop_h, crop_w
        self.flip, self.noadjust = flip, noadjust
        self.training_refusal = training_refusal

    def forward(self, x):
        h, w = x.shape[-2:]
        if self.training:
            if self.training_refusal:
                raise RuntimeError(self.training_refusal)
            dh = int(torch.randint(0, h - self.crop_h + 1, ()))
            dw = int(torch.randint(0, w - self.crop_w + 1, ()))
            flip = self.flip and bool(torch.randint(0, 2, ()))
        else:
            dh, dw, flip = (h - self.crop_h) // 2, (w - self.crop_w) // 2, False
        if dh < 0 or dw < 0:
            raise ValueError(f"[crop] window {self.crop_h}x{self.crop_w} is larger than its {h}x{w} input")
        y = x[..., dh:dh + self.crop_h, dw:dw + self.crop_w]
        if flip:
            y = y.flip(-1)
        return y if self.noadjust else y * 2.0 - 1.0


@register("crop")
def build_crop(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    crop_h = positive(section, "crop_height", section.get_int("crop_height", 1))
    crop_w = positive(section, "crop_width", section.get_int("crop_width", 1))
    if crop_h > h or crop_w > w:
        raise section.error(f"crop {crop_h}x{crop_w} is larger than the {h}x{w} input (Darknet would read outside "
                            "it)", "crop_height")
    flip = bool(section.get_int("flip", 0))
    noadjust = bool(section.get_int("noadjust", 0))
    augment = [f"{k}={section.options[k]}" for k, neutral in (("angle", 0.0), ("saturation", 1.0), ("exposure", 1.0))
               if k in section.options and section.get_float(k, neutral) != neutral]
    refusal = ""
    if augment:
        refusal = (f"{section.source}:{section.line}: [crop] {', '.join(augment)}: Darknet's CUDA training "
                   "augmentation inside [crop] is not implemented; train with these options removed")
    return LayerInfo(Crop(crop_h, crop_w, flip, noadjust, refusal), (c, crop_h, crop_w), prev)
