"""Batching: the collate function, batch resizing and this framework's own multi-scale sizes.

Batch format (what the loss and the trainer consume)::

    images  Float[B, 3, H, W] RGB 0..1
    targets Float[M, 6] rows (image index in batch, class, cx, cy, w, h), cx..h in pixels of H x W
    infos   list of B dicts (see yolo.data.dataset): path, orig_shape, letterbox, ...
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import get_worker_info

from yolo.data.darknet_batched import PendingBatch, PendingImage
from yolo.ops.pixels import images_to_float
from yolo.ops.sizes import ImageSize, check_stride

Batch = Tuple[torch.Tensor, torch.Tensor, List[Dict[str, Any]]]


def collate_fn(batch: Sequence[Tuple[torch.Tensor, torch.Tensor, Dict[str, Any]]]) -> Batch:
    """Stack dataset items into ``(images, targets, infos)``.

    Items carry ``uint8`` images (a quarter of float32's size between worker processes); they are
    converted to float 0..1 here (:func:`images_to_float`). Float items are taken as already 0..1; pending
    images (:class:`yolo.data.darknet_batched.PendingImage`) are finished here, on the CPU.
    """
    images, targets, infos = _stack(batch)
    if isinstance(images, PendingBatch):
        images = images.finish()
    return images_to_float(images), targets, infos


def collate_uint8(batch: Sequence[Tuple[torch.Tensor, torch.Tensor, Dict[str, Any]]]) -> Batch:
    """:func:`collate_fn` that leaves ``uint8`` images as they are (``UInt8[B, 3, H, W]``), and pending images
    packed, unfinished (a :class:`yolo.data.darknet_batched.PendingBatch`): :func:`collate_on_device` finishes
    them on the training device."""
    return _stack(batch)


def collate_on_device(images: Union[torch.Tensor, PendingBatch], device: torch.device) -> torch.Tensor:
    """The device half of :func:`collate_uint8`: its images on ``device``, still ``UInt8[B, 3, H, W]`` RGB (or
    float 0..1 as they came). A tensor is copied (asynchronously from the loader's pinned memory on CUDA, a
    quarter of float32's bytes); a :class:`~yolo.data.darknet_batched.PendingBatch` is copied the same way and
    finished there (Darknet's crop, resize, mirror, HSV distortion and mixup blend, on the device). The caller
    converts (:func:`yolo.ops.pixels.images_to_float`) in the memory format it wants."""
    images = images.to(device, non_blocking=True)
    if isinstance(images, PendingBatch):
        images = images.finish()
    return images


def _stack(batch: Sequence[Tuple[torch.Tensor, torch.Tensor, Dict[str, Any]]]) -> Batch:
    """Images stacked as they are (pending ones packed), targets with their image index, infos as a list."""
    images, targets, infos = zip(*batch)
    if isinstance(images[0], PendingImage):
        stacked = PendingBatch.pack(images, shared=get_worker_info() is not None)
    else:
        shapes = {tuple(im.shape) for im in images}
        if len(shapes) != 1:
            raise ValueError(f"images in a batch must share one size, got {sorted(shapes)}: give the dataset one "
                             "img_size")
        stacked = torch.stack(images)
    rows = []
    for i, t in enumerate(targets):
        t = t.clone()
        t[:, 0] = i
        rows.append(t)
    return stacked, torch.cat(rows, 0) if rows else torch.zeros((0, 6)), list(infos)


def resize_batch(images: torch.Tensor, targets: torch.Tensor, size_hw: ImageSize,
                 infos: Optional[List[Dict[str, Any]]] = None) -> Batch:
    """Resize a collated batch to ``size_hw = (h, w)`` (multi-scale training).

    Images are resized bilinearly (``Float[B, 3, h, w]``); target boxes ``(cx, cy, w, h)`` are scaled
    per axis; infos (when given) get updated ``input_shape``, ``letterbox`` and ``transform`` copies.
    """
    h_old, w_old = images.shape[-2:]
    h_new, w_new = int(size_hw[0]), int(size_hw[1])
    if (h_new, w_new) == (h_old, w_old):
        return images, targets, infos if infos is not None else []
    sx, sy = w_new / w_old, h_new / h_old
    images = F.interpolate(images, size=(h_new, w_new), mode="bilinear", align_corners=False)
    targets = targets.clone()
    targets[:, 2:6] *= targets.new_tensor([sx, sy, sx, sy])
    new_infos: List[Dict[str, Any]] = []
    for info in infos or []:
        info = dict(info)
        info["input_shape"] = (h_new, w_new)
        lb = info.get("letterbox")
        if lb is not None:
            info["letterbox"] = dataclasses.replace(lb, scale_x=lb.scale_x * sx, scale_y=lb.scale_y * sy,
                                                    pad_x=lb.pad_x * sx, pad_y=lb.pad_y * sy)
        if info.get("transform") is not None:
            info["transform"] = np.diag([sx, sy, 1.0]) @ info["transform"]
        new_infos.append(info)
    return images, targets, new_infos


class MultiScale:
    """This framework's own multi-scale rule (``multi_scale: true`` in ``--hyp``; the cfg's ``random`` follows
    Darknet's rule, :mod:`yolo.data.darknet_multiscale`): a new input size every ``every`` batches,
    deterministic under ``seed``.

    The size for batch ``b`` depends only on ``(seed, b // every)``: a factor is drawn uniformly from
    ``[low, high]`` and each side of ``base_hw`` is scaled by it and rounded to a multiple of
    ``stride`` (the aspect ratio is kept, as in Darknet).

    Example::

        sizes = MultiScale((416, 416), stride=model.stride, every=10, seed=0)
        for b, (images, targets, infos) in enumerate(loader):
            images, targets, infos = resize_batch(images, targets, sizes(b), infos)
    """

    def __init__(self, base_hw: ImageSize, stride: int = 32, low: float = 0.7, high: float = 1.3,
                 every: int = 10, seed: int = 0):
        self.base_hw: ImageSize = check_stride(base_hw, stride, "multi-scale base size")
        if not 0 < low <= 1.0 <= high:
            raise ValueError(f"need 0 < low <= 1 <= high, got low={low}, high={high}")
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.stride, self.low, self.high, self.every, self.seed = int(stride), low, high, int(every), int(seed)

    def _side(self, base: int, factor: float) -> int:
        lo = max(self.stride, int(np.ceil(base * self.low / self.stride)) * self.stride)
        hi = max(lo, int(np.floor(base * self.high / self.stride)) * self.stride)
        return int(np.clip(round(base * factor / self.stride) * self.stride, lo, hi))

    def __call__(self, batch_index: int) -> ImageSize:
        """The ``(h, w)`` to use for batch ``batch_index``."""
        period = int(batch_index) // self.every
        factor = np.random.default_rng([self.seed & 0xFFFFFFFF, period]).uniform(self.low, self.high)
        return self._side(self.base_hw[0], factor), self._side(self.base_hw[1], factor)

    def sizes(self) -> List[ImageSize]:
        """Every size this schedule can return (smallest to largest)."""
        factors = np.linspace(self.low, self.high, 512)
        return sorted({(self._side(self.base_hw[0], f), self._side(self.base_hw[1], f)) for f in factors})
