"""How a training step runs on its device: autocast, memory format, TF32 and ``torch.compile``, decided in one place.

:func:`step_precision` reads the device and the hyperparameters and returns a :class:`StepPrecision`:

* **CPU** (the default there): float32, NCHW, no compile: the step is Darknet's, bit for bit as the parity
  tests check it.
* **CUDA**: fp16 autocast (``amp: true``; the loss is float32 anyway) with the model and the image batches in
  ``torch.channels_last`` (``channels_last: null`` follows ``amp``), which lets cuDNN pick its NHWC tensor-core
  kernels; TF32 only with ``tf32: true`` (default off: a Darknet-exact step; with TF32 the loss gradients on
  yolov3-tiny differ from float32's by about 5%, relative norm).
* ``compile: true``: the training forward through ``torch.compile`` (:class:`CompiledForward`), falling back
  to the plain module with one warning when compiling fails.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

import torch
import torch.nn as nn

from yolo.data.collate import collate_on_device
from yolo.data.darknet_batched import PendingBatch
from yolo.ops.pixels import images_to_float


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepPrecision:
    """The resolved settings of the training step (see the module docstring)."""

    device_type: str  # "cpu" or "cuda"
    amp: bool  # fp16 autocast of the forward, GradScaler on the loss
    channels_last: bool  # model weights and image batches in torch.channels_last
    tf32: bool  # TF32 matmuls and convolutions allowed (they exist on CUDA only)
    compile: bool  # the training forward through torch.compile

    @property
    def memory_format(self) -> torch.memory_format:
        return torch.channels_last if self.channels_last else torch.contiguous_format

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward's autocast context (a no-op without ``amp``)."""
        return torch.autocast(device_type=self.device_type, enabled=self.amp)

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """``model`` (in place) in the step's memory format; NCHW models are left untouched."""
        if self.channels_last:
            model.to(memory_format=torch.channels_last)
        return model

    def images_to(self, images: Union[torch.Tensor, PendingBatch], device: torch.device) -> torch.Tensor:
        """The loader's ``UInt8[B, 3, H, W]`` (or float 0..1) images, or its pending Darknet batch, as
        ``Float[B, 3, H, W]`` 0..1 on ``device`` in the step's memory format: moved (and a pending batch finished)
        by the data package's :func:`yolo.data.collate.collate_on_device`, then laid out and converted here, by
        the collate's own conversion."""
        images = collate_on_device(images, device)
        if self.channels_last:  # the layout change on the uint8 batch; the conversion keeps it
            images = images.contiguous(memory_format=torch.channels_last)
        return images_to_float(images)

    def describe(self) -> str:
        """One line for the run's log: ``float32 NCHW`` or ``fp16 autocast, channels_last, TF32 off``..."""
        parts = ["fp16 autocast" if self.amp else "float32", "channels_last" if self.channels_last else "NCHW"]
        if self.device_type == "cuda":
            parts.append(f"TF32 {'on' if self.tf32 else 'off'}")
        if self.compile:
            parts.append("torch.compile")
        return ", ".join(parts)


def step_precision(device: torch.device, hyp: Mapping[str, Any]) -> StepPrecision:
    """The step's settings on ``device`` from the hyperparameters ``amp``, ``channels_last`` (None: as ``amp``
    on CUDA, off on the CPU), ``tf32`` and ``compile``."""
    cuda = device.type == "cuda"
    amp = bool(hyp.get("amp", True)) and cuda
    channels_last = hyp.get("channels_last")
    channels_last = amp if channels_last is None else bool(channels_last)
    return StepPrecision(device_type=device.type, amp=amp, channels_last=channels_last,
                         tf32=bool(hyp.get("tf32", False)), compile=bool(hyp.get("compile", False)))


def apply_tf32(enabled: bool) -> None:
    """Allow (or forbid) TF32 in CUDA matmuls and cuDNN convolutions for this process (harmless on the CPU)."""
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    torch.backends.cudnn.allow_tf32 = bool(enabled)


class CompiledForward:
    """``module`` called through ``torch.compile``, or the plain ``module`` when compiling fails.

    Compiling happens at the first call (``torch.compile`` itself is lazy); if ``torch.compile`` or that first
    call raises, one warning names the error and every call from then on, the first included, runs ``module``
    unchanged. ``compiled`` says which one runs.
    """

    def __init__(self, module: nn.Module, compile_fn: Optional[Callable[[nn.Module], Callable]] = None):
        self.module = module
        self.compiled = True
        self._proven = False  # the compiled forward has run once
        try:
            self._forward = (compile_fn or torch.compile)(module)
        except Exception as exc:  # any failure of an optional accelerator: train without it
            self._fall_back(exc)

    def _fall_back(self, exc: BaseException) -> None:
        first_line = (str(exc).strip().splitlines() or [""])[0]
        logger.warning("torch.compile failed (%s: %s): training without it", type(exc).__name__, first_line[:200])
        self._forward = self.module
        self.compiled = False

    def __call__(self, *args, **kwargs):
        if not self.compiled or self._proven:
            return self._forward(*args, **kwargs)
        try:
            out = self._forward(*args, **kwargs)
        except Exception as exc:  # a compiler error at the first call (no C++ compiler, unsupported op, ...)
            self._fall_back(exc)
            return self._forward(*args, **kwargs)
        self._proven = True
        return out


__all__ = ["CompiledForward", "StepPrecision", "apply_tf32", "step_precision"]
