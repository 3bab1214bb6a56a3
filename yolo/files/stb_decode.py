"""Darknet's default decode: stb_image, as ``load_image_stb`` (src/image.c) reads a file in Darknet built
without OpenCV (``OPENCV=0``, its default). :func:`stb_decode` gives the same bytes.

stb_image is a C header (public domain / MIT, by Sean Barrett). Its decoder differs from libjpeg's, which
OpenCV uses (the IDCT and the chroma upsampling: pixels a level or so apart), so only stb_image itself gives
Darknet's pixels; no maintained Python package exposes it. The package carries the copy Darknet ships
(``stb/stb_image.h``, v2.30) and a ten-line wrapper (``stb/stb_decode.c``), compiled on first use with the
system C compiler (``$CC``, else ``cc``, else ``gcc``) as Darknet compiles it (stb's defaults: every format,
SSE2 on x86-64; the integer decoders give the same bytes at any optimisation level) into the user cache folder
(:func:`yolo.files.cache_dir.user_cache_dir`), named by a hash of the sources, the flags and the platform, and
loaded with ``ctypes``. The library is written to a temporary name and renamed into place, so processes that
compile at the same time each load a complete library.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional, Union

import numpy as np

from yolo.errors import DecoderUnavailableError, ImageReadError
from yolo.files.cache_dir import user_cache_dir

__all__ = ["stb_decode", "stb_library"]

SOURCES = Path(__file__).resolve().parent / "stb"
FLAGS = ["-O2", "-fPIC", "-shared"]  # Darknet: -Ofast; the decoders are integer code, the bytes are the same
_LOCK = threading.Lock()
_LIBRARY: Optional[ctypes.CDLL] = None


def _compiler() -> str:
    """The C compiler to build with, or a :class:`DecoderUnavailableError` saying none was found."""
    for name in (os.environ.get("CC"), "cc", "gcc"):
        found = shutil.which(name) if name else None
        if found:
            return found
    raise DecoderUnavailableError("--decode stb needs a C compiler to build stb_image once (none found: "
                                  "install gcc, or set CC), or use --decode opencv")


def _library_path() -> Path:
    """Where the compiled decoder of these sources and flags for this machine's architecture is kept."""
    digest = hashlib.sha256()
    for name in ("stb_image.h", "stb_decode.c"):
        digest.update((SOURCES / name).read_bytes())
    digest.update(" ".join([*FLAGS, platform.system(), platform.machine()]).encode())
    return user_cache_dir() / "stb_image" / f"stb_decode-{digest.hexdigest()[:16]}.so"


def _build(compiler: str, target: Path) -> None:
    """Compile the wrapper into ``target``: written under a temporary name beside it, then renamed (atomic)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".stb_decode-", suffix=".so", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise DecoderUnavailableError(f"{target.parent}: cannot write the stb_image decoder there "
                                      f"({exc.strerror or exc}); set YOLO_CACHE_DIR to a writable folder") from None
    try:
        run = subprocess.run([compiler, *FLAGS, "-o", temporary, str(SOURCES / "stb_decode.c")],
                             capture_output=True, text=True)
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["no message"])[-1]
            raise DecoderUnavailableError(f"{compiler} could not build stb_image ({SOURCES / 'stb_decode.c'}): "
                                          f"{last}")
        os.chmod(temporary, 0o755)  # mkstemp's 0600: a shared cache folder serves other users too
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def stb_library() -> ctypes.CDLL:
    """The compiled decoder, built on first use (:class:`DecoderUnavailableError` when it cannot be)."""
    global _LIBRARY
    with _LOCK:
        if _LIBRARY is None:
            path = _library_path()
            if not path.is_file():  # a compiler is needed only once per cache folder
                _build(_compiler(), path)
            library = ctypes.CDLL(str(path))
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
