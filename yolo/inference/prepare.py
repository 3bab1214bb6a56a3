"""A model made for fast eval once, before the first image: BN folded, channels-last, and on the CPU the
kernels of :mod:`yolo.accel` (on by default, ``fast_cpu_kernels``); on CUDA optionally fp16 (convolutions in fp16, heads in fp32)."""
from __future__ import annotations

import copy
from typing import Optional, Tuple, Union

import torch
import torch.nn as nn

from yolo.accel.swap import use_fast_cpu_kernels

__all__ = ["Float32Head", "prepare_for_inference"]


class Float32Head(nn.Module):
    """A detection head run in float32 inside a float16 model (as the float16 export does,
    :mod:`yolo.export.heads`): the decode (``exp``, grid offsets scaled to input pixels, where float16 keeps
    a quarter pixel at 400) keeps float32 precision, and the rows come out in float32, as thresholds and NMS
    take them. One copy of the head's input per forward (the cast), no cast of the output.
    """

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head.float()

    def forward(self, x: torch.Tensor, input_hw) -> torch.Tensor:
        # Cast and leave channels-last in one copy: the head views its input as Float[N, A, K, H, W] rows.
        return self.head(x.to(torch.float32, memory_format=torch.contiguous_format), input_hw)


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
    ``example_hw``, default the cfg's input size); on CUDA optionally fp16 (``half``: everything but the heads,
    :class:`Float32Head`; the input is then fp16 too, channels-last, and the output float32).
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
        for i, module in enumerate(model.module_list):
            if model._is_head[i]:
                model.module_list[i] = Float32Head(module)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    if device.type == "cpu" and fast_cpu_kernels and not half:
        use_fast_cpu_kernels(model, example_hw or tuple(model.input_size))
    if compile:
        model = torch.compile(model, dynamic=False)
    return model
