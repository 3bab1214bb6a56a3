"""The Detector's input: BGR ``uint8`` images -> one network input batch, placed as Darknet places them
(the geometry is :mod:`yolo.ops.letterbox`, shared with evaluation and the data pipeline).

Two resamplers: ``darknet`` (the default), Darknet's own ``resize_image`` in float32, bit for bit what
``detector test`` and ``detector map`` feed the network (:mod:`yolo.ops.darknet_resize`); ``opencv``,
``cv2.resize`` bilinear on ``uint8`` then one division, what OpenCV DNN's ``blobFromImage`` feeds it.

Images are ``numpy`` ``H x W x C`` arrays (BGR as read by OpenCV); shapes are ``(height, width)``.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple, Union

import cv2
import numpy as np
import torch

from yolo.ops.darknet_resize import darknet_resize_image
from yolo.ops.letterbox import LETTERBOX_FILL, RESAMPLERS, LetterboxInfo, fit_image, placement
from yolo.ops.sizes import ImageSize

__all__ = ["preprocess"]


def preprocess(
    images: Sequence[np.ndarray],
    img_size: ImageSize,
    mode: str = "letterbox",
    device: Union[str, torch.device] = "cpu",
    dtype: torch.dtype = torch.float32,
    resample: str = "darknet",
) -> Tuple[torch.Tensor, List[LetterboxInfo]]:
    """BGR ``uint8`` images -> network input batch and the placement of each image.

    ``resample="darknet"``: each image is converted to float and resized as Darknet does
    (:func:`~yolo.ops.darknet_resize.darknet_resize_image`), into the batch itself on the CPU.
    ``resample="opencv"``: each image is resized on ``uint8`` by :func:`~yolo.ops.letterbox.fit_image`, then
    converted once to RGB float 0..1; ``stretch`` then equals ``cv2.dnn.blobFromImage(img, 1/255, (w, h),
    swapRB=True)``. Either way the canvas border is exactly Darknet's 0.5 (``letterbox``).

    Returns:
        ``(batch, infos)``: ``batch`` is ``Float[N, 3, h, w]`` RGB 0..1 in channels-last memory on ``device``;
        ``infos[i]`` maps boxes of image ``i`` back (:meth:`LetterboxInfo.to_original`).
    """
    if resample not in RESAMPLERS:
        raise ValueError(f"unknown resampler {resample!r}: use 'darknet' or 'opencv'")
    net_h, net_w = img_size
    batch = torch.empty((len(images), net_h, net_w, 3), dtype=dtype, device=device)  # NHWC storage
    in_place = batch.device.type == "cpu" and dtype == torch.float32
    infos: List[LetterboxInfo] = []
    for i, image in enumerate(images):
        (rh, rw), (px, py), info = placement(image.shape[:2], (net_h, net_w), mode)
        if (rh, rw) != (net_h, net_w):
            batch[i].fill_(LETTERBOX_FILL)
        target = batch[i, py:py + rh, px:px + rw]
        if resample == "darknet":
            if in_place:
                darknet_resize_image(image, (rh, rw), out=target)
            else:
                target.copy_(darknet_resize_image(image, (rh, rw)), non_blocking=True)
        else:
            resized, _ = fit_image(image, (net_h, net_w), mode)
            pixels = torch.from_numpy(cv2.cvtColor(resized, cv2.COLOR_BGR2RGB)).to(device, non_blocking=True)
            torch.div(pixels, 255.0, out=target)  # the one uint8 -> float conversion
        infos.append(info)
    return batch.permute(0, 3, 1, 2), infos
