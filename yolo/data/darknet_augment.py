"""Darknet's training augmentation for detectors, formula for formula (src/data.c ``load_data_detection``,
the build without OpenCV; src/image.c ``crop_image``, ``resize_image``, ``flip_image``, ``distort_image``;
src/data.c ``correct_boxes`` / ``fill_truth_detection``).

One image goes through: a crop whose four sides move by random whole pixels (``jitter``, plus a random zoom
with ``resize``, and widened to the network's aspect ratio with ``letter_box``), pixels outside the image
repeating the border; a bilinear stretch of the crop to the network size (Darknet's own two-pass resize);
a mirror with probability 1/2 (``flip``); an HSV distortion (``hue`` shift, ``saturation`` and ``exposure``
factors from ``rand_scale``) clipped to [0, 1]. The truths follow the crop and the mirror, are clipped to the
image, and those narrower or lower than one network pixel are dropped; at most ``max`` truths are kept, a
random subset as Darknet's shuffle. With ``mixup=1`` half of the images (a coin per image) are averaged with
another random training image augmented on its own, and carry the partner's truths then their own (Darknet
tosses one coin per loading thread, which holds one image whenever ``batch`` is at most its 64 threads).

Everything random is drawn once into a :class:`DarknetDraw` (:mod:`yolo.data.darknet_draw`); the image functions
here and the truths' (:mod:`yolo.data.darknet_truths`) are pure functions
of it (and are compared with Darknet's C functions called with the same values, tests/test_augment_darknet.py).
Images are float32 ``H x W x 3`` RGB in [0, 1] (Darknet's ``image`` data), arithmetic float32 as in C.
Training items take :func:`augment_image_uint8`, the same values rounded to ``uint8`` levels. How it is made
fast without changing a value is said at the image functions below; the previous, plainer implementation is
kept as the tests' reference (``tests/previous_darknet_augment.py``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Tuple

import cv2
import numpy as np
import torch

from yolo.data.darknet_draw import F32, DarknetDraw, ImageRandoms, darknet_crop, draw_darknet, draw_image_randoms
from yolo.data.darknet_truths import (augment_truths, input_matrix, mixup_images, mixup_truths, truths_from_xyxy,
                                      xyxy_from_truths)


# ---------------------------------------------------------------------------------------------- image
# Gathering whole rows of pixels is cheap, gathering columns is not: the pixels the resize reads are gathered as
# uint8 rows, the image is transposed once between the two gathers (x becomes the row axis), and the float32
# work runs on "transposed planes" ``3 x W x H``; the result is transposed back at the end, as uint8 for
# training. Every float32 operation is C's, in C's order (no fused or reordered arithmetic), and Darknet's
# branches are exact selections (a value times 1 or 0, plus 0), so the values are Darknet's. Large
# intermediates live in per-thread scratch buffers (:func:`_scratch`); what the public functions return is new.
ONE = F32(1)
LEVELS = F32(255)


def _axis(n_in: int, n_out: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """resize_image's sampling along one axis: left index, float32 fraction, right index (clamped)."""
    scale = F32(n_in - 1) / F32(n_out - 1)  # corners aligned
    pos = np.arange(n_out, dtype=F32) * scale
    left = pos.astype(np.int64)
    return left, pos - left.astype(F32), np.minimum(left + 1, n_in - 1)


_WORKSPACE = threading.local()


def _scratch(slot: int, shape: Tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A buffer kept for the next image of the same size (per thread): the first touch of fresh pages costs
    more than the arithmetic on them. Its contents never leave the module."""
    buffers = _WORKSPACE.__dict__.setdefault("buffers", {})
    buffer = buffers.get(slot)
    if buffer is None or tuple(buffer.shape) != tuple(shape) or buffer.dtype != dtype:
        buffer = buffers[slot] = torch.empty(shape, dtype=dtype)
    return buffer


def _scratch_array(slot: int, like: np.ndarray, dtype=F32) -> np.ndarray:
    """:func:`_scratch` as a numpy array shaped like ``like``."""
    return _scratch(slot, like.shape, torch.uint8 if dtype == np.uint8 else torch.float32).numpy()


def _as_float(pixels: np.ndarray, slot: Optional[int] = None) -> np.ndarray:
    """Pixels as float32 (``uint8`` divided by 255, as Darknet's loaded data), into scratch buffer ``slot`` when
    given. torch converts and divides several times faster than numpy's mixed-type loops (the same correctly
    rounded division)."""
    if pixels.dtype != np.uint8:
        return pixels.astype(F32, copy=slot is None)
    source = torch.from_numpy(pixels)
    out = source.to(torch.float32) if slot is None else _scratch(slot, source.shape).copy_(source)
    return out.div_(255.0).numpy()


def _crop_resize_transposed(image: np.ndarray, dx: int, dy: int, crop_w: int, crop_h: int, w: int, h: int,
                            flip: bool) -> np.ndarray:
    """:func:`crop_resize` in the transposed frame: ``H x W x 3`` -> float32 ``3 x w x h``, possibly a scratch
    buffer (:func:`_scratch`): read, never kept or written, before the next call."""
    ih, iw = image.shape[:2]
    cols = np.clip(np.arange(crop_w) + dx, 0, iw - 1)
    rows = np.clip(np.arange(crop_h) + dy, 0, ih - 1)
    # An axis of the same size is not resampled: Darknet's weights are then 1 and 0, which give the same values.
    resize_y = crop_h != h
    if resize_y:
        iy, fy, below = _axis(crop_h, h)
        rows = np.concatenate([rows[iy], rows[below]])  # the upper rows, then the lower ones
    if crop_w == w:
        picks = [cols[::-1] if flip else cols]
    else:
        ix, fx, right = _axis(crop_w, w)
        if flip:
            ix, fx, right = ix[::-1], fx[::-1].copy(), right[::-1]
        picks = [cols[ix], cols[right], cols[-1:]]
    # uint8 (or float) gathers, plane by plane: the rows, then the columns as rows of the transposed plane.
    if image.dtype != np.uint8:
        image = image.astype(F32, copy=False)
    gathered = [np.empty((3, len(pick), len(rows)), image.dtype) for pick in picks]
    for c, plane in enumerate(cv2.split(np.ascontiguousarray(image))):
        transposed = cv2.transpose(np.ascontiguousarray(plane[rows]))  # x is the row axis from here on
        for out, pick in zip(gathered, picks):
            np.take(transposed, pick, axis=0, out=out[c])
    if crop_w == w:
        part = _as_float(gathered[0])
    else:
        # Pass 1: along x; the last output column (the first when mirrored) takes the crop's last column.
        last = _as_float(gathered[2])
        if crop_w == 1:
            part = np.repeat(last, w, axis=1)
        else:
            # torch: its broadcast products run several times faster than numpy's (the same float32 products)
            part = torch.from_numpy(_as_float(gathered[0], 0))
            part.mul_(torch.from_numpy(ONE - fx)[:, None])
            after = torch.from_numpy(_as_float(gathered[1], 1))
            part.add_(after.mul_(torch.from_numpy(fx)[:, None]))
            part = part.numpy()
            part[:, slice(0, 1) if flip else slice(-1, None)] = last
    if not resize_y:
        return part
    # Pass 2: along y; the last row (or a one-row input) has no lower neighbour.
    planes = torch.from_numpy(part)
    upper = torch.mul(planes[:, :, :h], torch.from_numpy(ONE - fy), out=_scratch(2, (3, w, h)))
    if crop_h == 1:
        return upper.numpy()
    out = torch.mul(planes[:, :, h:], torch.from_numpy(fy), out=_scratch(3, (3, w, h))).add_(upper)
    out[:, :, -1] = upper[:, :, -1]  # Darknet adds nothing to its last row
    return out.numpy()


def _untranspose(planes: np.ndarray) -> np.ndarray:
    """``3 x w x h`` -> ``3 x h x w`` (any dtype OpenCV transposes)."""
    out = np.empty((planes.shape[0], planes.shape[2], planes.shape[1]), planes.dtype)
    for c in range(planes.shape[0]):
        out[c] = cv2.transpose(planes[c])
    return out


def crop_image(image: np.ndarray, dx: int, dy: int, w: int, h: int) -> np.ndarray:
    """Darknet's ``crop_image``: the ``h x w`` window at ``(dx, dy)``; outside pixels repeat the border."""
    ih, iw = image.shape[:2]
    rows = np.clip(np.arange(h) + dy, 0, ih - 1)
    cols = np.clip(np.arange(w) + dx, 0, iw - 1)
    return np.take(np.take(image, rows, axis=0), cols, axis=1)


def crop_resize(image: np.ndarray, dx: int, dy: int, crop_w: int, crop_h: int, w: int, h: int,
                flip: bool = False) -> np.ndarray:
    """Darknet's ``crop_image``, ``resize_image`` to ``h x w`` and, with ``flip``, ``flip_image``:
    ``H x W x 3`` -> float32 ``3 x h x w``.

    Bilinear with corners aligned (scale ``(in - 1) / (out - 1)``), columns first then rows, the last
    column and row taking the crop's last ones as Darknet does. Only the pixels the resize reads are
    gathered and converted; ``uint8`` input is divided by 255 first (the same floats as Darknet's data).
    The mirror reverses the output columns by reversing the column sampling (the same values, in order).
    """
    return _untranspose(_crop_resize_transposed(image, dx, dy, crop_w, crop_h, w, h, flip))


def resize_image_float32(image: np.ndarray, w: int, h: int) -> np.ndarray:
    """Darknet's ``resize_image`` on ``H x W x 3`` pixels (float32 result; ``uint8`` is divided by 255)."""
    ih, iw = image.shape[:2]
    return crop_resize(image, 0, 0, iw, ih, w, h).transpose(1, 2, 0)


def _rgb_to_hsv(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Darknet's ``rgb_to_hsv`` on float32 planes: hue in turns [0, 1), saturation, value (scratch buffers: used
    before the next call).

    Darknet's hue in sixths is ``(g - b) / delta`` when r is the max, ``2 + (b - r) / delta`` when g is, else
    ``4 + (r - g) / delta``, plus 6 when negative. The difference is always ``mid - min`` or its negative (the
    other two channels, the same two operands), so the hue is ``offset + sign * x`` with ``x = (mid - min) /
    delta``: the same float32 operations, in fewer passes. Black (``max == 0``) and gray (``delta == 0``) pixels
    need no case of their own: their divisions by 1 give hue and saturation 0 (Darknet's gray hue is 0/0, which
    its ``hsv_to_rgb`` never reads: saturation is 0).
    """
    high = np.maximum(r, g, out=_scratch_array(10, r))
    low = np.minimum(r, g, out=_scratch_array(11, r))
    mx = np.maximum(high, b, out=_scratch_array(12, r))
    mn = np.minimum(low, b, out=_scratch_array(13, r))
    mid = np.minimum(high, b, out=high)
    np.maximum(mid, low, out=mid)
    delta = np.subtract(mx, mn, out=low)
    h = np.subtract(mid, mn, out=mid)
    np.add(delta, delta == 0, out=mn)
    h /= mn
    # which channel is the max (r first, then g) and whether the difference is negative
    r_max = np.equal(r, mx, out=_scratch_array(14, r, np.uint8).view(bool))
    g_max = np.equal(g, mx, out=_scratch_array(15, r, np.uint8).view(bool))
    g_max &= ~r_max
    b_max = ~(r_max | g_max)
    negative = np.less(g, b, out=_scratch_array(16, r, np.uint8).view(bool))
    negative &= r_max
    negative |= (b < r) & g_max
    negative |= (r < g) & b_max
    # h = -h where negative, as a flip of the float32 sign bit (exactly IEEE negation, -0.0 included): a masked
    # ufunc (np.negative(..., where=)) costs up to 20 times more, the more so the more the mask alternates
    h.view(np.uint32)[...] ^= negative.view(np.uint8).astype(np.uint32) << np.uint32(31)
    offset = g_max.view(np.uint8) * np.uint8(2)
    offset += b_max.view(np.uint8) * np.uint8(4)
    offset += (negative & r_max).view(np.uint8) * np.uint8(6)
    h += offset
    h /= F32(6)  # C divides by the double 6.; float32 division rounds the same (53 >= 2 * 24 + 2 bits)
    np.add(mx, mx == 0, out=mn)
    s = np.divide(delta, mn, out=delta)
    return h, s, mx


# Darknet's hsv_to_rgb by hue sector 0..5 (index 6, hue exactly 1, is its "else", as 5): the channel that
# takes v and the one that takes p = v (1 - s); the third takes q = v (1 - s f) in odd sectors and
# t = v (1 - s (1 - f)) in even ones (f: the fraction of the sector). As lookup tables of the sector.
_V_CHANNEL = np.array([0, 1, 1, 2, 2, 0] + [3] * 250, np.uint8)
_P_CHANNEL = np.array([2, 2, 0, 0, 1, 1] + [3] * 250, np.uint8)


def _sector_values(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Darknet's ``hsv_to_rgb`` up to the choice of channels: ``(v, p, third, sector)``, the three values every
    pixel's channels take and its hue sector (``uint8`` 0..5); overwrites ``h`` and ``s``.

    Gray (``s == 0``) needs no case of its own: p, q and t are then exactly v.
    """
    h *= F32(6)
    index = np.floor(h)
    f = np.subtract(h, index, out=h)
    np.clip(index, 0, 5, out=index)
    sector = index.astype(np.uint8)
    odd = sector & 1
    third = np.subtract(ONE, f, out=index)  # 1 - f (even sectors) ...
    third *= odd ^ 1
    f *= odd                                # ... or f (odd)
    third += f
    third *= s
    np.subtract(ONE, third, out=third)
    third *= v
    p = np.subtract(ONE, s, out=s)
    p *= v
    return v, p, third, sector


def _distorted_values(planes: np.ndarray, dhue: float, dsat: float, dexp: float):
    """:func:`_sector_values` of Darknet's ``distort_image`` on float32 ``3 x ...`` planes."""
    h, s, v = _rgb_to_hsv(planes[0], planes[1], planes[2])
    s *= F32(dsat)
    v *= F32(dexp)
    h += F32(dhue)
    scratch = np.greater(h, 1).view(np.uint8)
    h -= scratch
    np.less(h, 0, out=scratch.view(bool))
    h += scratch
    return _sector_values(h, s, v)


def _choose(values: Tuple[np.ndarray, np.ndarray, np.ndarray], sector: np.ndarray) -> np.ndarray:
    """``3 x ...`` channels from ``(v, p, third)`` by hue sector (``uint8``): each channel is exactly one of them.

    ``uint8`` values by 0/1 masks, ``third + (v - third) * takes_v + (p - third) * takes_p`` (wrapping around and
    back), several times faster than the masked copies float32 values take.
    """
    v, p, third = values
    v_channel = cv2.LUT(sector, _V_CHANNEL).reshape(sector.shape)
    p_channel = cv2.LUT(sector, _P_CHANNEL).reshape(sector.shape)
    out = np.empty((3,) + v.shape, v.dtype)
    if v.dtype == np.uint8:
        to_v, to_p = v - third, p - third
        for c in range(3):
            np.multiply(to_v, (v_channel == c).view(np.uint8), out=out[c])
            out[c] += third
            out[c] += to_p * (p_channel == c).view(np.uint8)
        return out
    for c in range(3):
        np.copyto(out[c], third)
        np.copyto(out[c], v, where=v_channel == c)
        np.copyto(out[c], p, where=p_channel == c)
    return out


def _to_levels(values: np.ndarray) -> np.ndarray:
    """``constrain_image`` then the ``uint8`` level: ``rint(clip(x, 0, 1) * 255)``; overwrites ``values``.

    OpenCV's ``convertScaleAbs`` forms the same float32 product, rounds it half to even and saturates at 255
    (the upper clip); the lower clip comes first, as the absolute value would mirror negative values.
    """
    np.maximum(values, 0, out=values)
    return cv2.convertScaleAbs(values, alpha=255.0)


def _distort(planes: np.ndarray, dhue: float, dsat: float, dexp: float) -> np.ndarray:
    """:func:`distort_image` on float32 ``3 x ...`` planes."""
    v, p, third, sector = _distorted_values(planes, dhue, dsat, dexp)
    out = _choose((v, p, third), sector)
    return np.clip(out, 0, 1, out=out)


def rgb_to_hsv(image: np.ndarray) -> np.ndarray:
    """Darknet's ``rgb_to_hsv`` on float32 RGB ``H x W x 3`` in [0, 1]: hue in turns [0, 1), saturation, value."""
    image = image.astype(F32, copy=False)
    return np.stack(_rgb_to_hsv(image[..., 0], image[..., 1], image[..., 2]), -1)


def hsv_to_rgb(image: np.ndarray) -> np.ndarray:
    """Darknet's ``hsv_to_rgb`` (inverse of :func:`rgb_to_hsv`) on ``H x W x 3``."""
    h, s, v = np.asarray(image, F32).transpose(2, 0, 1).copy()
    v, p, third, sector = _sector_values(h, s, v)
    return _choose((v, p, third), sector).transpose(1, 2, 0)


def distort_image(image: np.ndarray, dhue: float, dsat: float, dexp: float) -> np.ndarray:
    """Darknet's ``distort_image``: scale saturation and value, shift hue (wrapping), back to RGB, clip to [0, 1]."""
    return _distort(_as_float(np.ascontiguousarray(image.transpose(2, 0, 1))), dhue, dsat, dexp).transpose(1, 2, 0)


def _crop_resize_draw(image: np.ndarray, draw: DarknetDraw, net_hw: Tuple[int, int]) -> np.ndarray:
    sheight, swidth = draw.crop_size(image.shape[:2])
    return _crop_resize_transposed(image, draw.pleft, draw.ptop, swidth, sheight, net_hw[1], net_hw[0], draw.flip)


def augment_image(image: np.ndarray, draw: DarknetDraw, net_hw: Tuple[int, int]) -> np.ndarray:
    """``H x W x 3`` RGB -> the network input ``net_h x net_w x 3`` float32 [0, 1]: crop, resize, flip, distort.

    ``image`` is float32 in [0, 1] (Darknet's data) or ``uint8`` (divided by 255 as it is read: the same floats).
    The result is a transposed view of ``3 x net_h x net_w`` planes (the layout the network takes).
    """
    planes = _distort(_crop_resize_draw(image, draw, net_hw), draw.dhue, draw.dsat, draw.dexp)
    return _untranspose(planes).transpose(1, 2, 0)


def augment_image_uint8(image: np.ndarray, draw: DarknetDraw, net_hw: Tuple[int, int]) -> np.ndarray:
    """:func:`augment_image` rounded to ``uint8`` levels (``rint(x * 255)``), as the training items carry it:
    ``uint8`` ``net_h x net_w x 3``, a transposed view of ``3 x net_h x net_w`` planes.

    The same values as rounding :func:`augment_image`'s result: the three values a pixel's channels take are
    rounded first and the channels chosen among the rounded ones (a third of the rounding work).
    """
    v, p, third, sector = _distorted_values(_crop_resize_draw(image, draw, net_hw), draw.dhue, draw.dsat, draw.dexp)
    planes = _choose((_to_levels(v), _to_levels(p), _to_levels(third)), sector)
    return _untranspose(planes).transpose(1, 2, 0)


def _draw_one(image: np.ndarray, boxes: np.ndarray, labels: np.ndarray, rng: np.random.Generator,
              net_hw: Tuple[int, int], hyp: Mapping[str, float]):
    """One image's draw, truths (xyxy input pixels), labels and matrix; its pixels are made by the caller."""
    oh, ow = image.shape[:2]
    draw = draw_darknet(rng, (oh, ow), net_hw, hyp)
    # Darknet shuffles the truths and keeps the first `max` of them, before any check.
    order = rng.permutation(len(labels))[: int(hyp.get("max_boxes", 200))]
    boxes, labels = np.asarray(boxes, np.float32)[order].reshape(-1, 4), np.asarray(labels)[order]
    out, keep = augment_truths(truths_from_xyxy(boxes, (oh, ow)), draw, (oh, ow), net_hw)
    return draw, xyxy_from_truths(out, net_hw), labels[keep].astype(np.int64), input_matrix(draw, (oh, ow), net_hw)


def _to_uint8(pixels: np.ndarray) -> np.ndarray:
    """Darknet's float input rounded to ``uint8`` (within half a level)."""
    levels = pixels * F32(255)
    np.rint(levels, out=levels)
    return np.clip(levels, 0, 255, out=levels).astype(np.uint8)


def darknet_sample(image: np.ndarray, boxes: np.ndarray, labels: np.ndarray, rng: np.random.Generator,
                   net_hw: Tuple[int, int], hyp: Mapping[str, float]
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One image augmented as Darknet does (no mixup).

    Args:
        image: RGB ``uint8`` ``H x W x 3``. boxes: Float32[N, 4] xyxy original pixels. labels: Int64[N].
        hyp: as :func:`draw_darknet`, plus ``max_boxes`` (the last head's ``max``).
    Returns:
        ``(image uint8 net_h x net_w x 3, boxes Float32[K, 4] xyxy input pixels, labels Int64[K], matrix 3x3)``.
    """
    image = np.asarray(image, dtype=np.uint8)
    draw, boxes, labels, matrix = _draw_one(image, boxes, labels, rng, net_hw, hyp)
    return augment_image_uint8(image, draw, net_hw), boxes, labels, matrix


@dataclass(frozen=True)
class ImageSteps:
    """How a training item's pixels are made from its draws: ``single(image, draw, net_hw)`` for one image,
    ``mixed(new_image, new_draw, image, draw, net_hw)`` for a ``mixup`` pair. :data:`FINISHED_IMAGES` makes the
    ``uint8`` network input at once; :data:`yolo.data.darknet_batched.PENDING_IMAGES` leaves the float work for
    the training device."""

    single: Callable[[np.ndarray, DarknetDraw, Tuple[int, int]], object]
    mixed: Callable[[np.ndarray, DarknetDraw, np.ndarray, DarknetDraw, Tuple[int, int]], object]


def _mixed_uint8(new_image: np.ndarray, new_draw: DarknetDraw, image: np.ndarray, draw: DarknetDraw,
                 net_hw: Tuple[int, int]) -> np.ndarray:
    """``mixup``'s image: the two augmented images averaged in float32, then rounded to ``uint8`` levels."""
    return _to_uint8(mixup_images(augment_image(new_image, new_draw, net_hw), augment_image(image, draw, net_hw)))


FINISHED_IMAGES = ImageSteps(single=augment_image_uint8, mixed=_mixed_uint8)


def darknet_item(load: Callable[[int], tuple], index: int, num_items: int, rng: np.random.Generator,
                 net_hw: Tuple[int, int], hyp: Mapping[str, float], steps: ImageSteps = FINISHED_IMAGES
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Training item ``index`` as Darknet makes it, with ``mixup`` (``load(i) -> (image, boxes, labels)``).

    Returns :func:`darknet_sample`'s tuple, its image made by ``steps``; the matrix is ``None`` for a mixed image.
    """
    image, boxes, labels = load(index)
    image = np.asarray(image, dtype=np.uint8)
    draw, boxes, labels, matrix = _draw_one(image, boxes, labels, rng, net_hw, hyp)
    if hyp.get("mixup", 0) > 0 and rng.integers(2):
        partner = int(rng.integers(num_items))
        new_image, new_boxes, new_labels = load(partner)
        new_image = np.asarray(new_image, dtype=np.uint8)
        new_draw, new_boxes, new_labels, _ = _draw_one(new_image, new_boxes, new_labels, rng, net_hw, hyp)
        cap = int(hyp.get("max_boxes", 200))
        return (steps.mixed(new_image, new_draw, image, draw, net_hw), mixup_truths(new_boxes, boxes, cap),
                mixup_truths(new_labels, labels, cap), None)
    return steps.single(image, draw, net_hw), boxes, labels, matrix


__all__ = ["DarknetDraw", "FINISHED_IMAGES", "ImageRandoms", "ImageSteps", "augment_image", "augment_image_uint8", "augment_truths", "crop_image",
           "crop_resize", "darknet_crop", "darknet_item", "darknet_sample", "distort_image", "draw_darknet",
           "draw_image_randoms", "hsv_to_rgb", "input_matrix", "mixup_images", "mixup_truths", "resize_image_float32",
           "rgb_to_hsv"]
