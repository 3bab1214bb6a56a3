"""Darknet's default decode: stb_image, as ``load_image_stb`` (src/image.c) reads a file in Darknet built
without OpenCV (``OPENCV=0``, its default). :func:`stb_decode` gives the same bytes.

stb_image is a C header (public domain / MIT, by Sean Barrett). Its decoder differs from libjpeg's, which
OpenCV uses (the IDCT and the chroma upsampling: pixels a level or so apart), so only stb_image itself gives
Darknet's pixels; no maintained Python package exposes it. The package carries the copy Darknet ships
(``stb/stb_image.h``, v2.30) and a ten-line wrapper (``stb/stb_decode.c``), compiled on first use with the
system C compiler as Darknet compiles it (stb's defaults: every format, SSE2 on x86-64; the integer decoders give
the same bytes at any optimisation level) by :func:`yolo.files.native.build_library` (into the user cache folder,
atomically, loaded with ``ctypes``).
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from typing import Optional, Union

import numpy as np

from yolo.errors import DecoderUnavailableError, ImageReadError, NativeBuildError
from yolo.files.native import build_library

__all__ = ["stb_decode", "stb_library"]

SOURCES = Path(__file__).resolve().parent / "stb"
FLAGS = ["-O2"]  # Darknet: -Ofast; the decoders are integer code, the bytes are the same
_LOCK = threading.Lock()
_LIBRARY: Optional[ctypes.CDLL] = None


def _unavailable(error: NativeBuildError) -> DecoderUnavailableError:
    """The build's failure in the terms of ``--decode stb``."""
    if error.reason == "no compiler":
        return DecoderUnavailableError("--decode stb needs a C compiler to build stb_image once (none found: "
                                       "install gcc, or set CC), or use --decode opencv")
    if error.reason == "cache folder":
        return DecoderUnavailableError(f"{error.details['folder']}: cannot write the stb_image decoder there "
                                       f"({error.details['why']}); set YOLO_CACHE_DIR to a writable folder")
    return DecoderUnavailableError(f"{error.details['compiler']} could not build stb_image "
                                   f"({error.details['source']}): {error.details['why']}")


def stb_library() -> ctypes.CDLL:
    """The compiled decoder, built on first use (:class:`DecoderUnavailableError` when it cannot be)."""
    global _LIBRARY
    with _LOCK:
        if _LIBRARY is None:
            try:
                library = build_library("stb_image", SOURCES / "stb_decode.c", FLAGS,
                                        depends=[SOURCES / "stb_image.h"])
            except NativeBuildError as error:
                raise _unavailable(error) from None
            library.yolo_stb_decode.restype = ctypes.POINTER(ctypes.c_ubyte)
            library.yolo_stb_decode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                                ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_char_p)]
            library.yolo_stb_free.restype = None
            library.yolo_stb_free.argtypes = [ctypes.c_void_p]
            _LIBRARY = library
        return _LIBRARY


def stb_decode(data: np.ndarray, path: Union[str, Path]) -> np.ndarray:
    """The file bytes ``data`` (``UInt8[n]``) of ``path`` decoded as Darknet's ``load_image_color`` does without
    OpenCV: ``stbi_load(..., 3)``, three channels whatever the file has (gray repeated, alpha dropped), no EXIF
    rotation. Returns ``uint8`` ``H x W x 3`` **RGB**. Raises :class:`yolo.errors.ImageReadError` naming ``path``
    with stb_image's reason when the bytes are not an image it decodes (Darknet goes on with a 10 x 10 image)."""
    library = stb_library()
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if not data.size:
        raise ImageReadError(f"{path}: not a readable image (empty file)")
    if data.size > np.iinfo(np.int32).max:
        raise ImageReadError(f"{path}: not a readable image for stb_image (over 2 GiB)")
    width, height, reason = ctypes.c_int(), ctypes.c_int(), ctypes.c_char_p()
    pixels = library.yolo_stb_decode(data.ctypes.data, int(data.size), ctypes.byref(width), ctypes.byref(height),
                                     ctypes.byref(reason))
    if not pixels:
        why = (reason.value or b"unknown").decode("ascii", "replace")
        raise ImageReadError(f"{path}: not a readable image (stb_image: {why})")
    try:
        shape = (height.value, width.value, 3)
        return np.ctypeslib.as_array(pixels, shape=shape).copy()
    finally:
        library.yolo_stb_free(pixels)
