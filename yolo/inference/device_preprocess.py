"""Fitting images to the network input with torch ops on the model's device (the GPU path of
:func:`yolo.inference.preprocess.preprocess`).

The ``uint8`` images travel as they are (a quarter of the bytes of floats; all in one copy, from a pinned
buffer reused from call to call on CUDA: :mod:`yolo.inference.staging`), then the resize (``letterbox`` or
``stretch``), BGR -> RGB and the division by 255 run on the device, one batched call per group of images of
the same size. The placement (:class:`LetterboxInfo`) is the same object the CPU path computes.

The resamplers: ``darknet`` is :func:`yolo.ops.darknet_resize.darknet_resize`, Darknet's float32 operations on
the tables the CPU path uses, so the values equal :func:`yolo.inference.preprocess.preprocess`'s bit for bit
(checked in ``tests/test_device_preprocess.py``). ``opencv`` is OpenCV's ``INTER_LINEAR`` written as
``torch.nn.functional.interpolate(mode="bilinear", align_corners=False)``: both sample the source at
``(dst + 0.5) * src / dst - 0.5``, clamp at the borders and mix the two neighbours linearly; OpenCV does it
in 11-bit fixed point on ``uint8`` and rounds, here it is done in float32 and rounded to the nearest level,
so a pixel differs from the CPU path by at most one 8-bit level.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from yolo.inference.staging import HostStaging
from yolo.ops.darknet_resize import darknet_resize
from yolo.ops.letterbox import LETTERBOX_FILL, RESAMPLERS, LetterboxInfo, placement
from yolo.ops.sizes import ImageSize

__all__ = ["upload_uint8", "resize_bilinear_levels", "preprocess_on_device"]



def upload_uint8(groups: Sequence[Sequence[np.ndarray]], device: Union[str, torch.device],
                 staging: Optional[HostStaging] = None) -> List[torch.Tensor]:
    """Each group of equal-sized ``H x W x 3`` ``uint8`` images as one ``UInt8[n, H, W, 3]`` on ``device``.

    The bytes of all groups are gathered in one host buffer (``staging``, reused from call to call; pinned on
    CUDA, :class:`~yolo.inference.staging.HostStaging`) and travel in one copy (asynchronous from pinned
    memory); each group is a view of it on the device. Without ``staging`` a buffer is made for this call.
    """
    device = torch.device(device)
    staging = staging if staging is not None else HostStaging(pin=device.type == "cuda")
    sizes = [sum(image.size for image in group) for group in groups]
    host = staging.borrow((sum(sizes),))
    host_bytes = host.numpy()
    offset = 0
    for group in groups:
        for image in group:
            np.copyto(host_bytes[offset:offset + image.size].reshape(image.shape), image)
            offset += image.size
    on_device = staging.upload(host, device)
    out, offset = [], 0
    for group, size in zip(groups, sizes):
        out.append(on_device[offset:offset + size].view(len(group), *group[0].shape))
        offset += size
    return out


def resize_bilinear_levels(pixels: torch.Tensor, size_hw: ImageSize) -> torch.Tensor:
    """OpenCV's bilinear ``cv2.resize`` of ``uint8`` images, as torch ops.

    Args:
        pixels: ``UInt8[N, C, H, W]`` (any memory format).
        size_hw: the output ``(h, w)``.

    Returns:
        ``Float32[N, C, h, w]``: whole 8-bit levels 0..255 (rounded, as OpenCV's ``uint8`` result), within one
        level of ``cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)``; the input values as floats when
        the size does not change.
    """
    values = pixels.float()
    if tuple(values.shape[-2:]) == tuple(size_hw):
        return values
    resized = F.interpolate(values, size=tuple(size_hw), mode="bilinear", align_corners=False, antialias=False)
    return resized.round_().clamp_(0, 255)


def _positions(members: List[int], count: int, device: torch.device) -> Union[slice, torch.Tensor]:
    """Where a group of images goes in the batch: a slice when its members follow each other (no index
    tensor), else their indices on ``device``, copied without waiting for the work queued before (a plain
    copy to CUDA would wait for the upload of the images)."""
    if members == list(range(members[0], members[0] + len(members))):
        return slice(members[0], members[0] + len(members)) if len(members) < count else slice(None)
    return torch.as_tensor(members).to(device, non_blocking=True)


def preprocess_on_device(
    images: Sequence[np.ndarray],
    img_size: ImageSize,
    mode: str = "letterbox",
    device: Union[str, torch.device] = "cpu",
    dtype: torch.dtype = torch.float32,
    staging: Optional[HostStaging] = None,
    resample: str = "darknet",
) -> Tuple[torch.Tensor, List[LetterboxInfo]]:
    """BGR ``uint8`` images -> network input batch and the placement of each image, computed on ``device``.

    The same contract as :func:`yolo.inference.preprocess.preprocess` (its values with ``resample="darknet"``;
    within one 8-bit level of them with ``"opencv"``).
    All images travel in one copy, through ``staging`` when given (a caller's buffer kept across calls, as the
    ``Detector`` keeps one: no page-locked allocation per call), see :func:`upload_uint8`.

    Returns:
        ``(batch, infos)``: ``batch`` is ``Float[N, 3, h, w]`` (``dtype``) RGB 0..1 in channels-last memory on
        ``device``, Darknet's gray 0.5 around a letterboxed image; ``infos[i]`` maps boxes of image ``i`` back.
    """
    if resample not in RESAMPLERS:
        raise ValueError(f"unknown resampler {resample!r}: use 'darknet' or 'opencv'")
    net_h, net_w = img_size
    batch = torch.empty((len(images), net_h, net_w, 3), dtype=dtype, device=device)  # NHWC storage
    infos: List[LetterboxInfo] = [None] * len(images)  # type: ignore[list-item]
    groups: Dict[ImageSize, List[int]] = defaultdict(list)
    for i, image in enumerate(images):
        groups[image.shape[:2]].append(i)
    uploaded = upload_uint8([[images[i] for i in members] for members in groups.values()], device, staging)
    for (shape_hw, members), pixels in zip(groups.items(), uploaded):
        (rh, rw), (px, py), info = placement(shape_hw, (net_h, net_w), mode)
        for i in members:
            infos[i] = info
        # BGR -> RGB on the uint8 bytes, then NCHW view (channels-last memory) for the resize.
        pixels = pixels.flip(-1).permute(0, 3, 1, 2)
        if resample == "darknet":
            values = darknet_resize(pixels, (rh, rw)).permute(0, 2, 3, 1)
        else:
            values = resize_bilinear_levels(pixels, (rh, rw)).div_(255.0).permute(0, 2, 3, 1)
        where = _positions(members, len(images), device)
        if (rh, rw) != (net_h, net_w):
            batch[where] = LETTERBOX_FILL
        batch[where, py:py + rh, px:px + rw] = values.to(dtype)
    return batch.permute(0, 3, 1, 2), infos
