"""Putting the fast CPU kernels into a fused model (:func:`yolo.inference.prepare.prepare_for_inference`'s
``fast_cpu_kernels``, on by default for a Detector on the CPU: see :mod:`yolo.accel` for why and the figures).

Each replaced layer computes what the plain PyTorch module it replaces computes (``ConvBNAct`` after
``fuse()``, ``MaxPool``), to float rounding; ``tests/test_detector.py`` compares whole models.
"""
from __future__ import annotations

import logging
from typing import Dict, Tuple

import torch
import torch.nn as nn

from yolo.accel.cpu_conv import FusedConvCPU, onednn_conv_available
from yolo.accel.maxpool import FastMaxPool
from yolo.accel.winograd import WinogradConv3x3, is_winograd_shape, winograd_tile
from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.maxpool import MaxPool

logger = logging.getLogger(__name__)

__all__ = ["swap_modules_for_cpu", "use_fast_cpu_kernels"]


def swap_modules_for_cpu(model: nn.Module, example_hw: Tuple[int, int], winograd: bool = True) -> nn.Module:
    """Replace convs and maxpools in ``model.module_list`` (a fused, eval, CPU float32
    :class:`yolo.models.model.Darknet`) by the fast CPU kernels, in place: :class:`WinogradConv3x3` where
    :func:`winograd_tile` says it pays, else :class:`FusedConvCPU`; :class:`FastMaxPool` for maxpools.

    A layer whose fast kernel cannot be built keeps its original module (logged at DEBUG).
    """
    if not onednn_conv_available():
        logger.debug("oneDNN convolutions are not available: keeping the PyTorch convs")
        winograd = False
    # Shapes of every layer's input at ``example_hw``: needed to choose kernels and reorder weights.
    shapes: Dict[int, Tuple[int, ...]] = {}
    hooks = [mod.register_forward_pre_hook(lambda mod, args, i=i: shapes.__setitem__(i, tuple(args[0].shape)))
             for i, mod in enumerate(model.module_list) if isinstance(mod, (ConvBNAct, MaxPool))]
    try:
        with torch.inference_mode():
            model(torch.zeros(1, getattr(model, "input_channels", 3), *example_hw))
    finally:
        for hook in hooks:
            hook.remove()
    for i, module in enumerate(model.module_list):
        if i not in shapes:
            continue
        if isinstance(module, MaxPool):
            model.module_list[i] = FastMaxPool(module)
            continue
        conv, shape = module.conv, shapes[i]
        try:
            tile = winograd_tile(shape[2], shape[3], conv.in_channels, conv.out_channels) \
                if winograd and is_winograd_shape(conv) else 0
            if tile:
                model.module_list[i] = WinogradConv3x3(conv, module.activation, module.act, m=tile, example_shape=shape)
            elif onednn_conv_available():
                model.module_list[i] = FusedConvCPU(conv, module.activation, module.act, (1, *shape[1:]))
        except RuntimeError as exc:  # an unusual conv oneDNN refuses: the plain module still works
            logger.debug("layer %d keeps its PyTorch conv: %s", i, exc)
    return model


def use_fast_cpu_kernels(model: nn.Module, example_hw: Tuple[int, int]) -> nn.Module:
    """:func:`swap_modules_for_cpu`, then one forward pass at ``example_hw`` so that oneDNN creates its
    kernels now rather than on the first image. Returns ``model`` (changed in place).

    The private operators may change in another PyTorch: when that first pass fails, every layer gets its plain
    PyTorch module back (a warning says so) and the model runs as without these kernels.
    """
    plain = list(model.module_list)
    swap_modules_for_cpu(model, example_hw)
    example = torch.zeros(1, getattr(model, "input_channels", 3), *example_hw).contiguous(
        memory_format=torch.channels_last)
    try:
        with torch.inference_mode():
            model(example)
    except (RuntimeError, TypeError, AttributeError, NotImplementedError) as exc:
        for i, module in enumerate(plain):
            model.module_list[i] = module
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        logger.warning("the fast CPU kernels (torch.ops.mkldnn) do not run in this PyTorch %s (%s): plain PyTorch "
                       "convolutions instead", torch.__version__, reason)
    return model
