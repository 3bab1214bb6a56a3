"""The Detector's input: BGR ``uint8`` images -> one network input batch, placed as Darknet places them
(the geometry is :mod:`yolo.ops.letterbox`, shared with evaluation and the data pipeline).

Images are ``numpy`` ``H x W x C`` arrays (BGR as read by OpenCV); shapes are ``(height, width)``.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple, Union

import cv2
import numpy as np
import torch

from yolo.ops.letterbox import LETTERBOX_FILL, LetterboxInfo, fit_image
from yolo.ops.sizes import ImageSize

__all__ = ["preprocess"]


def preprocess(
    images: Sequence[np.ndarray],
    img_size: ImageSize,
    mode: str = "letterbox",
    device: Union[str, torch.device] = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Tuple[torch.Tensor, List[LetterboxInfo]]:
    """BGR ``uint8`` images -> network input batch and the placement of each image.

    Each image is resized on ``uint8`` by :func:`~yolo.ops.letterbox.fit_image`, then converted once to RGB
    float 0..1 and put on a canvas whose border is exactly Darknet's 0.5 (``letterbox``); ``stretch`` equals
    ``cv2.dnn.blobFromImage(img, 1/255, (w, h), swapRB=True)``.

    Returns:
        ``(batch, infos)``: ``batch`` is ``Float[N, 3, h, w]`` RGB 0..1 in channels-last memory on ``device``;
        ``infos[i]`` maps boxes of image ``i`` back (:meth:`LetterboxInfo.to_original`).
    """
    net_h, net_w = img_size
    batch = torch.empty((len(images), net_h, net_w, 3), dtype=dtype, device=device)  # NHWC storage
    infos: List[LetterboxInfo] = []
    for i, image in enumerate(images):
        resized, info = fit_image(image, (net_h, net_w), mode)
        rh, rw = resized.shape[:2]
        px, py = int(info.pad_x), int(info.pad_y)
        pixels = torch.from_numpy(cv2.cvtColor(resized, cv2.COLOR_BGR2RGB)).to(device, non_blocking=True)
        if (rh, rw) != (net_h, net_w):
            batch[i].fill_(LETTERBOX_FILL)
        torch.div(pixels, 255.0, out=batch[i, py:py + rh, px:px + rw])  # the one uint8 -> float conversion
        infos.append(info)
    return batch.permute(0, 3, 1, 2), infos
