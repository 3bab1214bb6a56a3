"""The builders of the core Darknet layer types, registered in :data:`yolo.models.layer_types.registry.BUILDERS`.
The builders of the other types are in :mod:`yolo.models.layer_types`, one module each; importing this module
imports them too, so that :data:`BUILDERS` then knows every section type.

A builder gets the section, the output shapes of every earlier layer and the previous layer's output shape
``(channels, height, width)`` at the cfg's [net] size; it checks the options and returns the module and its
output shape (:class:`LayerInfo`), raising ``section.error(...)`` for a bad cfg.
"""
from __future__ import annotations

from typing import List

import torch

from yolo.counts import MAX_ANCHORS, MAX_CLASSES
from yolo.models.cfg import Section
from yolo.models.heads import HeadOptions, RegionLayer, YOLOLayer, region_train_options
from yolo.models.layer_types import (activation, batchnorm, connected, contrastive, cost, crop,  # noqa: F401
                                     detection, gaussian_yolo, local, local_avgpool, recurrent_conv_lstm,
                                     recurrent_gru, recurrent_lstm, recurrent_rnn, reorg3d, scale_channels, shortcut)
from yolo.models.layer_types.head_anchors import MISSING_ANCHOR_VALUE, head_anchors
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import (LayerInfo, Shape, layer_index, layer_indices, pool_window, positive,
                                              register)
from yolo.models.layer_types.registry import activation as checked_activation
from yolo.models.layer_types.reorg_old import ReorgAnyChannels, reorg_gather_index
from yolo.models.layer_types.xnor import BinaryConvBNAct
from yolo.models.layers import ConvBNAct, Dropout, GlobalAvgPool, MaxPool, Reorg, Route, Softmax, Upsample


@register("convolutional", "conv")
def build_convolutional(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    filters = positive(section, "filters", section.get_int("filters", 1))
    size = positive(section, "size", section.get_int("size", 1))
    stride = positive(section, "stride", section.get_int("stride", 1))
    groups = positive(section, "groups", section.get_int("groups", 1))
    pad_flag = section.get_int("pad", 0)
    padding = size // 2 if pad_flag else section.get_int("padding", 0)
    bn = bool(section.get_int("batch_normalize", 0))
    act = checked_activation(section, "logistic", conv=True)  # Darknet's default when the key is missing
    if c % groups or filters % groups:
        raise section.error(f"groups={groups} must divide input channels ({c}) and filters ({filters})", "groups")
    out_h = (h + 2 * padding - size) // stride + 1
    out_w = (w + 2 * padding - size) // stride + 1
    if out_h <= 0 or out_w <= 0:
        raise section.error(f"input {h}x{w} is too small for size={size} stride={stride} padding={padding}")
    check_layer_size(section, filters * (c // groups) * size * size, (filters, out_h, out_w),
                     "size" if size * size > filters else "filters", f"filters={filters} size={size} on a {c}x{h}x{w} input")
    xnor, binary = bool(section.get_int("xnor", 0)), bool(section.get_int("binary", 0))
    if xnor or binary:
        module = BinaryConvBNAct(c, filters, size, stride, padding, groups, bn, act, xnor=xnor)
    else:
        module = ConvBNAct(c, filters, size, stride, padding, groups, bn, act)
    shares = None
    if "share_index" in section.options:  # this layer uses another layer's weights (Darknet's share_layer)
        shares = layer_index(section, "share_index", section.get_int("share_index", 0))
    dilation = positive(section, "dilation", section.get_int("dilation", 1)) if size > 1 else 1
    if dilation > 1:
        # Darknet pads by padding*dilation but sizes the output as if undilated; the two agree only for
        # "same" padding (padding = size // 2 with odd size), the only case Darknet computes consistently.
        span = dilation * (size - 1) + 1
        if (h + 2 * padding * dilation - span) // stride + 1 != out_h or \
                (w + 2 * padding * dilation - span) // stride + 1 != out_w:
            raise section.error(f"dilation={dilation} with size={size} padding={padding}: Darknet's output size "
                                f"disagrees with its dilated windows (only padding=size//2 is consistent)", "dilation")
        module.conv.dilation = (dilation, dilation)
        module.conv.padding = (padding * dilation, padding * dilation)
    return LayerInfo(module, (filters, out_h, out_w), prev, shares=shares)


@register("maxpool")
def build_maxpool(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    size, stride, padding, out_shape = pool_window(section, prev)
    return LayerInfo(MaxPool(size, stride, padding), out_shape, prev)


@register("upsample")
def build_upsample(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    stride = positive(section, "stride", section.get_int("stride", 2))
    scale = section.get_float("scale", 1.0)
    check_layer_size(section, 0, (c, h * stride, w * stride), "stride", f"stride={stride} on a {c}x{h}x{w} input")
    return LayerInfo(Upsample(stride, scale), (c, h * stride, w * stride), prev)


@register("route")
def build_route(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    layers = layer_indices(section, "layers")
    groups = positive(section, "groups", section.get_int("groups", 1))
    group_id = section.get_int("group_id", 0)
    if not 0 <= group_id < groups:
        raise section.error(f"group_id={group_id} must be in 0..{groups - 1}", "group_id")
    in_shapes = [shapes[i] for i in layers]
    hw = in_shapes[0][1:]
    for i, s in zip(layers, in_shapes):
        if s[1:] != hw:
            raise section.error(f"layers {layers} have different sizes: layer {i} is {s[1]}x{s[2]}, "
                                f"layer {layers[0]} is {hw[0]}x{hw[1]}", "layers")
        if s[0] % groups:
            raise section.error(f"groups={groups} does not divide the {s[0]} channels of layer {i}", "groups")
    channels = sum(s[0] for s in in_shapes) // groups
    return LayerInfo(Route(layers, groups, group_id), (channels, *hw), prev, tuple(layers))


@register("reorg")
def build_reorg(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    stride = positive(section, "stride", section.get_int("stride", 1))
    if h % stride or w % stride:
        raise section.error(f"reorg stride {stride} does not divide the {h}x{w} input", "stride")
    out = (c * stride * stride, h // stride, w // stride)
    if c % (stride * stride):
        index = reorg_gather_index(c, h, w, stride)
        if index is None:
            raise section.error(f"reorg stride {stride} on {c} channels: Darknet divides by zero or reads outside "
                                "its input", "stride")
        return LayerInfo(ReorgAnyChannels(stride, index), out, prev)
    return LayerInfo(Reorg(stride), out, prev)


@register("avgpool")
def build_avgpool(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    return LayerInfo(GlobalAvgPool(), (prev[0], 1, 1), prev)


@register("softmax")
def build_softmax(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    groups = positive(section, "groups", section.get_int("groups", 1))
    if prev[0] % groups:
        raise section.error(f"groups={groups} does not divide {prev[0]} channels", "groups")
    return LayerInfo(Softmax(groups, section.get_float("temperature", 1.0)), prev, prev)


@register("dropout")
def build_dropout(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    p = section.get_float("probability", 0.5)
    if not 0.0 <= p < 1.0:
        raise section.error(f"probability={p} must be in [0, 1)", "probability")
    return LayerInfo(Dropout(p), prev, prev)


def _head_options(section: Section) -> HeadOptions:
    opts = HeadOptions()
    for key, default in vars(HeadOptions()).items():
        getter = section.get_str if isinstance(default, str) else (
            section.get_int if isinstance(default, int) else section.get_float)
        setattr(opts, key, getter(key, default))
    if opts.iou_loss not in ("mse", "iou", "giou", "diou", "ciou"):
        raise section.error(f"unknown iou_loss '{opts.iou_loss}'", "iou_loss")
    return opts


def _check_head_filters(section: Section, prev: Shape, expected: int, why: str) -> None:
    if prev[0] != expected:
        raise section.error(f"the layer before has filters={prev[0]}, but this head needs {why} = {expected}")


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
    opts = _head_options(section)
    if section.has("counters_per_class"):  # Darknet's parser stops on a count that is not one per class
        counts = section.get_ints("counters_per_class")
        if len(counts) != classes:
            raise section.error(f"counters_per_class has {len(counts)} values for classes={classes}",
                                "counters_per_class")
    _check_head_filters(section, prev, (classes + 5) * len(mask), f"(classes+5)*len(mask) = ({classes}+5)*{len(mask)}")
    module = YOLOLayer(torch.tensor(anchors), mask, classes, opts)
    return LayerInfo(module, prev, prev)


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
    opts = _head_options(section)
    _check_head_filters(section, prev, (classes + 5) * num, f"(classes+5)*num = ({classes}+5)*{num}")
    module = RegionLayer(torch.tensor(anchors), classes, bool(section.get_int("softmax", 0)), opts)
    module.train_opts = region_train_options(section)
    return LayerInfo(module, prev, prev)
