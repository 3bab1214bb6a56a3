"""Darknet's ``resize_image`` (src/image.c) on batches of ``uint8`` images, as torch ops on any device: the resize
``detector test`` and ``detector map`` feed the network with (``letterbox_image`` resizes with it too).

Darknet converts the decoded bytes to float (``byte / 255.``) and resizes in two passes, in float32:

* along x: ``part[c] = (1 - dx) * im[ix] + dx * im[ix + 1]`` with ``sx = c * w_scale``, ``ix = (int) sx``,
  ``dx = sx - ix`` and ``w_scale = (float)(W - 1) / (w - 1)`` (corners aligned); the last column (and every
  column of a one-column image) is the image's last column as it is;
* along y: ``out[r] = (1 - dy) * part[iy]``, then ``out[r] += dy * part[iy + 1]`` except on the last row (and
  on a one-row image).

Each output pixel thus blends at most four source pixels, the same ones for every image of a size: the tables
(:func:`resize_tables`, one per input and output size, cached) hold the source rows and columns and the float32
weights, with Darknet's special cases as weights 1 and 0 (``a * 1 + b * 0 == a`` exactly for the finite,
non-negative pixels). Only the pixels the resize reads are gathered (as ``uint8``) and converted; every float32
operation is C's, in C's order and correctly rounded (no fused multiply-add, no reordering; on CUDA the division
is by a device tensor, never by a host scalar, which CUDA turns into a multiplication by the reciprocal), so the
values are Darknet's bit for bit (``tests/test_darknet_resize.py`` compares them with Darknet's own functions).
On the CPU, :func:`darknet_resize_image` hands the tables to a C kernel (:mod:`yolo.ops.darknet_resize_kernel`,
the same operations in one sweep) where a C compiler built it, and runs its numpy path of the same bits otherwise.
"""
from __future__ import annotations

import threading
from functools import lru_cache
from typing import Optional, Tuple

import cv2
import numpy as np
import torch

from yolo.ops.darknet_resize_kernel import resize_into
from yolo.ops.sizes import ImageSize

__all__ = ["ResizeTables", "darknet_resize", "darknet_resize_image", "resize_tables"]

F32 = np.float32
# Pass 1 runs once per distinct source row when at most this fraction of the rows read are distinct (below it,
# the rows saved outweigh picking the rows for pass 2; measured on 1-thread CPU time)
SHARED_ROWS = 0.75


def _axis_table(n_in: int, n_out: int, copy_last: bool) -> Tuple[np.ndarray, np.ndarray]:
    """One axis of ``resize_image``: ``(Int64[2, n_out] source indices, Float32[2, n_out] weights)``, the first
    row the near (left/upper) pixel, the second the far one.

    ``copy_last``: the x axis, where the last output column (every column of a one-pixel input) is the last
    input pixel with weights 1 and 0; on the y axis the last output row (every row of a one-pixel input) keeps
    only its near term (far weight 0)."""
    out = np.arange(n_out)
    if n_out > 1 and n_in > 1:
        scale = F32(n_in - 1) / F32(n_out - 1)  # (float)(im.w - 1) / (w - 1)
        position = out.astype(F32) * scale  # c * w_scale: the int converted to float, times the float
        near = position.astype(np.int64)  # (int) truncates the non-negative position
        fraction = position - near.astype(F32)
    else:  # an output of one pixel reads position 0; an input of one pixel is copied (Darknet's branches)
        near, fraction = np.zeros(n_out, np.int64), np.zeros(n_out, F32)
    near = np.minimum(near, n_in - 1)
    far = np.minimum(near + 1, n_in - 1)
    weights = np.stack([F32(1) - fraction, fraction]).astype(F32)
    index = np.stack([near, far])
    last = slice(None) if n_in == 1 else slice(-1, None)  # the pixels Darknet does not blend
    if copy_last:
        index[:, last] = n_in - 1
        weights[0, last], weights[1, last] = F32(1), F32(0)
    else:
        weights[1, last] = F32(0)
    return index, weights


class ResizeTables:
    """The sources and weights of ``resize_image`` from ``in_hw`` to ``out_hw`` (both ``(height, width)``).

    ``rows``: Int64[2, h] the upper and lower source row of each output row; ``row_weights``: Float32[2, h];
    ``cols``: Int64[2, w] the left and right source column of each output column; ``col_weights``:
    Float32[2, w]. ``source_rows``: Int64[n] the rows pass 1 of :func:`darknet_resize_image` runs on, and
    ``source_of_row``: Int64[2, h] where the upper and the lower row of each output row lie among them (None when
    ``source_rows`` is ``rows`` flattened: the upper rows, then the lower ones). Tensors per device are made on
    first use and kept.
    """

    def __init__(self, in_hw: ImageSize, out_hw: ImageSize):
        self.in_hw, self.out_hw = tuple(in_hw), tuple(out_hw)
        # contiguous: the C kernel (yolo.ops.darknet_resize_kernel) reads them as they are
        self.rows, self.row_weights = map(np.ascontiguousarray, _axis_table(in_hw[0], out_hw[0], copy_last=False))
        self.cols, self.col_weights = map(np.ascontiguousarray, _axis_table(in_hw[1], out_hw[1], copy_last=True))
        self._on = {}
        # The source rows pass 1 runs on: each distinct row once when neighbouring output rows share enough of
        # them (upscaling, or downscaling by less than 2), else the upper rows then the lower ones as read.
        distinct, position = np.unique(self.rows, return_inverse=True)
        if len(distinct) <= SHARED_ROWS * self.rows.size:
            self.source_rows = distinct
            self.source_of_row = torch.from_numpy(position.reshape(2, -1))
        else:
            self.source_rows, self.source_of_row = self.rows.reshape(-1), None

    def on(self, device: torch.device) -> Tuple[torch.Tensor, ...]:
        """``(rows, cols, row_weights, col_weights)`` as tensors on ``device``, weights shaped to broadcast
        over ``[N, C, 2?, h, w]``: row weights ``[2, h, 1]``, column weights ``[w]`` each."""
        key = str(device)
        if key not in self._on:
            as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
            self._on[key] = (as_tensor(self.rows.reshape(-1)), as_tensor(self.cols),
                             as_tensor(self.row_weights)[:, :, None], as_tensor(self.col_weights))
        return self._on[key]

    def interleaved_weights(self) -> Tuple[torch.Tensor, ...]:
        """``(left, right, upper, lower)`` CPU weights for ``H x W x 3`` pixels seen as rows of ``W * 3`` values:
        the column weights repeated for the three channels (Float32[w * 3] each), the row weights Float32[h, 1]."""
        if "interleaved" not in self._on:
            left, right = (torch.from_numpy(np.repeat(self.col_weights[k], 3)) for k in (0, 1))
            upper, lower = (torch.from_numpy(np.ascontiguousarray(self.row_weights[k][:, None])) for k in (0, 1))
            self._on["interleaved"] = (left, right, upper, lower)
        return self._on["interleaved"]


@lru_cache(maxsize=64)
def resize_tables(in_hw: ImageSize, out_hw: ImageSize) -> ResizeTables:
    """The :class:`ResizeTables` for one pair of sizes (cached: a video or a dataset repeats a few sizes)."""
    return ResizeTables(tuple(int(v) for v in in_hw), tuple(int(v) for v in out_hw))


def darknet_resize(pixels: torch.Tensor, out_hw: ImageSize) -> torch.Tensor:
    """Darknet's ``load_image`` conversion (``byte / 255.``) and ``resize_image`` of ``uint8`` images.

    Args:
        pixels: ``UInt8[N, C, H, W]`` (any memory format, any device).
        out_hw: the output ``(h, w)``.

    Returns:
        ``Float32[N, C, h, w]`` 0..1 on ``pixels``' device, equal to Darknet's float image; the converted input
        when the size does not change (Darknet's ``copy_image``).
    """
    h, w = int(out_hw[0]), int(out_hw[1])
    # the divisor as a device tensor: CUDA divides by a host scalar as a multiplication by its reciprocal
    levels = torch.full((), 255.0, device=pixels.device)
    if tuple(pixels.shape[-2:]) == (h, w):
        return pixels.float().div_(levels)
    rows, cols, row_weights, col_weights = resize_tables(tuple(pixels.shape[-2:]), (h, w)).on(pixels.device)
    n, c = pixels.shape[:2]
    # The rows read (upper ones, then lower ones), then the columns of each: uint8 gathers, then one conversion.
    gathered = pixels.index_select(2, rows).index_select(3, cols.reshape(-1))  # [N, C, 2h, 2w]
    values = gathered.float().div_(levels).view(n, c, 2, h, 2, w)
    # Pass 1, along x: (1 - dx) * left + dx * right (C's two products and one sum, each rounded).
    part = values[:, :, :, :, 0].mul(col_weights[0]).add_(values[:, :, :, :, 1].mul(col_weights[1]))
    # Pass 2, along y: (1 - dy) * upper, then + dy * lower.
    return part[:, :, 0].mul(row_weights[0]).add_(part[:, :, 1].mul(row_weights[1]))


_WORKSPACE = threading.local()


def _scratch(slot: int, shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A buffer kept (per thread) for the next image of the same size: the first touch of fresh pages costs more
    than the arithmetic on them. Its contents never leave this module."""
    buffers = _WORKSPACE.__dict__.setdefault("buffers", {})
    buffer = buffers.get(slot)
    if buffer is None or buffer.shape != tuple(shape) or buffer.dtype != dtype:
        buffer = buffers[slot] = np.empty(shape, dtype)
    return buffer


def darknet_resize_image(image: np.ndarray, out_hw: ImageSize, bgr: bool = True,
                         out: Optional[torch.Tensor] = None, kernel: bool = True) -> torch.Tensor:
    """:func:`darknet_resize` of one ``uint8`` ``H x W x 3`` image on the CPU, to RGB: the fast path of the
    Detector and of evaluation (the same tables and the same float32 operations, on interleaved pixels).

    With ``kernel`` (the default) the C kernel of :mod:`yolo.ops.darknet_resize_kernel` does it where it is built
    (a C compiler, once per cache folder); else, or with ``kernel=False``, numpy and torch give the same bits.
    The pixels are packed four bytes to a ``uint32`` (RGBA) so that gathering the rows and the columns the
    resize reads moves whole pixels (the columns first when the image has fewer rows than the gather reads);
    the bytes are cast to float32 and divided by 255 (cheaper than a float lookup table); pass 1 runs once per
    source row when neighbouring output rows share rows (``ResizeTables.source_rows``), and the float32 passes
    run on rows of ``w * 3`` values, in buffers kept for the next image of the size.

    Args:
        image: ``uint8`` ``H x W x 3``, BGR (``bgr=True``, as OpenCV decodes) or RGB.
        out_hw: the output ``(h, w)``.
        out: where to write, ``Float32[h, w, 3]`` whose rows are ``w * 3`` contiguous values (a view into a
            batch is fine); a new tensor when None.

    Returns:
        ``Float32[h, w, 3]`` RGB 0..1 (``out`` when given), Darknet's float image.
    """
    h, w = int(out_hw[0]), int(out_hw[1])
    out = torch.empty((h, w, 3), dtype=torch.float32) if out is None else out
    if kernel and resize_into(image, resize_tables(image.shape[:2], (h, w)), bgr, out):
        return out
    flat = out.view(h, w * 3)
    if image.shape[:2] == (h, w):  # Darknet's copy_image: the conversion alone
        rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if bgr else image
        flat.copy_(torch.from_numpy(np.ascontiguousarray(rgb)).view(h, w * 3)).div_(255.0)
        return out
    ih, iw = image.shape[:2]
    tables = resize_tables((ih, iw), (h, w))
    sources, cols = tables.source_rows, tables.cols.reshape(-1)
    n = len(sources)
    image = np.ascontiguousarray(image)
    to_rgba = cv2.COLOR_BGR2RGBA if bgr else cv2.COLOR_RGB2RGBA
    read = _scratch(2, (n, 2 * w), np.uint32)
    if ih < n:  # fewer pixels to gather one by one along the columns first
        packed = cv2.cvtColor(image, to_rgba, dst=_scratch(0, (ih, iw, 4), np.uint8)).view(np.uint32)[..., 0]
        np.take(np.take(packed, cols, axis=1, out=_scratch(1, (ih, 2 * w), np.uint32), mode="clip"), sources,
                axis=0, out=read, mode="clip")
    else:  # the rows read, then only they packed
        rows_read = np.take(image, sources, axis=0, out=_scratch(1, (n, iw, 3), np.uint8), mode="clip")
        packed = cv2.cvtColor(rows_read, to_rgba, dst=_scratch(0, (n, iw, 4), np.uint8)).view(np.uint32)[..., 0]
        np.take(packed, cols, axis=1, out=read, mode="clip")
    rgb = cv2.cvtColor(read.view(np.uint8).reshape(n, 2 * w, 4), cv2.COLOR_RGBA2RGB,
                       dst=_scratch(3, (n, 2 * w, 3), np.uint8))
    # (float)byte / 255. (C divides in double, then rounds to float): the cast, then the float32 division, whose
    # correctly rounded quotient is that value for each of the 256 bytes; the left and the right pixels of each
    # row apart, each block contiguous
    values = _scratch(4, (2, n, w * 3), np.float32)
    np.copyto(values.transpose(1, 0, 2), rgb.reshape(n, 2, w * 3), casting="unsafe")
    values = torch.from_numpy(values).div_(255.0)
    left, right, upper, lower = tables.interleaved_weights()
    # Pass 1, along x, once per source row: (1 - dx) * left + dx * right.
    part = values[0].mul_(left).add_(values[1].mul_(right))
    if tables.source_of_row is None:  # the upper rows, then the lower ones
        above, below = part[:h], part[h:]
    else:  # rows shared by neighbouring output rows: computed once, picked here
        above, below = (torch.index_select(part, 0, tables.source_of_row[k],
                                           out=torch.from_numpy(_scratch(5 + k, (h, w * 3), F32))) for k in (0, 1))
    # Pass 2, along y: (1 - dy) * upper, then + dy * lower.
    torch.mul(above, upper, out=flat).add_(below.mul_(lower))
    return out
