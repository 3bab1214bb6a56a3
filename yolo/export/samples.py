"""Real inputs for exporting and checking a model: a given image, or drawn shapes-dataset scenes."""
from __future__ import annotations

from pathlib import Path
from typing import List, Union

import cv2
import numpy as np
import torch

from yolo.data.shapes import render_sample
from yolo.files.images import load_image
from yolo.inference.preprocess import preprocess
from yolo.ops.sizes import ImageSize


def second_size(img_size: ImageSize, stride: int) -> ImageSize:
    """Another valid input size (both sides changed, non-square) to check a dynamic-size export."""
    h, w = img_size
    return (h - stride if h > 2 * stride else h + stride, w + stride)


def sample_input(img_size: ImageSize, batch_size: int = 1, image: Union[str, Path, np.ndarray, None] = None,
                 channels: int = 3, seed: int = 0) -> torch.Tensor:
    """A real network input ``Float[batch_size, channels, h, w]`` (RGB 0..1, contiguous NCHW).

    With ``image`` (a path or a BGR ``uint8`` array) every item is that image, letterboxed as the
    :class:`yolo.inference.detector.Detector` does, the second one mirrored. Without it the items are drawn
    shapes-dataset scenes (deterministic in ``seed``), so a check needs no file.
    """
    if image is not None:
        base = load_image(image) if isinstance(image, (str, Path)) else image
        images = [base if i % 2 == 0 else np.ascontiguousarray(base[:, ::-1]) for i in range(batch_size)]
    else:
        images = []
        for i in range(batch_size):
            rgb, _, _ = render_sample(np.random.default_rng([seed, 7, i]), size_range=(256, 480), max_shapes=4)
            images.append(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    batch, _ = preprocess(images, img_size, mode="letterbox")
    batch = batch.contiguous()
    if channels != 3:  # grayscale or other networks: repeat/trim the RGB planes
        batch = batch.mean(1, keepdim=True).expand(-1, channels, -1, -1).contiguous()
    return batch


def check_inputs(img_size: ImageSize, stride: int, image: Union[str, Path, np.ndarray, None] = None, channels: int = 3,
                 dynamic: bool = False) -> List[torch.Tensor]:
    """The inputs a written file is checked on (see :func:`sample_input`): batch 1 and batch 2 at ``img_size``,
    and for a dynamic-size export batch 2 at :func:`second_size` too."""
    inputs = [sample_input(img_size, 1, image, channels), sample_input(img_size, 2, image, channels)]
    if dynamic:
        inputs.append(sample_input(second_size(img_size, stride), 2, image, channels))
    return inputs
