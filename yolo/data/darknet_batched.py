"""Darknet's image steps (crop, resize, mirror, HSV distortion) for a whole mini-batch at once, in torch, on the
training device: the loader's workers keep only the cheap part of an item.

A training item of the ``darknet`` pipeline costs several JPEG decodes on a CPU, nearly all of it the float32
work of :mod:`yolo.data.darknet_augment` (the bilinear stretch and the HSV round trip). On CUDA that work is
split:

* in a worker, :func:`pending_image` takes the decoded ``uint8`` image and the item's draw and keeps the pixel
  rows and columns the resize reads (a view of the image, or a gathered copy when the image is much larger than
  the network input), the indices of the pixels each output pixel blends, their float32 weights and the HSV
  factors: a :class:`PendingImage`. No float work happens there.
* the collate packs a mini-batch of them into one :class:`PendingBatch` (one flat ``uint8`` buffer and small
  index tensors), which travels pinned and is copied to the device in one go;
* on the device, :meth:`PendingBatch.finish` gathers the pixels and runs Darknet's float32 arithmetic for every
  image of the batch in a few dozen kernels, and rounds to ``uint8`` levels: ``UInt8[B, 3, h, w]``.

The values are those of :func:`yolo.data.darknet_augment.augment_image_uint8` (and of the ``mixup`` blend),
bit for bit: the same float32 operations in the same order, each a separate correctly rounded operation (no
fused multiply-add; divisions by a device tensor, never by a host scalar, which CUDA would turn into a
multiplication by the reciprocal); Darknet's branches are weights of exactly 1 and 0 (``p * 1 + q * 0 == p``
for the finite, non-negative pixel values) or exact selections. tests/test_darknet_batched.py compares the two
on random draws, on the CPU and, where there is one, on a GPU.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from yolo.data.darknet_augment import F32, ONE, DarknetDraw, ImageSteps, _axis

__all__ = ["PENDING_IMAGES", "PendingBatch", "PendingImage", "SharedBuffers", "pending_image"]


@dataclass
class PendingImage:
    """One image of a training item with Darknet's image steps still to run (made in a worker).

    ``pixels``: ``uint8`` ``R x C x 3`` RGB, the part of the decoded image the resize reads (possibly a view);
    ``rows``: Int64[2, h] the row of ``pixels`` each output row blends from above (0) and below (1);
    ``cols``: Int64[2, w] the column each output column blends from the left (0) and the right (1), mirrored
    already; ``row_weights``: Float32[2, h] and ``col_weights``: Float32[2, w], the weights of those pixels
    (Darknet's ``1 - d`` and ``d``; 1 and 0 where Darknet copies a pixel instead of blending);
    ``hsv``: Float32[3] ``(dhue, dsat, dexp)``. ``partner``: the second image of a ``mixup`` item, else None.
    """

    pixels: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    row_weights: np.ndarray
    col_weights: np.ndarray
    hsv: np.ndarray
    partner: Optional["PendingImage"] = None

    @property
    def size_hw(self) -> Tuple[int, int]:
        """The network input ``(h, w)`` this image is made for."""
        return self.rows.shape[1], self.cols.shape[1]


def _blend_axis(positions: np.ndarray, n_in: int, n_out: int, copy_last: bool
                ) -> Tuple[np.ndarray, np.ndarray]:
    """Darknet's ``resize_image`` along one axis: the two source positions each output position blends and their
    float32 weights, ``(Int64[2, n_out], Float32[2, n_out])``.

    ``positions``: the crop's source index of each of its ``n_in`` pixels. ``copy_last``: the x axis, whose last
    output column (every column of a one-column crop) is the crop's last column as it is (weights 1 and 0); on
    the y axis the last output row (every row of a one-row crop) keeps only its upper term (lower weight 0).
    """
    left, fraction, right = _axis(n_in, n_out)
    index = np.stack([positions[left], positions[right]])
    weights = np.stack([ONE - fraction, fraction]).astype(F32)
    if copy_last:
        last = slice(None) if n_in == 1 else slice(-1, None)
        index[:, last] = positions[-1]
        weights[0, last], weights[1, last] = ONE, F32(0)
    else:
        weights[1, slice(None) if n_in == 1 else slice(-1, None)] = F32(0)
    return index, weights


def _kept_part(index: np.ndarray, limit: int):
    """Which pixels along one axis travel, for source indices ``index`` (Int64[2, n]): ``(index into the
    pixels kept, what to take from the image along that axis)``. The span read (a slice: a view) where it is at
    most ``limit`` pixels, else (an image much larger than the network input) the ``2 x n`` pixels read,
    gathered in that order."""
    low, high = int(index.min()), int(index.max()) + 1
    if high - low <= limit:
        return index - low, slice(low, high)
    return np.arange(index.size, dtype=np.int64).reshape(index.shape), index.ravel()


def pending_image(image: np.ndarray, draw: DarknetDraw, net_hw: Tuple[int, int]) -> PendingImage:
    """The worker's part of :func:`yolo.data.darknet_augment.augment_image_uint8`: ``image`` (``uint8``
    ``H x W x 3`` RGB) reduced to what the resize reads, with the indices and weights of ``draw``'s crop, mirror
    and stretch to ``net_hw = (h, w)`` and its HSV factors. Pixels outside the image repeat its border (Darknet's
    ``crop_image``)."""
    ih, iw = image.shape[:2]
    h, w = int(net_hw[0]), int(net_hw[1])
    crop_h, crop_w = draw.crop_size((ih, iw))
    rows = np.clip(np.arange(crop_h) + draw.ptop, 0, ih - 1)
    cols = np.clip(np.arange(crop_w) + draw.pleft, 0, iw - 1)
    row_index, row_weights = _blend_axis(rows, crop_h, h, copy_last=False)
    col_index, col_weights = _blend_axis(cols, crop_w, w, copy_last=True)
    if draw.flip:  # flip_image after the resize: the output columns in reverse order
        col_index, col_weights = col_index[:, ::-1], col_weights[:, ::-1]
    row_index, row_take = _kept_part(row_index, 2 * h)
    col_index, col_take = _kept_part(col_index, 2 * w)
    pixels = image[row_take][:, col_take]
    hsv = np.array([draw.dhue, draw.dsat, draw.dexp], F32)
    return PendingImage(pixels, row_index, col_index, row_weights, np.ascontiguousarray(col_weights), hsv)


def _pending_mixed(new_image: np.ndarray, new_draw: DarknetDraw, image: np.ndarray, draw: DarknetDraw,
                   net_hw: Tuple[int, int]) -> PendingImage:
    """A ``mixup`` pair: the item's own pending image with the partner's attached (blended on the device)."""
    own = pending_image(image, draw, net_hw)
    own.partner = pending_image(new_image, new_draw, net_hw)
    return own


# darknet_item's images left pending (yolo.data.darknet_augment.ImageSteps)
PENDING_IMAGES = ImageSteps(single=pending_image, mixed=_pending_mixed)


@dataclass
class PendingBatch:
    """A mini-batch of :class:`PendingImage` packed for the device: ``B`` items and ``S >= B`` sources (the items'
    own images, then the ``mixup`` partners), all made for one network input ``h x w``.

    ``pixels``: UInt8[N], every source's ``R x C x 3`` pixels one after another; ``row_starts``: Int64[S, 2, h],
    the offset in ``pixels`` of the row each output row reads (above, below); ``col_starts``: Int64[S, 2, w], the
    offset within that row of the pixel each output column reads (left, right); ``row_weights``: Float32[S, 2, h];
    ``col_weights``: Float32[S, 2, w]; ``hsv``: Float32[S, 3] ``(dhue, dsat, dexp)``; ``partners``: Int64[B], the
    source blended into each item, -1 for none.
    """

    pixels: torch.Tensor
    row_starts: torch.Tensor
    col_starts: torch.Tensor
    row_weights: torch.Tensor
    col_weights: torch.Tensor
    hsv: torch.Tensor
    partners: torch.Tensor

    @classmethod
    def pack(cls, images: Sequence[PendingImage], shared: bool = False) -> "PendingBatch":
        """One batch from the items' pending images (they must share one network input size). ``shared``: the
        pixels go straight into shared memory (a loader worker's batch: the queue to the training process would
        otherwise copy them there)."""
        sizes = {image.size_hw for image in images}
        if len(sizes) != 1:
            raise ValueError(f"images in a batch must share one size, got {sorted(sizes)}")
        sources: List[PendingImage] = list(images)
        partners = []
        for image in images:
            partners.append(len(sources) if image.partner is not None else -1)
            if image.partner is not None:
                sources.append(image.partner)
        counts = [source.pixels.size for source in sources]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        pixels = _WORKER_BUFFERS.take(int(sum(counts))) if shared else torch.empty(int(sum(counts)), dtype=torch.uint8)
        flat = pixels.numpy()
        for source, offset, count in zip(sources, offsets, counts):
            np.copyto(flat[offset:offset + count].reshape(source.pixels.shape), source.pixels)
        row_starts = np.stack([offset + source.rows * (source.pixels.shape[1] * 3)
                               for source, offset in zip(sources, offsets)])
        return cls(pixels=pixels,
                   row_starts=torch.from_numpy(row_starts),
                   col_starts=torch.from_numpy(np.stack([source.cols * 3 for source in sources])),
                   row_weights=torch.from_numpy(np.stack([source.row_weights for source in sources])),
                   col_weights=torch.from_numpy(np.stack([source.col_weights for source in sources])),
                   hsv=torch.from_numpy(np.stack([source.hsv for source in sources])),
                   partners=torch.tensor(partners, dtype=torch.int64))

    def _tensors(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def pin_memory(self) -> "PendingBatch":
        """The same batch in pinned memory (the DataLoader's ``pin_memory`` calls this); a worker's shared buffer
        is handed back to it once copied (:meth:`release`)."""
        pinned = PendingBatch(**{name: t.pin_memory() for name, t in self._tensors().items()})
        self.release()
        return pinned

    def release(self) -> None:
        """Let the worker that packed this batch reuse its shared buffer: nothing may read ``pixels`` after this.
        A batch not packed into a worker's buffer is left alone."""
        SharedBuffers.release(self.pixels)

    def to(self, device: torch.device, non_blocking: bool = False) -> "PendingBatch":
        """The same batch on ``device``."""
        return PendingBatch(**{name: t.to(device, non_blocking=non_blocking) for name, t in self._tensors().items()})

    @property
    def shape(self) -> Tuple[int, int, int, int]:
        """``(B, 3, h, w)``: the shape :meth:`finish` returns."""
        return (self.partners.shape[0], 3, self.row_starts.shape[2], self.col_starts.shape[2])

    def finish(self) -> torch.Tensor:
        """Darknet's crop, resize, mirror and HSV distortion (and ``mixup``'s blend) of every image, on the
        batch's device: ``UInt8[B, 3, h, w]`` RGB levels, ``augment_image_uint8``'s values."""
        device = self.pixels.device
        # divisors as device tensors: CUDA divides by a host scalar as a multiplication by its reciprocal (filled
        # on the device: a tensor copied from the host would wait for the GPU)
        levels, six = torch.full((), 255.0, device=device), torch.full((), 6.0, device=device)
        planes = [self._resized(channel, levels) for channel in range(3)]  # Float32[S, h, w] each, in [0, 1]
        hue, sat, val = _distorted_hsv(*planes, self.hsv, six)
        chosen = _hsv_to_rgb(hue, sat, val).clamp_(0, 1)  # Float32[S, 3, h, w]
        count = self.partners.shape[0]
        out = chosen[:count]
        if chosen.shape[0] > count:  # mixup: the two images averaged (Darknet's blend_images, 0.5 each)
            mixed = out * 0.5 + chosen[self.partners.clamp(min=0)] * 0.5
            out = torch.where((self.partners >= 0)[:, None, None, None], mixed, out)
        return torch.round(out * 255.0).to(torch.uint8)

    def _resized(self, channel: int, levels: torch.Tensor) -> torch.Tensor:
        """One channel of every source cropped, stretched and mirrored: Float32[S, h, w] in [0, 1].

        Darknet's two passes: along x, ``left * (1 - dx) + right * dx``; along y, ``above * (1 - dy) + below *
        dy``, each pixel read as ``byte / 255``."""
        rows = []
        for part in range(2):  # the rows above, then the rows below
            start = self.row_starts[:, part, :, None] + channel  # Int64[S, h, 1]
            left = self.pixels[start + self.col_starts[:, None, 0, :]].float().div_(levels)
            right = self.pixels[start + self.col_starts[:, None, 1, :]].float().div_(levels)
            rows.append(left.mul_(self.col_weights[:, None, 0, :]).add_(right.mul_(self.col_weights[:, None, 1, :])))
        above, below = rows
        return above.mul_(self.row_weights[:, 0, :, None]).add_(below.mul_(self.row_weights[:, 1, :, None]))


class SharedBuffers:
    """A loader worker's shared-memory buffers for the pixels of the batches it packs, reused once the training
    process has copied a batch out (:meth:`PendingBatch.pin_memory` then sets the buffer's first byte).

    Fresh shared memory costs more to fill than the copy itself (creating it, then a page fault per 4 KiB page):
    about half a millisecond per training image, as much as the rest of a worker's part of an item besides the
    decode. A buffer starts with a small header (``HEADER`` bytes: the in-use flag, then a mark that tells these
    buffers from any other shared tensor); the pixels follow. A buffer the training process never releases
    (a batch not pinned, or dropped) is never written again. A new buffer is made when no free one is large
    enough (free ones too small are let go then); at most ``keep`` are remembered, so that a worker holds about
    as much shared memory as the batches it has in flight (the loader asks each worker for two ahead) plus one.
    """

    HEADER = 16
    MARK = np.frombuffer(b"yolo-pixels", np.uint8)
    IN_USE, FREE = 1, 0

    def __init__(self, keep: int = 4):
        self.keep, self.owner, self.buffers = int(keep), os.getpid(), []

    def take(self, count: int) -> torch.Tensor:
        """UInt8[count] in shared memory: a free buffer's pixels, or a new buffer's (a quarter larger, so that
        the next batches, a little larger or smaller, fit)."""
        if self.owner != os.getpid():  # a forked worker starts with no buffers of its own
            self.owner, self.buffers = os.getpid(), []
        for buffer in self.buffers:
            flags = buffer.numpy()
            if flags[0] == self.FREE and buffer.numel() - self.HEADER >= count:
                flags[0] = self.IN_USE
                return buffer[self.HEADER:self.HEADER + count]
        self.buffers = [buffer for buffer in self.buffers if buffer.numpy()[0] != self.FREE]  # all too small
        size = self.HEADER + count + count // 4
        buffer = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(size))
        header = buffer.numpy()[:self.HEADER]
        header[0] = self.IN_USE
        header[1:1 + self.MARK.size] = self.MARK
        self.buffers = (self.buffers + [buffer])[-self.keep:]
        return buffer[self.HEADER:self.HEADER + count]

    @classmethod
    def release(cls, pixels: torch.Tensor) -> None:
        """Mark the buffer holding ``pixels`` free (where it is one of these buffers)."""
        if not pixels.is_shared() or pixels.storage_offset() != cls.HEADER:
            return
        whole = torch.empty(0, dtype=torch.uint8).set_(pixels.untyped_storage()).numpy()
        if np.array_equal(whole[1:1 + cls.MARK.size], cls.MARK):
            whole[0] = cls.FREE


_WORKER_BUFFERS = SharedBuffers()


def _distorted_hsv(r: torch.Tensor, g: torch.Tensor, b: torch.Tensor, hsv: torch.Tensor, six: torch.Tensor):
    """Darknet's ``rgb_to_hsv`` and ``distort_image``'s changes on Float32[S, h, w] planes with per-source
    ``hsv`` Float32[S, 3] ``(dhue, dsat, dexp)``: ``(hue in turns, saturation, value)``, the operations of
    ``yolo.data.darknet_augment._rgb_to_hsv`` and ``_distorted_values`` (which say why they are Darknet's)."""
    high, low = torch.maximum(r, g), torch.minimum(r, g)
    mx, mn = torch.maximum(high, b), torch.minimum(low, b)
    mid = torch.maximum(torch.minimum(high, b), low)
    delta = mx - mn
    hue = (mid - mn) / (delta + (delta == 0))
    r_max = r == mx
    g_max = (g == mx) & ~r_max
    b_max = ~(r_max | g_max)
    negative = (r_max & (g < b)) | (g_max & (b < r)) | (b_max & (r < g))
    hue = torch.where(negative, -hue, hue)
    offset = g_max.float() * 2 + b_max.float() * 4 + (negative & r_max).float() * 6
    hue = (hue + offset) / six
    sat = delta / (mx + (mx == 0))
    dhue, dsat, dexp = (hsv[:, k, None, None] for k in range(3))
    sat, val = sat * dsat, mx * dexp
    hue = hue + dhue
    hue = hue - (hue > 1).float()
    hue = hue + (hue < 0).float()
    return hue, sat, val


def _hsv_to_rgb(hue: torch.Tensor, sat: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
    """Darknet's ``hsv_to_rgb`` on Float32[S, h, w] planes: Float32[S, 3, h, w] (the operations of
    ``yolo.data.darknet_augment._sector_values`` and ``_choose``: by hue sector, the channel that takes v, the one
    that takes p, the third q or t)."""
    hue = hue * 6
    index = torch.floor(hue)
    fraction = hue - index
    sector = index.clamp_(0, 5).long()
    odd = (sector & 1).float()
    third = (1 - fraction) * (1 - odd)
    third = third + fraction * odd
    third = (1 - third * sat) * val
    p = (1 - sat) * val
    v_channel = (sector + 1) // 2 % 3  # 0 1 1 2 2 0 by sector (arithmetic: a table copied to the GPU would wait)
    p_channel = (sector // 2 + 2) % 3  # 2 2 0 0 1 1
    return torch.stack([torch.where(v_channel == c, val, torch.where(p_channel == c, p, third)) for c in range(3)], 1)
