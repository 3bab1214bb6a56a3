"""Darknet ``[yolo]`` head (YOLOv3, v4): the conv map before it read as boxes per anchor and cell.

Input Float[N, A*(5+C), H, W] (the preceding conv); training returns the same values viewed as raw maps
Float[N, A, H, W, 5+C], eval decoded rows Float[N, A*H*W, 5+C] (:class:`YOLOLayer`).

The ``[yolo]`` arithmetic lives here once: :func:`yolo_activation` is Darknet's layer output, :func:`yolo_wh`
its box size and :func:`yolo_boxes` its ``get_yolo_box``; :meth:`YOLOLayer.decode` (boxes in input pixels) and
the [yolo] loss (:mod:`yolo.losses.yolo_head_loss`, boxes as fractions of the input) are both built on them.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch

from yolo.counts import MAX_ANCHORS, MAX_CLASSES
from yolo.models.cfg import Section
from yolo.models.heads import Head, HeadOptions, check_head_filters, check_nms_options, head_options
from yolo.models.layer_types.head_anchors import head_anchors
from yolo.models.layer_types.registry import LayerInfo, Shape, register


def yolo_activation_parts(raw: torch.Tensor, scale_x_y: float,
                          new_coords: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`yolo_activation` in its three parts: x, y Float[..., 2]; w, h Float[..., 2] (raw); objectness and
    classes Float[..., 1 + C]."""
    if new_coords:
        xy, rest = raw[..., 0:2], raw[..., 4:]
    else:
        xy, rest = torch.sigmoid(raw[..., 0:2]), torch.sigmoid(raw[..., 4:])
    if scale_x_y != 1.0:
        xy = xy * scale_x_y - 0.5 * (scale_x_y - 1.0)
    return xy, raw[..., 2:4], rest


def yolo_activation(raw: torch.Tensor, scale_x_y: float, new_coords: int) -> torch.Tensor:
    """Darknet's ``[yolo]`` layer output from its input Float[..., 5 + C] (the same shape).

    Logistic on x, y, objectness and classes (not with ``new_coords=1``, where the conv before already applied
    it), then x, y mapped to ``s * x - (s - 1) / 2`` for ``scale_x_y = s``; w, h stay raw.
    """
    return torch.cat(yolo_activation_parts(raw, scale_x_y, new_coords), -1)


def yolo_wh(act_wh: torch.Tensor, anchors: torch.Tensor, new_coords: int,
            max_log_scale: Optional[float] = None) -> torch.Tensor:
    """Box (w, h) Float[..., 2] from the [yolo] output's w, h Float[..., 2], in the unit of ``anchors``
    (broadcastable): ``exp(w) * anchor_w``, or with ``new_coords=1`` ``4 * w^2 * anchor_w``.
    ``max_log_scale`` (the loss's guard) caps w, h before ``exp``."""
    if new_coords:
        return act_wh * act_wh * 4 * anchors
    if max_log_scale is not None:
        act_wh = act_wh.clamp(max=max_log_scale)
    return act_wh.exp() * anchors


def yolo_boxes(act: torch.Tensor, anchors: torch.Tensor, grid: torch.Tensor, grid_hw: Tuple[int, int],
               new_coords: int, max_log_scale: Optional[float] = None) -> torch.Tensor:
    """Darknet's ``get_yolo_box``: centre boxes Float[..., 4] (cx, cy, w, h) as fractions of the input.

    ``act`` the [yolo] output Float[N, A, H, W, >=4] (:func:`yolo_activation`); ``anchors`` the anchors'
    (w, h) as fractions of the input, broadcastable to Float[N, A, H, W, 2]; ``grid`` the cells' (column, row)
    (:func:`cell_grid`); ``grid_hw`` (H, W). cx = (column + x) / W; w, h by :func:`yolo_wh`.
    """
    grid_h, grid_w = grid_hw
    xy = act[..., 0:2] + grid
    wh = yolo_wh(act[..., 2:4], anchors, new_coords, max_log_scale)
    return torch.stack((xy[..., 0] / grid_w, xy[..., 1] / grid_h, wh[..., 0], wh[..., 1]), -1)


class YOLOLayer(Head):
    """Darknet ``[yolo]`` head.

    Input Float[N, A*(5+C), H, W] (the preceding conv). Training: the same values viewed as
    Float[N, A, H, W, 5+C]. Eval: Float[N, A*H*W, 5+C] rows (cx, cy, w, h in input pixels,
    objectness, class probabilities), decoded as Darknet's yolo layer:
    xy = sigmoid(t) * s - (s - 1) / 2, cx = (col + xy_x) / W * input_w, w = exp(tw) * anchor_w;
    with ``new_coords=1`` no sigmoid here (the conv already applied logistic) and w = 4 * tw^2 * anchor_w.
    """

    def __init__(self, anchors: torch.Tensor, mask: Sequence[int], num_classes: int, opts: HeadOptions):
        super().__init__(num_classes, mask)
        self.opts = opts
        self._register_anchors(anchors)

    def decode(self, raw: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Float[N, A, H, W, 5+C] raw -> decoded (same shape), boxes in input pixels."""
        _, _, h, w, _ = raw.shape
        in_h, in_w = input_hw
        # Input pixels per cell: the same at every input size, so a traced model keeps it as a constant.
        stride = self.constant((in_w / w, in_h / h), raw.device, raw.dtype)
        xy, wh, rest = yolo_activation_parts(raw, self.opts.scale_x_y, self.opts.new_coords)
        xy = (xy + self.grid(h, w, raw.device, raw.dtype)) * stride
        wh = yolo_wh(wh, self.anchors.to(raw.dtype).reshape(1, -1, 1, 1, 2), self.opts.new_coords)
        return torch.cat((xy, wh, rest), -1)


def _mask(section: Section, num: int) -> List[int]:
    """A [yolo] / [Gaussian_yolo] section's ``mask`` (default 0..num-1): anchor indices, never negative
    (Darknet would read before its anchors). Indices at or beyond ``num``: :func:`head_anchors`."""
    mask = section.get_ints("mask", list(range(num)))
    if not mask or min(mask) < 0:
        raise section.error(f"mask {section.options.get('mask')} must list anchor indices 0..{num - 1}", "mask")
    return mask


@register("yolo")
def build_yolo(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    classes = section.get_count("classes", 20, MAX_CLASSES)
    if not section.get_floats("anchors", []):  # Darknet's 0.5-pixel anchors would detect nothing
        raise section.error("'anchors' is missing or empty", "anchors")
    num = section.get_count("num", 1, MAX_ANCHORS)  # Darknet's default, whatever the anchors list holds
    mask = _mask(section, num)
    anchors = head_anchors(section, num, mask)
    opts = head_options(section)
    if not opts.scale_x_y > 0:  # Darknet's x = s * sigmoid - (s - 1) / 2 would flip or freeze the offsets
        raise section.error(f"scale_x_y={section.options.get('scale_x_y')} must be positive", "scale_x_y")
    check_nms_options(section)
    if section.has("counters_per_class"):  # Darknet's parser stops on a count that is not one per class
        counts = section.get_ints("counters_per_class")
        if len(counts) != classes:
            raise section.error(f"counters_per_class has {len(counts)} values for classes={classes}",
                                "counters_per_class")
    check_head_filters(section, prev, (classes + 5) * len(mask), f"(classes+5)*len(mask) = ({classes}+5)*{len(mask)}")
    module = YOLOLayer(torch.tensor(anchors), mask, classes, opts)
    return LayerInfo(module, prev, prev)
