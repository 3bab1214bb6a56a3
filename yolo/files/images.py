"""The one image reader: files to ``uint8`` pixels (:func:`load_image`), in-memory images checked and made
BGR (:func:`as_bgr`), and the check and size of an image file that dataset scans use (:func:`image_file_size`).

Pixels are ``numpy`` ``uint8`` ``H x W x 3``, BGR as OpenCV reads them unless ``rgb`` is asked for; EXIF
rotations are applied (``cv2.imdecode`` does, as ``cv2.imread``). Shapes are ``(height, width)``.

Two decoders (:data:`DECODERS`): ``opencv`` (the default: ``cv2.imdecode``, as Darknet built with OpenCV reads
images) and ``stb`` (stb_image, as Darknet's default build reads them, :mod:`yolo.files.stb_decode`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple, Union

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from yolo.errors import ImageReadError
from yolo.files.jpeg_end import jpeg_is_complete
from yolo.files.stb_decode import stb_decode, stb_library

__all__ = ["DECODERS", "IMAGE_SUFFIXES", "ready_decoder", "DATASET_IMAGE_SUFFIXES", "MIN_IMAGE_SIDE", "load_image", "decode_image", "as_bgr",
           "image_file_size"]

# The photo formats a dataset folder is scanned for (their headers are checked by PIL before training).
DATASET_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
# Everything detection accepts from a folder or glob: the above and the other formats OpenCV decodes (a GIF's
# first frame, as for a GIF named alone).
IMAGE_SUFFIXES = DATASET_IMAGE_SUFFIXES + (".ppm", ".pgm", ".pbm", ".jp2", ".gif")
# How a file becomes pixels: OpenCV's imdecode (Darknet's OpenCV build) or stb_image (Darknet's default build).
DECODERS = ("opencv", "stb")
# Smaller images are reported as unusable by dataset scans.
MIN_IMAGE_SIDE = 2


def ready_decoder(decode: str) -> str:
    """``decode`` (one of :data:`DECODERS`) made ready before any image is read: stb_image is compiled now,
    once per cache folder, so that a missing C compiler is said at the start
    (:class:`yolo.errors.DecoderUnavailableError`). Returns ``decode``."""
    if decode not in DECODERS:
        raise ValueError(f"unknown decode {decode!r}: use 'opencv' or 'stb'")
    if decode == "stb":
        stb_library()
    return decode


def load_image(path: Union[str, Path], rgb: bool = False, decode: str = "opencv") -> np.ndarray:
    """Read an image file as ``uint8`` ``H x W x 3``, BGR (or RGB with ``rgb``), decoded by OpenCV
    (``decode="opencv"``, :func:`decode_image`) or stb_image (``decode="stb"``, :func:`yolo.files.stb_decode.stb_decode`:
    Darknet's default build's pixels, no EXIF rotation).

    Raises :class:`yolo.errors.ImageReadError` naming the path when the file is missing, unreadable or not
    an image.
    """
    path = Path(path)
    try:
        data = np.fromfile(str(path), dtype=np.uint8)  # works for any file name, unlike cv2.imread
    except OSError as exc:
        raise ImageReadError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    if decode == "stb":
        image = stb_decode(data, path)  # RGB
        return image if rgb else cv2.cvtColor(image, cv2.COLOR_RGB2BGR, dst=image)
    if decode != "opencv":
        raise ValueError(f"unknown decode {decode!r}: use 'opencv' or 'stb'")
    image = decode_image(data, path)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=image) if rgb else image  # in place: no second image


def decode_image(data: np.ndarray, path: Union[str, Path]) -> np.ndarray:
    """The file bytes ``data`` (``UInt8[n]``) of ``path`` decoded as OpenCV does, BGR ``uint8`` ``H x W x 3``
    (EXIF rotation applied). Raises :class:`yolo.errors.ImageReadError` naming ``path`` when they are not a
    decodable image, and :class:`MemoryError` when OpenCV had no memory for it (not a fault of the file)."""
    try:
        image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    except cv2.error as exc:  # a header claiming more pixels than OpenCV decodes (60000x60000), or worse
        reason = getattr(exc, "err", "") or str(exc).strip().splitlines()[-1]
        if "Insufficient memory" in reason or "Failed to allocate" in reason:
            raise MemoryError(f"{path}: {reason}") from None
        if "MAX_IMAGE_PIXELS" in reason or "MAX_IMAGE_WIDTH" in reason or "MAX_IMAGE_HEIGHT" in reason:
            reason = "its header claims more pixels than OpenCV decodes (2^30, or a side over 2^20)"
        raise ImageReadError(f"{path}: cannot decode the image: {reason}") from None
    if image is None:
        raise ImageReadError(f"{path}: not a readable image (corrupt or unsupported format)")
    return image


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
    """``((height, width), None)`` for a readable image, ``(None, reason)`` for a file that is no usable image.

    The file is checked by PIL (its structure), a JPEG must reach its end-of-image marker (a truncated download
    decodes as a gray block; bytes after the marker are fine, :mod:`yolo.files.jpeg_end`), and it is decoded by
    the reader that training and detection use (:func:`decode_image`), whose image gives the size: what PIL
    reads but OpenCV cannot (a PCX named ``.jpg``) is refused here, and the size is the one every load returns
    (EXIF orientations as OpenCV applies them, for every format).

    A verdict is only ever about the file's content: what may go otherwise next time (an ``OSError`` with an
    errno: too many open files, an I/O error, a file that vanished; a :class:`MemoryError`) is raised, not
    returned, so that a scan does not keep it as the image's verdict.
    """
    if not path.exists():
        return None, "image file not found"
    try:
        with Image.open(path) as im:
            im.verify()  # structure check; the image object is unusable afterwards
        with Image.open(path) as im:
            fmt = im.format
    except MemoryError:
        raise
    except OSError as e:
        if e.errno is not None:  # the file system's error, not the file's content
            raise
        if isinstance(e, UnidentifiedImageError):
            return None, "not an image (unreadable or unknown format)"
        return None, f"corrupt image ({type(e).__name__}: {e})"
    except Exception as e:  # PIL raises many types for broken files
        return None, f"corrupt image ({type(e).__name__}: {e})"
    data = np.fromfile(str(path), dtype=np.uint8)
    if fmt in ("JPEG", "MPO") and not jpeg_is_complete(data.tobytes()):
        return None, "corrupt JPEG: truncated (no end-of-image marker)"
    try:
        height, width = decode_image(data, path).shape[:2]
    except ImageReadError:
        return None, f"not an image OpenCV decodes ({fmt} file; training and detection read images with OpenCV)"
    if min(width, height) < MIN_IMAGE_SIDE:
        return None, f"image too small ({width}x{height})"
    return (int(height), int(width)), None
