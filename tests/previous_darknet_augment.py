"""The previous implementation of Darknet's image augmentation (build without OpenCV), kept with the tests as the
reference that tests/test_data_darknet_fast_path.py compares :mod:`yolo.data.darknet_augment` with value for value:
whole-array numpy steps on ``3 x H x W`` float32 planes, in C's float32 order (checked against Darknet's C code
when it was the package's). Test code, not the package's: nothing in ``yolo`` imports it.

:func:`reference_darknet_item` is :func:`yolo.data.darknet_augment.darknet_item` with these image steps (same
draws, same truths, same random order).
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Tuple

import numpy as np

from yolo.data.darknet_augment import (F32, DarknetDraw, _axis, _to_uint8, augment_truths, draw_darknet,
                                       input_matrix, mixup_images, mixup_truths, truths_from_xyxy, xyxy_from_truths)

__all__ = ["reference_augment_image", "reference_crop_resize", "reference_darknet_item", "reference_distort"]

ONE = F32(1)


def _planes(pixels: np.ndarray) -> np.ndarray:
    """``H x W x 3`` pixels -> float32 ``3 x H x W`` (``uint8`` divided by 255, as Darknet's loaded data)."""
    planes = np.ascontiguousarray(pixels.transpose(2, 0, 1)).astype(F32)
    if pixels.dtype == np.uint8:
        planes /= F32(255)
    return planes


def reference_crop_resize(image: np.ndarray, dx: int, dy: int, crop_w: int, crop_h: int, w: int, h: int,
                flip: bool = False) -> np.ndarray:
    """Darknet's ``crop_image``, ``resize_image`` to ``h x w`` and, with ``flip``, ``flip_image``:
    ``H x W x 3`` -> float32 ``3 x h x w``.

    Bilinear with corners aligned (scale ``(in - 1) / (out - 1)``), columns first then rows, the last
    column and row taking the crop's last ones as Darknet does. Only the pixels the resize reads are
    gathered and converted; ``uint8`` input is divided by 255 first (the same floats as Darknet's data).
    The mirror reverses the output columns by reversing the column sampling (the same values, in order).
    """
    ih, iw = image.shape[:2]
    cols = np.clip(np.arange(crop_w) + dx, 0, iw - 1)
    if dy >= 0 and dy + crop_h <= ih:
        rows_of = image[dy:dy + crop_h]
    else:
        rows_of = np.take(image, np.clip(np.arange(crop_h) + dy, 0, ih - 1), axis=0)
    order = slice(None, None, -1) if flip else slice(None)
    if (crop_h, crop_w) == (h, w):
        return _planes(np.take(rows_of, cols[order], axis=1))
    # Pass 1: along x, into a crop_h x w image.
    ix, fx, right = (a[order] for a in _axis(crop_w, w))
    part = _planes(np.take(rows_of, cols[ix], axis=1))
    part *= ONE - fx
    after = _planes(np.take(rows_of, cols[right], axis=1))
    after *= fx
    part += after
    last = _planes(rows_of[:, cols[-1:]])
    if crop_w == 1:
        part = np.repeat(last, w, axis=2)
    else:  # the last output column takes the last input column
        part[:, :, slice(0, 1) if flip else slice(-1, None)] = last
    # Pass 2: along y; the last row (or a one-row input) has no lower neighbour.
    iy, fy, below = _axis(crop_h, h)
    fy = fy[:, None]
    upper = np.take(part, iy, axis=1)
    upper *= ONE - fy
    if crop_h == 1:
        return upper
    out = np.take(part, below, axis=1)
    out *= fy
    out += upper
    out[:, -1] = upper[:, -1]  # Darknet adds nothing to its last row
    return out



def _rgb_to_hsv(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Darknet's ``rgb_to_hsv`` on float32 planes: hue in turns [0, 1), saturation, value (new arrays).

    Written with few temporaries: allocating and first touching large arrays costs more than the arithmetic.
    """
    mx = np.maximum(r, g)
    np.maximum(mx, b, out=mx)
    delta = np.minimum(r, g)
    np.minimum(delta, b, out=delta)
    np.subtract(mx, delta, out=delta)
    r_max, g_max = r == mx, g == mx
    # hue sixths: (g - b) / delta when r is the max, 2 + (b - r) / delta when g is, else 4 + (r - g) / delta
    h = r - g
    scratch = b - r
    np.copyto(h, scratch, where=g_max)
    np.subtract(g, b, out=scratch)
    np.copyto(h, scratch, where=r_max)
    np.copyto(scratch, delta)
    np.copyto(scratch, ONE, where=delta == 0)
    h /= scratch
    offset = np.where(g_max, F32(2), F32(4))
    np.copyto(offset, F32(0), where=r_max)
    h += offset
    np.add(h, F32(6), out=h, where=h < 0)
    h /= F32(6)  # C divides by the double 6.; float32 division rounds the same (53 >= 2 * 24 + 2 bits)
    black = mx == 0
    np.copyto(scratch, mx)
    np.copyto(scratch, ONE, where=black)
    s = np.divide(delta, scratch, out=delta)
    np.copyto(h, F32(0), where=black)
    np.copyto(s, F32(0), where=black)
    return h, s, mx


# Darknet's hsv_to_rgb by hue sector 0..5 (index 6, hue exactly 1, is its "else", as 5): the channel that
# takes v and the one that takes p = v (1 - s); the third takes q = v (1 - s f) in odd sectors and
# t = v (1 - s (1 - f)) in even ones (f: the fraction of the sector).
_V_CHANNEL = np.array([0, 1, 1, 2, 2, 0], np.uint8)
_P_CHANNEL = np.array([2, 2, 0, 0, 1, 1], np.uint8)


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Darknet's ``hsv_to_rgb`` on float32 planes -> ``3 x H x W``; overwrites ``h`` and ``s``.

    Gray (``s == 0``) needs no case of its own: p, q and t are then exactly v.
    """
    h *= F32(6)
    index = np.floor(h)
    f = np.subtract(h, index, out=h)
    np.clip(index, 0, 5, out=index)
    sector = index.astype(np.uint8)
    third = np.subtract(ONE, f, out=index)        # 1 - f (even sectors) ...
    np.copyto(third, f, where=(sector & 1).view(bool))  # ... or f (odd)
    third *= s
    np.subtract(ONE, third, out=third)
    third *= v
    p = np.subtract(ONE, s, out=s)
    p *= v
    out = np.empty((3,) + v.shape, F32)
    out[:] = third
    v_channel, p_channel = _V_CHANNEL[sector], _P_CHANNEL[sector]
    for c in range(3):
        np.copyto(out[c], v, where=v_channel == c)
        np.copyto(out[c], p, where=p_channel == c)
    return out


def reference_distort(planes: np.ndarray, dhue: float, dsat: float, dexp: float) -> np.ndarray:
    """:func:`distort_image` on float32 ``3 x H x W`` planes."""
    h, s, v = _rgb_to_hsv(planes[0], planes[1], planes[2])
    s *= F32(dsat)
    v *= F32(dexp)
    h += F32(dhue)
    np.subtract(h, ONE, out=h, where=h > 1)
    np.add(h, ONE, out=h, where=h < 0)
    out = _hsv_to_rgb(h, s, v)
    return np.clip(out, 0, 1, out=out)



def reference_augment_image(image: np.ndarray, draw: DarknetDraw, net_hw: Tuple[int, int]) -> np.ndarray:
    """``H x W x 3`` RGB -> the network input ``net_h x net_w x 3`` float32 [0, 1]: crop, resize, flip, distort.

    ``image`` is float32 in [0, 1] (Darknet's data) or ``uint8`` (divided by 255 as it is read: the same floats).
    The result is a transposed view of ``3 x net_h x net_w`` planes (the layout the network takes).
    """
    sheight, swidth = draw.crop_size(image.shape[:2])
    planes = reference_crop_resize(image, draw.pleft, draw.ptop, swidth, sheight, net_hw[1], net_hw[0], draw.flip)
    return reference_distort(planes, draw.dhue, draw.dsat, draw.dexp).transpose(1, 2, 0)



def _one_image(image, boxes, labels, rng, net_hw, hyp):
    """One image's float32 pixels, truths (xyxy input pixels), labels and matrix, as the package made them."""
    oh, ow = image.shape[:2]
    draw = draw_darknet(rng, (oh, ow), net_hw, hyp)
    order = rng.permutation(len(labels))[: int(hyp.get("max_boxes", 200))]
    boxes, labels = np.asarray(boxes, np.float32)[order].reshape(-1, 4), np.asarray(labels)[order]
    out, keep = augment_truths(truths_from_xyxy(boxes, (oh, ow)), draw, (oh, ow), net_hw)
    pixels = reference_augment_image(np.asarray(image, dtype=np.uint8), draw, net_hw)
    return pixels, xyxy_from_truths(out, net_hw), labels[keep].astype(np.int64), input_matrix(draw, (oh, ow), net_hw)


def reference_darknet_item(load: Callable[[int], tuple], index: int, num_items: int, rng: np.random.Generator,
                           net_hw: Tuple[int, int], hyp: Mapping[str, float]
                           ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """:func:`yolo.data.darknet_augment.darknet_item` computed with the previous image steps."""
    pixels, boxes, labels, matrix = _one_image(*load(index), rng, net_hw, hyp)
    if hyp.get("mixup", 0) > 0 and rng.integers(2):
        partner = int(rng.integers(num_items))
        new_pixels, new_boxes, new_labels, _ = _one_image(*load(partner), rng, net_hw, hyp)
        cap = int(hyp.get("max_boxes", 200))
        pixels = mixup_images(new_pixels, pixels)
        boxes = mixup_truths(new_boxes, boxes, cap)
        labels = mixup_truths(new_labels, labels, cap)
        matrix = None
    return _to_uint8(pixels), boxes, labels, matrix
