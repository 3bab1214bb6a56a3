"""Darknet's resize of one image on the CPU in C (``darknet_resize.c``): the same tables, the same float32
operations in the same order as :func:`yolo.ops.darknet_resize.darknet_resize_image`'s numpy path, the same bits,
in one pass over the output instead of one pass per operation (a few times faster; as fast as ``cv2.resize``).
An output of at least ``2 * BAND_ROWS`` rows is cut into bands of rows, one per torch thread, resized at once
(ctypes releases the GIL during the call); each output row depends only on its own table entries, so any split
gives the same bits.

The C file is compiled on first use by :func:`yolo.files.native.build_library` with ``-O3 -ffp-contract=off
-fno-fast-math`` (no fused multiply-add: each product and each sum rounded to float, as Darknet's C does; no
``-march``, so the cached library runs on any machine of the architecture). Where it cannot be built (no C
compiler, a cache folder that cannot be written), :func:`resize_into` says so by returning False and the caller's
numpy path gives the same values: nothing changes for the user but the speed.
"""
from __future__ import annotations

import ctypes
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from yolo.errors import NativeBuildError
from yolo.files.native import build_library

__all__ = ["kernel_library", "resize_into"]

SOURCE = Path(__file__).resolve().parent / "darknet_resize.c"
FLAGS = ["-O3", "-ffp-contract=off", "-fno-fast-math"]  # -O3: pass 2 vectorised, the same operations
_LOG = logging.getLogger(__name__)
_LOCK = threading.Lock()
_UNAVAILABLE = object()
_LIBRARY: object = None  # None: not tried yet; _UNAVAILABLE: tried, cannot be built here
_SCRATCH = threading.local()
_POOL: Optional[ThreadPoolExecutor] = None  # the bands after the first, for images of at least BAND_ROWS rows each
_POOL_PID = 0
BAND_ROWS = 128

_POINTER = ctypes.c_void_p
_STEP = ctypes.c_ssize_t


def kernel_library() -> Optional[ctypes.CDLL]:
    """The compiled kernel, built on first use; None where it cannot be built (said once, at debug level)."""
    global _LIBRARY
    with _LOCK:
        if _LIBRARY is None:
            try:
                library = build_library("darknet_resize", SOURCE, FLAGS)
                library.yolo_darknet_resize.restype = None
                library.yolo_darknet_resize.argtypes = [_POINTER, _STEP, _STEP, _STEP, ctypes.c_int, ctypes.c_int,
                                                        _POINTER, _POINTER, _POINTER, _POINTER, _POINTER, _STEP,
                                                        _POINTER]
                _LIBRARY = library
            except (NativeBuildError, OSError) as error:
                _LOG.debug("Darknet's resize runs in numpy: its C kernel is not built (%s)", error)
                _LIBRARY = _UNAVAILABLE
        return None if _LIBRARY is _UNAVAILABLE else _LIBRARY


def _scratch(floats: int) -> np.ndarray:
    """Two source rows of pass 1, kept per thread for the next image."""
    buffer = getattr(_SCRATCH, "rows", None)
    if buffer is None or buffer.size < floats:
        buffer = _SCRATCH.rows = np.empty(floats, np.float32)
    return buffer


def resize_into(image: np.ndarray, tables, bgr: bool, out: torch.Tensor) -> bool:
    """Darknet's conversion and resize of ``image`` into ``out`` by the C kernel; False (``out`` untouched) where
    the kernel is not built or the arrays are not of a layout it takes.

    Args:
        image: ``uint8`` ``H x W x 3`` (any strides: reversed, broadcast and sliced views are read in place), BGR
            (``bgr=True``) or RGB.
        tables: the :class:`yolo.ops.darknet_resize.ResizeTables` from ``(H, W)`` to ``(h, w)``.
        out: ``Float32[h, w, 3]`` on the CPU whose rows are ``w * 3`` contiguous values (a view into a batch is
            fine); written with RGB 0..1.
    """
    h, w = tables.out_hw
    if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
            and image.shape[:2] == tables.in_hw and out.dtype == torch.float32 and out.device.type == "cpu"
            and tuple(out.shape) == (h, w, 3) and (h == 1 or out.stride(0) >= w * 3)
            and (w == 1 or out.stride(1) == 3) and out.stride(2) == 1 and not out.requires_grad):
        return False
    library = kernel_library()
    if library is None:
        return False
    if bgr:  # the red channel first: the view that reads the channels in reverse
        image = image[:, :, ::-1]
    bands = max(1, min(torch.get_num_threads(), h // BAND_ROWS))
    edges = [h * i // bands for i in range(bands + 1)]
    jobs = [(library, image, tables, out, first, last) for first, last in zip(edges[:-1], edges[1:])]
    if bands == 1:
        _resize_rows(*jobs[0])
    else:  # ctypes lets the GIL go during the call: the bands run at once on the process's threads
        others = [_pool().submit(_resize_rows, *job) for job in jobs[1:]]
        _resize_rows(*jobs[0])
        for other in others:
            other.result()
    return True


def _pool() -> ThreadPoolExecutor:
    """The threads of this process (a forked child, a loader worker say, has none of its parent's: it gets its
    own pool)."""
    global _POOL, _POOL_PID
    with _LOCK:
        if _POOL is None or _POOL_PID != os.getpid():
            _POOL = ThreadPoolExecutor(max_workers=max(1, torch.get_num_threads() - 1),
                                       thread_name_prefix="darknet-resize")
            _POOL_PID = os.getpid()
        return _POOL


def _resize_rows(library: ctypes.CDLL, image: np.ndarray, tables, out: torch.Tensor, first: int, last: int) -> None:
    """Output rows ``first:last`` (each row's value depends on its own table entries only: the same bits in any
    split)."""
    w = tables.out_hw[1]
    rows = np.ascontiguousarray(tables.rows[:, first:last])
    row_weights = np.ascontiguousarray(tables.row_weights[:, first:last])
    row_step, pixel_step, channel_step = image.strides
    scratch = _scratch(2 * w * 3)
    library.yolo_darknet_resize(image.ctypes.data, row_step, pixel_step, channel_step, last - first, w,
                                rows.ctypes.data, row_weights.ctypes.data, tables.cols.ctypes.data,
                                tables.col_weights.ctypes.data, out.data_ptr() + first * out.stride(0) * 4,
                                out.stride(0), scratch.ctypes.data)
