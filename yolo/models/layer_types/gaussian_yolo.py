"""Darknet ``[Gaussian_yolo]`` head (Gaussian YOLOv3): a [yolo] head that also predicts, for each of its four box
coordinates, an uncertainty (the standard deviation of a Gaussian around the coordinate).

Channel order of one anchor's ``9 + C`` inputs, as Darknet's src/gaussian_yolo_layer.c lays them out:

    0 tx   1 sigma_tx   2 ty   3 sigma_ty   4 tw   5 sigma_tw   6 th   7 sigma_th   8 objectness   9.. classes

Activation (Darknet's CPU forward): logistic on 0, 1, 2, 3, 5, 7, 8 and the classes; ``scale_x_y = s`` then maps the
two offsets (0 and 2 only, not their sigmas) to ``sigmoid * s - (s - 1) / 2``; 4 and 6 stay raw. Decode, with
``(i, j)`` the cell, ``W x H`` the grid and ``net_w x net_h`` the network input:

    cx = (i + tx) / W * net_w     cy = (j + ty) / H * net_h     w = exp(tw) * anchor_w     h = exp(th) * anchor_h

With ``yolo_point=left_top`` (``right_bottom``) the offset locates the box's top-left (bottom-right) corner, so the
centre is shifted by ``+w/2, +h/2`` (``-w/2, -h/2``). Darknet scores a class as
``objectness * p_class * (1 - mean of the four sigmas)`` (:func:`yolo.inference.postprocess.threshold_and_nms`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from yolo.models.cfg import Section
from yolo.counts import MAX_ANCHORS, MAX_CLASSES
from yolo.ops.postprocess_defaults import BETA_NMS
from yolo.models.heads import Head, HeadOptions, check_nms_options
from yolo.models.layer_types.head_anchors import head_anchors
from yolo.models.layer_types.registry import LayerInfo, Shape, register

YOLO_POINTS = ("center", "left_top", "right_bottom")
IOU_KINDS = ("mse", "iou", "giou", "diou", "ciou")
NUM_BOX_ENTRIES = 9  # 4 coordinates, 4 sigmas, objectness


@dataclass
class GaussianYoloOptions(HeadOptions):
    """The options of a ``[Gaussian_yolo]`` section, with Darknet's defaults (src/parser.c parse_gaussian_yolo):
    the ``[yolo]`` ones (:class:`yolo.models.heads.HeadOptions`) and these."""

    yolo_point: str = "center"
    uc_normalizer: float = 1.0
    counters_per_class: Optional[List[int]] = None
    map: Optional[str] = None
    beta_nms: float = BETA_NMS
    nms_kind: str = "default"
    random: float = 0.0
    max_boxes: int = 200
    where: str = "<cfg>"  # "path:line" of the section, for messages about options the loss cannot honour


class GaussianYOLOLayer(Head):
    """Darknet ``[Gaussian_yolo]`` head.

    Input Float[N, A*(9+C), H, W] (the preceding conv). Training: the same values, raw, viewed as
    Float[N, A, H, W, 9+C] in Darknet's channel order (module docstring). Eval: Float[N, A*H*W, 9+C] rows

        cx, cy, w, h (input pixels), objectness, C class probabilities, sigma_tx, sigma_ty, sigma_tw, sigma_th

    i.e. a [yolo] head's ``5 + C`` columns followed by the four uncertainties (logistic, 0..1, in the units of
    the raw coordinates tx, ty, tw, th). ``anchors`` are pixels of the network input.
    """

    num_box_entries = NUM_BOX_ENTRIES
    box_sigmas = True

    def __init__(self, anchors: torch.Tensor, mask: Sequence[int], num_classes: int, opts: GaussianYoloOptions):
        super().__init__(num_classes, mask)
        self.opts = opts
        self._register_anchors(anchors)

    def activate(self, raw: torch.Tensor) -> torch.Tensor:
        """Float[N, A, H, W, 9+C] raw -> the same with Darknet's activations (what Darknet's layer outputs)."""
        s = self.opts.scale_x_y
        act = torch.sigmoid(raw)
        offsets = act[..., 0:3:2]  # x and y; a strided slice, where an index list would be a copy to the device
        if s != 1.0:
            offsets = offsets * s - 0.5 * (s - 1.0)
        return torch.cat((offsets[..., :1], act[..., 1:2], offsets[..., 1:], act[..., 3:4], raw[..., 4:5],
                          act[..., 5:6], raw[..., 6:7], act[..., 7:]), -1)

    def boxes(self, act: torch.Tensor, input_hw: Sequence[int], normalized: bool = False) -> torch.Tensor:
        """Centre boxes Float[N, A, H, W, 4] (module docstring's decode) from the activated maps (:meth:`activate`):
        in input pixels, or with ``normalized`` as fractions of the input (Darknet's ``get_gaussian_yolo_box``,
        what the loss uses)."""
        _, _, h, w, _ = act.shape
        in_h, in_w = input_hw
        grid = self.grid(h, w, act.device, act.dtype)
        anchors = self.anchors.to(act.dtype).reshape(1, -1, 1, 1, 2)
        bw = torch.exp(act[..., 4]) * anchors[..., 0]
        bh = torch.exp(act[..., 6]) * anchors[..., 1]
        cx = (grid[..., 0] + act[..., 0]) / w
        cy = (grid[..., 1] + act[..., 2]) / h
        if normalized:
            bw, bh = bw / in_w, bh / in_h
        else:
            cx, cy = cx * in_w, cy * in_h
        if self.opts.yolo_point == "left_top":
            cx, cy = cx + bw / 2, cy + bh / 2
        elif self.opts.yolo_point == "right_bottom":
            cx, cy = cx - bw / 2, cy - bh / 2
        return torch.stack((cx, cy, bw, bh), -1)

    def decode(self, raw: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Float[N, A, H, W, 9+C] raw -> Float[N, A, H, W, 9+C] eval rows (class docstring), boxes in input pixels."""
        act = self.activate(raw)
        sigmas = act[..., 1:8:2]  # the four uncertainties
        return torch.cat((self.boxes(act, input_hw), act[..., 8:], sigmas), -1)


# ------------------------------------------------------------------------------------------------ the builder
def _choice(section: Section, key: str, default: str, choices: Sequence[str]) -> str:
    value = section.get_str(key, default)
    if value not in choices:
        raise section.error(f"{key}={value} is not one of {', '.join(choices)}", key)
    return value


@register("Gaussian_yolo", "gaussian_yolo")
def build_gaussian_yolo(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    """``[Gaussian_yolo]``: options checked as for ``[yolo]``; filters must be (classes + 9) * len(mask)."""
    classes = section.get_count("classes", 20, MAX_CLASSES)
    if not section.get_floats("anchors", []):  # Darknet's 0.5-pixel anchors would detect nothing
        raise section.error("'anchors' is missing or empty", "anchors")
    num = section.get_count("num", 1, MAX_ANCHORS)
    mask = section.get_ints("mask", list(range(num)))
    if not mask or not all(0 <= m < num for m in mask):  # Darknet reads outside its anchors
        raise section.error(f"mask {mask} refers to anchors outside 0..{num - 1} (num={num})", "mask")
    anchors = head_anchors(section, num, mask, overflow_refused=True)
    opts = GaussianYoloOptions(where=f"{section.source}:{section.line}")
    for key in ("scale_x_y", "ignore_thresh", "truth_thresh", "iou_thresh", "iou_normalizer", "uc_normalizer",
                "obj_normalizer", "cls_normalizer", "delta_normalizer", "label_smooth_eps", "beta_nms", "jitter",
                "resize", "random"):
        setattr(opts, key, section.get_float(key, getattr(opts, key)))
    opts.max_delta = section.get_float("max_delta", float("inf"))
    opts.objectness_smooth = section.get_int("objectness_smooth", 0)
    opts.max_boxes = section.get_int("max", 200)
    opts.yolo_point = _choice(section, "yolo_point", "center", YOLO_POINTS)
    opts.iou_loss = _choice(section, "iou_loss", "mse", IOU_KINDS)
    opts.iou_thresh_kind = _choice(section, "iou_thresh_kind", "iou", IOU_KINDS[1:])
    opts.nms_kind = _choice(section, "nms_kind", "default", ("default", "greedynms", "diounms", "cornersnms"))
    check_nms_options(section, ("default", "greedynms", "diounms", "cornersnms"))
    opts.map = section.get_str("map", None)
    if section.has("counters_per_class"):
        counts = section.get_ints("counters_per_class")
        if len(counts) != classes:
            raise section.error(f"counters_per_class has {len(counts)} values for classes={classes}",
                                "counters_per_class")
        opts.counters_per_class = counts
    if opts.scale_x_y <= 0:
        raise section.error(f"scale_x_y={opts.scale_x_y} must be positive", "scale_x_y")
    if prev[0] != (classes + NUM_BOX_ENTRIES) * len(mask):
        raise section.error(f"the layer before has filters={prev[0]}, but this head needs (classes+9)*len(mask) = "
                            f"({classes}+9)*{len(mask)} = {(classes + NUM_BOX_ENTRIES) * len(mask)}")
    module = GaussianYOLOLayer(torch.tensor(anchors), mask, classes, opts)
    return LayerInfo(module, prev, prev)
