"""The one image reader: files to ``uint8`` pixels (:func:`load_image`), in-memory images checked and made
BGR (:func:`as_bgr`), and the header-only size check that dataset scans use (:func:`image_file_size`).

Pixels are ``numpy`` ``uint8`` ``H x W x 3``, BGR as OpenCV reads them unless ``rgb`` is asked for; EXIF
rotations are applied (``cv2.imdecode`` does, as ``cv2.imread``). Shapes are ``(height, width)``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple, Union

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from yolo.errors import ImageReadError

__all__ = ["IMAGE_SUFFIXES", "DATASET_IMAGE_SUFFIXES", "MIN_IMAGE_SIDE", "load_image", "as_bgr", "image_file_size"]

# The photo formats a dataset folder is scanned for (their headers are checked by PIL before training).
DATASET_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
# Everything detection accepts from a folder or glob: the above and the other formats OpenCV decodes (a GIF's
# first frame, as for a GIF named alone).
IMAGE_SUFFIXES = DATASET_IMAGE_SUFFIXES + (".ppm", ".pgm", ".pbm", ".jp2", ".gif")
# Smaller images are reported as unusable by dataset scans.
MIN_IMAGE_SIDE = 2


def load_image(path: Union[str, Path], rgb: bool = False) -> np.ndarray:
    """Read an image file as ``uint8`` ``H x W x 3``, BGR (or RGB with ``rgb``).

    Raises :class:`yolo.errors.ImageReadError` naming the path when the file is missing, unreadable or not
    an image.
    """
    path = Path(path)
    try:
        data = np.fromfile(str(path), dtype=np.uint8)  # works for any file name, unlike cv2.imread
    except OSError as exc:
        raise ImageReadError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    try:
        image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    except cv2.error as exc:  # a header claiming more pixels than OpenCV decodes (60000x60000), or worse
        reason = getattr(exc, "err", "") or str(exc).strip().splitlines()[-1]
        if "MAX_IMAGE_PIXELS" in reason or "MAX_IMAGE_WIDTH" in reason or "MAX_IMAGE_HEIGHT" in reason:
            reason = "its header claims more pixels than OpenCV decodes (2^30, or a side over 2^20)"
        raise ImageReadError(f"{path}: cannot decode the image: {reason}") from None
    if image is None:
        raise ImageReadError(f"{path}: not a readable image (corrupt or unsupported format)")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=image) if rgb else image  # in place: no second image


def as_bgr(image: np.ndarray, where: str = "image") -> np.ndarray:
    """Check an in-memory image: ``H x W x 3`` BGR ``uint8`` (gray ``H x W`` and BGRA are converted)."""
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{where}: expected a path or a numpy array, got {type(image).__name__}")
    # Checked before converting: OpenCV's colour conversion fails with its own traceback on other dtypes and
    # on empty arrays.
    gray = image.ndim == 2
    channels = None if gray else (image.shape[2] if image.ndim == 3 else None)
    if not (gray or channels in (3, 4)) or image.shape[0] == 0 or image.shape[1] == 0:
        raise ValueError(f"{where}: expected an H x W x 3 BGR image, got shape {image.shape}")
    if image.dtype != np.uint8:
        raise ValueError(f"{where}: expected uint8 pixels, got {image.dtype}")
    if gray:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if channels == 4:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    return image


def image_file_size(path: Path) -> Tuple[Optional[Tuple[int, int]], Optional[str]]:
    """``((height, width), None)`` for a readable image, ``(None, reason)`` otherwise.

    Reads the header only (PIL), checks that JPEG files end with their end-of-image marker
    (a truncated download decodes as a gray block), and swaps the sides for EXIF rotations,
    as ``cv2.imread`` applies them when loading.
    """
    try:
        with Image.open(path) as im:
            im.verify()  # structure check; the image object is unusable afterwards
        with Image.open(path) as im:
            width, height = im.size
            fmt = im.format
            orientation = im.getexif().get(0x0112, 1)
    except FileNotFoundError:
        return None, "image file not found"
    except UnidentifiedImageError:
        return None, "not an image (unreadable or unknown format)"
    except Exception as e:  # PIL raises many types for broken files
        return None, f"corrupt image ({type(e).__name__}: {e})"
    if fmt == "JPEG":
        with open(path, "rb") as f:
            f.seek(-2, 2)
            if f.read() != b"\xff\xd9":
                return None, "corrupt JPEG: truncated (no end-of-image marker)"
    if min(width, height) < MIN_IMAGE_SIDE:
        return None, f"image too small ({width}x{height})"
    if orientation in (5, 6, 7, 8):
        width, height = height, width
    return (int(height), int(width)), None
