"""A model made for fast eval once, before the first image: BN folded, channels-last, and on the CPU the
opt-in kernels of :mod:`yolo.accel`; on CUDA optionally fp16."""
from __future__ import annotations

import copy
from typing import Optional, Tuple, Union

import torch
import torch.nn as nn

from yolo.accel.swap import use_fast_cpu_kernels

__all__ = ["prepare_for_inference"]


def prepare_for_inference(
    model: nn.Module,
    device: Union[str, torch.device] = "cpu",
    half: bool = False,
    channels_last: bool = True,
    fast_cpu_kernels: bool = True,
    compile: bool = False,
    example_hw: Optional[Tuple[int, int]] = None,
) -> nn.Module:
    """A copy of a :class:`yolo.models.model.Darknet` made for fast eval: BN folded, channels-last, and on
    the CPU oneDNN/Winograd kernels (``fast_cpu_kernels``, :func:`yolo.accel.swap.use_fast_cpu_kernels` at
    ``example_hw``, default the cfg's input size); on CUDA optionally fp16 (``half``).
    With ``compile``, ``torch.compile`` wraps the result. Outputs equal the model's eval outputs to
    float tolerance (fp16: to half-precision tolerance). The original model is not changed.
    """
    device = torch.device(device)
    model = copy.deepcopy(model).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    model.fuse()
    model.to(device)
    if device.type == "cuda" and half:
        model.half()
    if channels_last:
        model.to(memory_format=torch.channels_last)
    if device.type == "cpu" and fast_cpu_kernels and not half:
        use_fast_cpu_kernels(model, example_hw or tuple(model.input_size))
    if compile:
        model = torch.compile(model, dynamic=False)
    return model
