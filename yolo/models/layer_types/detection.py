"""Darknet ``[detection]``: the YOLOv1 head, on the flat output of a [connected] layer.

Input Float[N, side*side*((1+coords)*num + classes)] (as Float[N, K, 1, 1]), laid out as Darknet's:
class probabilities [side*side, classes], then confidences [side*side, num], then boxes
[side*side, num, 4] (x, y within the cell; w, h relative to the image, squared when ``sqrt=1``).
With ``softmax=1`` the class probabilities of each cell go through a softmax.

Training mode returns the flat input Float[N, K], raw (no softmax: Darknet's backward passes its delta to the
input without the softmax's Jacobian, so the loss, yolo/losses/detection_loss.py, applies the softmax itself); eval
returns Float[N, side*side*num, 5 + classes] rows (cx, cy, w, h in input pixels, confidence, class
probabilities), ordered by cell then box, decoded as Darknet's ``get_detection_detections``:
cx = (x + col) / side * input_w, w = w^(sqrt ? 2 : 1) * input_w.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from yolo.counts import MAX_ANCHORS, MAX_CLASSES
from yolo.models.cfg import Section
from yolo.models.heads import CellLossScales, Head
from yolo.models.layer_types.registry import LayerInfo, Shape, register


@dataclass
class DetectionTrainOptions(CellLossScales):
    """The training options of a ``[detection]`` section (Darknet's parse_detection defaults)."""

    forced: int = 0
    random: float = 0.0
    where: str = "<cfg>"  # "path:line" of the section


def detection_train_options(section: Section) -> DetectionTrainOptions:
    """Read a ``[detection]`` section's training options."""
    opts = DetectionTrainOptions(where=f"{section.source}:{section.line}")
    opts.read_scales(section)
    opts.random = section.get_float("random", opts.random)
    opts.forced = section.get_int("forced", opts.forced)
    return opts


class DetectionLayer(Head):
    """Darknet ``[detection]`` head (module docstring): ``num`` boxes per cell of a ``side x side`` grid."""

    def __init__(self, side: int, num: int, classes: int, coords: int, softmax: bool, sqrt: bool):
        super().__init__(classes, range(num))  # num_anchors: boxes per cell, under the name the other heads use
        self.side, self.num, self.coords = side, num, coords
        self.softmax, self.sqrt = softmax, sqrt
        self.flat_size = side * side * ((1 + coords) * num + classes)  # K, the values of one image
        self.train_opts: Optional[DetectionTrainOptions] = None  # set by the builder; read by the loss

    def activated(self, x: torch.Tensor) -> torch.Tensor:
        """Darknet's layer output: the input, with the class block softmaxed per cell when ``softmax=1``."""
        flat = x.flatten(1)
        if not self.softmax:
            return flat
        cells = self.side * self.side
        probs = flat[:, :cells * self.num_classes].reshape(-1, cells, self.num_classes).softmax(-1)
        return torch.cat([probs.flatten(1), flat[:, cells * self.num_classes:]], 1)

    def forward(self, x: torch.Tensor, input_hw: Sequence[int]):
        in_h, in_w = input_hw
        self.stride = (in_h / self.side, in_w / self.side)
        if self.training:
            return x.flatten(1)  # raw: the loss applies the class softmax itself (module docstring)
        return self.decode(self.activated(x), input_hw)

    def decode(self, out: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """The activated flat map Float[N, K] -> rows Float[N, side*side*num, 5 + classes] (module docstring)."""
        in_h, in_w = input_hw
        n, s, b, k = out.shape[0], self.side, self.num, self.num_classes
        cells = s * s
        probs = out[:, :cells * k].reshape(n, cells, 1, k).expand(n, cells, b, k)
        conf = out[:, cells * k:cells * (k + b)].reshape(n, cells, b, 1)
        boxes = out[:, cells * (k + b):cells * (k + b + b * 4)].reshape(n, cells, b, 4)
        index = torch.arange(cells, device=out.device, dtype=out.dtype)
        col, row = (index % s).reshape(1, cells, 1), torch.div(index, s, rounding_mode="floor").reshape(1, cells, 1)
        cx = (boxes[..., 0] + col) / s * in_w
        cy = (boxes[..., 1] + row) / s * in_h
        wh = boxes[..., 2:4] ** 2 if self.sqrt else boxes[..., 2:4]
        w, h = wh[..., 0] * in_w, wh[..., 1] * in_h
        rows = torch.cat([torch.stack([cx, cy, w, h], -1), conf, probs], -1)
        return rows.reshape(n, cells * b, 5 + k)


@register("detection")
def build_detection(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    coords = section.get_int("coords", 1)
    if coords != 4:
        raise section.error(f"coords={coords} is not supported (the decode reads 4 box values)", "coords")
    classes = section.get_count("classes", 1, MAX_CLASSES)
    num = section.get_count("num", 1, MAX_ANCHORS)
    side = section.get_count("side", 7, MAX_ANCHORS)
    inputs = prev[0] * prev[1] * prev[2]
    expected = side * side * ((1 + coords) * num + classes)
    if inputs != expected:
        raise section.error(f"the layer before outputs {inputs} values, but side*side*((1+coords)*num+classes) = "
                            f"{side}*{side}*((1+{coords})*{num}+{classes}) = {expected}")
    for key in ("reorg", "max"):
        section.get_int(key, 0)  # read by Darknet, no effect on its results (reorg's code is commented out)
    for key in ("jitter", "resize"):
        section.get_float(key, 1.0)  # augmentation: read by the trainer from the cfg
    module = DetectionLayer(side, num, classes, coords, bool(section.get_int("softmax", 0)),
                            bool(section.get_int("sqrt", 0)))
    module.train_opts = detection_train_options(section)
    return LayerInfo(module, prev, prev)

