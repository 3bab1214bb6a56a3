"""Darknet ``[region]`` head (YOLOv2): the conv map before it read as boxes per anchor and cell, anchors in cells.

Input Float[N, num*(5+C), H, W] (the preceding conv); training returns the same values viewed as raw maps
Float[N, num, H, W, 5+C], eval decoded rows Float[N, num*H*W, 5+C] (:class:`RegionLayer`). The section's training
options (:class:`RegionTrainOptions`) are read here for the loss, :mod:`yolo.losses.region_loss`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

from yolo.counts import MAX_ANCHORS, MAX_CLASSES
from yolo.models.cfg import Section
from yolo.models.heads import CellLossScales, Head, HeadOptions, check_head_filters, head_options
from yolo.models.layer_types.head_anchors import MISSING_ANCHOR_VALUE, head_anchors
from yolo.models.layer_types.registry import LayerInfo, Shape, register


@dataclass
class RegionTrainOptions(CellLossScales):
    """The training options of a ``[region]`` section (Darknet's parse_region defaults)."""

    thresh: float = 0.5
    bias_match: int = 0
    classfix: int = 0
    focal_loss: int = 0
    max_boxes: int = 200
    tree: Optional[str] = None
    map: Optional[str] = None
    where: str = "<cfg>"  # "path:line" of the section


def region_train_options(section: Section) -> RegionTrainOptions:
    """Read (and check) a ``[region]`` section's training options."""
    opts = RegionTrainOptions(where=f"{section.source}:{section.line}")
    opts.read_scales(section)
    opts.thresh = section.get_float("thresh", opts.thresh)
    for key in ("bias_match", "classfix", "focal_loss"):
        setattr(opts, key, section.get_int(key, getattr(opts, key)))
    opts.max_boxes = section.get_int("max", 200)
    if opts.max_boxes <= 0:
        raise section.error(f"max={opts.max_boxes} must be positive", "max")
    if opts.classfix not in (-1, 0, 1, 2):
        raise section.error(f"classfix={opts.classfix} is not one of -1, 0, 1, 2", "classfix")
    section.get_int("absolute", 0)  # read for the record: Darknet's region layer always works in absolute mode
    opts.tree = section.get_str("tree", None)
    opts.map = section.get_str("map", None)
    return opts


class RegionLayer(Head):
    """Darknet ``[region]`` head (YOLOv2).

    Anchors are given in grid cells; ``anchors`` here is kept in input pixels of the cfg's
    [net] size for the loss, while the decode uses cells: w = exp(tw) * anchor_cells / W * input_w.
    Objectness is logistic; classes are a softmax when ``softmax=1``, else left raw (as Darknet's region layer).

    Training (:mod:`yolo.losses.region_loss`) reads ``train_opts`` (the section's :class:`RegionTrainOptions`,
    set by the builder); the loss is given the images trained on (the criterion's ``images_seen``, the current
    batch included): Darknet's prior term is on while it is below 12800.
    """

    def __init__(self, anchors_cells: torch.Tensor, num_classes: int, softmax: bool, opts: HeadOptions,
                 net_stride: float = 32.0):
        super().__init__(num_classes, range(anchors_cells.numel() // 2))
        self.softmax = softmax
        self.opts = opts
        self.train_opts: Optional[RegionTrainOptions] = None
        self.register_buffer("anchors_cells", anchors_cells.float().reshape(-1, 2), persistent=False)
        self.host_anchors_cells = self.anchors_cells.detach().cpu().clone()  # stays on the CPU (the loss's targets)
        self._register_anchors(self.anchors_cells * net_stride)

    def region_boxes(self, raw: torch.Tensor) -> torch.Tensor:
        """Darknet's ``get_region_box``: Float[N, A, H, W, >=4] raw -> centre boxes Float[N, A, H, W, 4] as
        fractions of the input: cx = (col + sigmoid(tx)) / W, w = exp(tw) * anchor_cells_w / W."""
        _, _, h, w, _ = raw.shape
        cells = self.constant((w, h), raw.device, raw.dtype)
        xy = (torch.sigmoid(raw[..., 0:2]) + self.grid(h, w, raw.device, raw.dtype)) / cells
        wh = torch.exp(raw[..., 2:4]) * self.anchors_cells.to(raw.dtype).reshape(1, -1, 1, 1, 2) / cells
        return torch.cat((xy, wh), -1)

    def decode(self, raw: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Float[N, A, H, W, 5+C] raw -> decoded (same shape), boxes in input pixels."""
        in_h, in_w = input_hw
        size = self.constant((in_w, in_h), raw.device, raw.dtype)
        boxes = self.region_boxes(raw) * torch.cat((size, size))
        obj = torch.sigmoid(raw[..., 4:5])
        # Without softmax Darknet's forward_region_layer leaves the class outputs as they are (no logistic).
        cls = torch.softmax(raw[..., 5:], -1) if self.softmax else raw[..., 5:]
        return torch.cat((boxes, obj, cls), -1)


@register("region")
def build_region(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    classes = section.get_count("classes", 20, MAX_CLASSES)
    if "tree" in section.options:  # YOLO9000's hierarchical softmax over a class tree
        raise section.error(f"tree={section.options['tree']}: hierarchical softmax is not supported", "tree")
    coords = section.get_int("coords", 4)
    if coords != 4:
        raise section.error(f"coords={coords} is not supported (only 4)", "coords")
    num = section.get_count("num", 1, MAX_ANCHORS)
    anchors = head_anchors(section, num, range(num)) if section.has("anchors") else [MISSING_ANCHOR_VALUE] * (2 * num)
    opts = head_options(section)
    check_head_filters(section, prev, (classes + 5) * num, f"(classes+5)*num = ({classes}+5)*{num}")
    module = RegionLayer(torch.tensor(anchors), classes, bool(section.get_int("softmax", 0)), opts)
    module.train_opts = region_train_options(section)
    return LayerInfo(module, prev, prev)
