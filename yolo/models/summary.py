"""A Darknet-style model summary: per layer type, filters, size/stride, input -> output, BFLOPs.

BFLOPs are counted Darknet's way (its ``l.bflops``, as printed when it parses a cfg): per conv
2 * n * (c/groups) * k * k * out_h * out_w / 1e9; per maxpool size * size * c * out_h * out_w / 1e9; per
shortcut out_c * out_h * out_w * (number of ``from`` layers) / 1e9; a module with a ``bflops(in_shape,
out_shape)`` method gives its own; other layers count 0 (as in Darknet, [connected] included).
Totals compare with Darknet's printout (yolov3 at 416: 65.9). ``model`` is a :class:`yolo.models.model.Darknet`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn as nn

from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.maxpool import MaxPool
from yolo.models.layer_types.reorg import Reorg
from yolo.models.layer_types.route import Route
from yolo.models.layer_types.shortcut import Shortcut
from yolo.models.layer_types.upsample import Upsample
from yolo.models.weights import float_count
from yolo.ops.sizes import ImageSize, SizeLike, image_size, size_text


# The short names Darknet prints in its layer table.
SHORT_NAMES = {"convolutional": "conv", "maxpool": "max", "upsample": "upsample", "shortcut": "shortcut",
               "route": "route", "yolo": "yolo", "region": "detection", "avgpool": "avg", "dropout": "dropout"}


@dataclass
class LayerRow:
    index: int
    type: str
    filters: str
    size: str
    in_shape: Tuple[int, int, int]
    out_shape: Tuple[int, int, int]
    bflops: float


def layer_rows(model: nn.Module, img_size: Optional[SizeLike] = None) -> List[LayerRow]:
    """One row per layer at ``img_size`` (one side, or height, width; default the cfg's [net] size).

    Shapes come from a forward pass with hooks, so they are what the model really computes.
    """
    return _rows_at(model, _input_size(model, img_size))


def _input_size(model: nn.Module, img_size: Optional[SizeLike]) -> ImageSize:
    """``img_size`` (the caller's: one side, or height, width) as ``(h, w)``, default the cfg's [net] size: where a
    size enters :func:`layer_rows` and :func:`model_summary`."""
    return image_size(img_size, "img_size", model.input_size)


def _rows_at(model: nn.Module, size: ImageSize) -> List[LayerRow]:
    """:func:`layer_rows` at ``size`` ``(height, width)``."""
    h, w = size
    shapes = {}
    hooks = []
    for i, module in enumerate(model.module_list):
        def hook(mod, args, out, i=i):
            first = args[0]
            if isinstance(first, (list, tuple)):
                first = first[0]
            shapes[i] = (tuple(first.shape[1:]), tuple(out.shape[1:]) if torch.is_tensor(out) else None)
        hooks.append(module.register_forward_hook(hook))
    was_training = model.training
    device = next(model.parameters()).device
    try:
        model.eval()  # batch statistics of one image would fail in [connected] BatchNorm; heads' rows are skipped
        with torch.no_grad():
            model(torch.zeros(1, model.input_channels, h, w, device=device))
    finally:
        for handle in hooks:
            handle.remove()
        model.train(was_training)

    rows = []
    for i, (module, section) in enumerate(zip(model.module_list, model.sections[1:])):
        in_shape, out_shape = shapes[i]
        if out_shape is None or len(out_shape) != 3:  # heads: report the map they read
            out_shape = in_shape
        in_shape = tuple(in_shape) if len(in_shape) == 3 else (in_shape[0], 1, 1)
        filters, size, bflops = "", "", 0.0
        if hasattr(module, "bflops"):
            bflops = module.bflops(in_shape, out_shape)
        if isinstance(module, ConvBNAct):
            conv = module.conv
            k, s = conv.kernel_size[0], conv.stride[0]
            filters = str(conv.out_channels) + (f"/{conv.groups}" if conv.groups > 1 else "")
            size = f"{k} x {k} / {s}"
            bflops = 2.0 * conv.out_channels * (conv.in_channels // conv.groups) * k * k \
                * out_shape[1] * out_shape[2] / 1e9
        elif isinstance(module, MaxPool):
            size = f"{module.size} x {module.size} / {module.stride}"
            bflops = module.size * module.size * in_shape[0] * out_shape[1] * out_shape[2] / 1e9
        elif isinstance(module, (Upsample, Reorg)):
            size = f"     / {module.stride}"
        elif isinstance(module, Route):
            filters = " ".join(str(v) for v in module.layers)
        elif isinstance(module, Shortcut):
            filters = " ".join(str(v) for v in getattr(module, "sources", [module.source]))
            if not hasattr(module, "bflops"):
                bflops = out_shape[0] * out_shape[1] * out_shape[2] / 1e9
        name = "downsample" if isinstance(module, Upsample) and module.reverse else SHORT_NAMES.get(section.type,
                                                                                                      section.type)
        rows.append(LayerRow(i, name, filters, size, in_shape, out_shape, bflops))
    return rows


def model_summary(model: nn.Module, img_size: Optional[SizeLike] = None) -> str:
    """The summary table as text, with totals of parameters, weights-file floats and BFLOPs."""
    h, w = _input_size(model, img_size)
    rows = _rows_at(model, (h, w))
    fmt = "{:>4} {:<9}{:>8} {:>11}  {:>16} -> {:>16} {:>8}"
    lines = [fmt.format("", "layer", "filters", "size/strd", "input", "output", "BFLOPs")]
    for r in rows:
        shape_in = "{} x {} x {}".format(r.in_shape[1], r.in_shape[2], r.in_shape[0])
        shape_out = "{} x {} x {}".format(r.out_shape[1], r.out_shape[2], r.out_shape[0])
        lines.append(fmt.format(r.index, r.type, r.filters, r.size, shape_in, shape_out,
                                f"{r.bflops:.3f}" if r.bflops else ""))
    n_params = sum(p.numel() for p in model.parameters())
    total = sum(r.bflops for r in rows)
    lines.append(f"{len(rows)} layers, {n_params:,} parameters, {float_count(model):,} weights-file floats, "
                 f"{total:.3f} BFLOPs at {size_text((h, w))}")
    return "\n".join(lines)


def total_bflops(model: nn.Module, img_size: Optional[SizeLike] = None) -> float:
    """Darknet's BFLOPs total at ``img_size`` (height, width)."""
    return sum(r.bflops for r in layer_rows(model, img_size))
