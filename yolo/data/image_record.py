"""One image of a dataset and its ground truth (:class:`ImageRecord`), and how a dataset reads an image
(:func:`read_image`): what every dataset layout (YOLO txt, COCO JSON, Pascal VOC XML) produces and reads."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Union

import numpy as np

from yolo.errors import DataError, ImageReadError
from yolo.files.images import load_image

PathLike = Union[str, os.PathLike]


@dataclass
class ImageRecord:
    """One usable image and its ground truth in original-image pixels."""

    path: str
    height: int
    width: int
    boxes: np.ndarray  # Float32[N, 4] xyxy, original pixels
    labels: np.ndarray  # Int64[N]
    image_id: int


def read_image(path: PathLike, decode: str = "opencv") -> np.ndarray:
    """RGB ``uint8`` ``H x W x 3`` (:func:`yolo.files.images.load_image`, ``decode`` one of its decoders); an
    unreadable file is a :class:`DataError` naming it, as every dataset problem."""
    try:
        return load_image(path, rgb=True, decode=decode)
    except ImageReadError as exc:
        if decode == "opencv":
            raise DataError("cannot read image (missing or corrupt)", path) from None
        raise DataError(str(exc).split(": ", 1)[-1], path) from None  # stb_image's reason, after the path
