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

Everything random is drawn once into a :class:`DarknetDraw`; the image and box functions are pure functions
of it (and are compared with Darknet's C functions called with the same values, tests/test_augment_darknet.py).
Images are float32 ``H x W x 3`` RGB in [0, 1] (Darknet's ``image`` data), arithmetic float32 as in C.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Tuple

import numpy as np

F32 = np.float32


@dataclass(frozen=True)
class DarknetDraw:
    """The random part of one image's augmentation: the crop (pixels cut from each side; negative values
    extend the crop beyond the image), the mirror, and the HSV changes (hue shift in turns, factors)."""

    pleft: int
    pright: int
    ptop: int
    pbot: int
    flip: bool
    dhue: float = 0.0
    dsat: float = 1.0
    dexp: float = 1.0

    def crop_size(self, orig_hw: Tuple[int, int]) -> Tuple[int, int]:
        """``(sheight, swidth)``: the crop's size in original pixels."""
        oh, ow = orig_hw
        return oh - self.ptop - self.pbot, ow - self.pleft - self.pright


def _trunc(x) -> int:
    """C's float -> int conversion (toward zero)."""
    return int(np.trunc(F32(x)))


def _precalc(lo: float, hi: float, r: np.float32) -> np.float32:
    """Darknet's ``rand_precalc_random``: ``r * (hi - lo) + lo`` with the bounds ordered."""
    lo, hi = F32(lo), F32(hi)
    if hi < lo:
        lo, hi = hi, lo
    return F32(r * (hi - lo) + lo)


def _rand_scale(rng: np.random.Generator, s: float) -> float:
    """Darknet's ``rand_scale``: uniform in ``[1, s]`` (bounds ordered), inverted half of the time."""
    lo, hi = (F32(1), F32(s)) if s >= 1 else (F32(s), F32(1))
    scale = F32(F32(rng.random()) * (hi - lo) + lo)
    return float(scale) if rng.integers(2) else float(F32(1.0 / float(scale)))


def draw_darknet(rng: np.random.Generator, orig_hw: Tuple[int, int], net_hw: Tuple[int, int],
                 hyp: Mapping[str, float]) -> DarknetDraw:
    """Draw one image's augmentation as ``load_data_detection`` does.

    ``hyp`` holds ``jitter``, ``resize`` (of the last ``[yolo]``), ``letter_box`` (0/1), ``flip`` (> 0: mirror
    half of the images), ``hue``, ``saturation``, ``exposure`` (Darknet's ``[net]`` values).
    """
    oh, ow = orig_hw
    net_h, net_w = net_hw
    jitter, resize = F32(hyp["jitter"]), F32(hyp.get("resize", 1.0))
    dw, dh = _trunc(F32(ow) * jitter), _trunc(F32(oh) * jitter)
    resize_down = F32(1) / resize if resize > 1 else resize
    resize_up = F32(1) / resize if resize < 1 else resize
    min_rdw = _trunc(F32(ow) * (F32(1) - F32(1) / resize_down) / F32(2))
    min_rdh = _trunc(F32(oh) * (F32(1) - F32(1) / resize_down) / F32(2))
    max_rdw = _trunc(F32(ow) * (F32(1) - F32(1) / resize_up) / F32(2))
    max_rdh = _trunc(F32(oh) * (F32(1) - F32(1) / resize_up) / F32(2))

    resize_r1, resize_r2 = F32(rng.random()), F32(rng.random())
    r1, r2, r3, r4 = (F32(v) for v in rng.random(4))
    flip = bool(rng.integers(2)) if hyp.get("flip", 0) > 0 else False
    hue = float(hyp.get("hue", 0.0))
    dhue = float(F32(F32(rng.random()) * (F32(hue) - F32(-hue)) + F32(-hue)))
    dsat = _rand_scale(rng, float(hyp.get("saturation", 1.0)))
    dexp = _rand_scale(rng, float(hyp.get("exposure", 1.0)))

    pleft, pright = _trunc(_precalc(-dw, dw, r1)), _trunc(_precalc(-dw, dw, r2))
    ptop, pbot = _trunc(_precalc(-dh, dh, r3)), _trunc(_precalc(-dh, dh, r4))
    # C's `int += float`: the sum is formed in float, then truncated.
    hi_w, hi_h = (0, 0) if resize < 1 else (max_rdw, max_rdh)
    pleft = _trunc(F32(pleft) + _precalc(min_rdw, hi_w, resize_r1))
    pright = _trunc(F32(pright) + _precalc(min_rdw, hi_w, resize_r2))
    ptop = _trunc(F32(ptop) + _precalc(min_rdh, hi_h, resize_r1))
    pbot = _trunc(F32(pbot) + _precalc(min_rdh, hi_h, resize_r2))

    if hyp.get("letter_box", 0):
        img_ar = F32(ow) / F32(oh)
        net_ar = F32(net_w) / F32(net_h)
        if img_ar / net_ar > 1:  # the crop grows in height to the network's aspect ratio
            delta_h = (F32(ow) / net_ar - F32(oh)) / F32(2)
            ptop, pbot = _trunc(F32(ptop) - delta_h), _trunc(F32(pbot) - delta_h)
        else:
            delta_w = (F32(oh) * net_ar - F32(ow)) / F32(2)
            pleft, pright = _trunc(F32(pleft) - delta_w), _trunc(F32(pright) - delta_w)
    return DarknetDraw(pleft, pright, ptop, pbot, flip, dhue, dsat, dexp)


# ---------------------------------------------------------------------------------------------- image
def crop_image(image: np.ndarray, dx: int, dy: int, w: int, h: int) -> np.ndarray:
    """Darknet's ``crop_image``: the ``h x w`` window at ``(dx, dy)``; outside pixels repeat the border."""
    ih, iw = image.shape[:2]
    rows = np.clip(np.arange(h) + dy, 0, ih - 1)
    cols = np.clip(np.arange(w) + dx, 0, iw - 1)
    return np.take(np.take(image, rows, axis=0), cols, axis=1)


def resize_image(image: np.ndarray, w: int, h: int) -> np.ndarray:
    """Darknet's ``resize_image``: bilinear, corners aligned (scale ``(in - 1) / (out - 1)``), rows then columns."""
    ih, iw = image.shape[:2]
    if (ih, iw) == (h, w):
        return image.astype(F32, copy=True)
    image = image.astype(F32, copy=False)
    # Pass 1: along x, into an ih x w image.
    w_scale = F32(iw - 1) / F32(w - 1)
    sx = np.arange(w, dtype=F32) * w_scale
    ix = sx.astype(np.int64)
    dx = (sx - ix.astype(F32))[None, :, None]
    right = np.minimum(ix + 1, iw - 1)
    part = (F32(1) - dx) * image[:, ix] + dx * image[:, right]
    if iw == 1:
        part = np.repeat(image[:, -1:], w, axis=1)
    else:
        part[:, -1] = image[:, -1]  # the last column takes the last input column
    # Pass 2: along y; the last row (or a one-row input) has no lower neighbour.
    h_scale = F32(ih - 1) / F32(h - 1)
    sy = np.arange(h, dtype=F32) * h_scale
    iy = sy.astype(np.int64)
    dy = (sy - iy.astype(F32))[:, None, None]
    below = np.minimum(iy + 1, ih - 1)
    upper = (F32(1) - dy) * part[iy]
    if ih == 1:
        return upper.astype(F32)
    out = upper + dy * part[below]
    out[-1] = upper[-1]  # Darknet adds nothing to its last row
    return out.astype(F32)


def rgb_to_hsv(image: np.ndarray) -> np.ndarray:
    """Darknet's ``rgb_to_hsv`` on float32 RGB in [0, 1]: hue in turns [0, 1), saturation, value."""
    r, g, b = (image[..., k].astype(F32) for k in range(3))
    mx = np.maximum(np.maximum(r, g), b)
    mn = np.minimum(np.minimum(r, g), b)
    delta = mx - mn
    safe = np.where(delta == 0, F32(1), delta)
    h = np.where(r == mx, (g - b) / safe, np.where(g == mx, F32(2) + (b - r) / safe, F32(4) + (r - g) / safe))
    h = np.where(h < 0, h + F32(6), h)
    h = (h.astype(np.float64) / 6.0).astype(F32)  # C divides by the double 6.
    s = delta / np.where(mx == 0, F32(1), mx)
    zero = mx == 0
    h, s = np.where(zero, F32(0), h), np.where(zero, F32(0), s)
    return np.stack([h, s, mx], -1).astype(F32)


def hsv_to_rgb(image: np.ndarray) -> np.ndarray:
    """Darknet's ``hsv_to_rgb`` (inverse of :func:`rgb_to_hsv`)."""
    h = F32(6) * image[..., 0].astype(F32)
    s, v = image[..., 1].astype(F32), image[..., 2].astype(F32)
    index = np.floor(h)
    f = h - index
    p = v * (F32(1) - s)
    q = v * (F32(1) - s * f)
    t = v * (F32(1) - s * (F32(1) - f))
    # Darknet's six sectors (index 0..4 and "else"); which of v, q, p, t each channel takes in each.
    candidates = np.stack([v, q, p, t])  # 4, H, W
    sector = np.clip(index, 0, 5).astype(np.intp)[None]
    pick = np.array([[0, 1, 2, 2, 3, 0],   # r: v q p p t v
                     [3, 0, 0, 1, 2, 2],   # g: t v v q p p
                     [2, 2, 3, 0, 0, 1]])  # b: p p t v v q
    rgb = np.stack([np.take_along_axis(candidates, pick[c][sector], 0)[0] for c in range(3)], -1)
    gray = (s == 0)[..., None]
    return np.where(gray, v[..., None], rgb).astype(F32)


def distort_image(image: np.ndarray, dhue: float, dsat: float, dexp: float) -> np.ndarray:
    """Darknet's ``distort_image``: scale saturation and value, shift hue (wrapping), back to RGB, clip to [0, 1]."""
    hsv = rgb_to_hsv(image)
    hsv[..., 1] = hsv[..., 1] * F32(dsat)
    hsv[..., 2] = hsv[..., 2] * F32(dexp)
    hue = hsv[..., 0] + F32(dhue)
    hue = np.where(hue > 1, hue - F32(1), hue)
    hsv[..., 0] = np.where(hue < 0, hue + F32(1), hue)
    return np.clip(hsv_to_rgb(hsv), 0, 1).astype(F32)


def augment_image(image: np.ndarray, draw: DarknetDraw, net_hw: Tuple[int, int]) -> np.ndarray:
    """``H x W x 3`` RGB -> the network input ``net_h x net_w x 3`` float32 [0, 1]: crop, resize, flip, distort.

    ``image`` is float32 in [0, 1] (Darknet's data) or ``uint8`` (divided by 255 after the crop, which only
    moves pixels: the same floats, with less to convert).
    """
    sheight, swidth = draw.crop_size(image.shape[:2])
    cropped = crop_image(image, draw.pleft, draw.ptop, swidth, sheight)
    if cropped.dtype == np.uint8:
        cropped = cropped.astype(F32) / F32(255)
    out = resize_image(cropped, net_hw[1], net_hw[0])
    if draw.flip:
        out = out[:, ::-1].copy()
    return distort_image(out, draw.dhue, draw.dsat, draw.dexp)


# ---------------------------------------------------------------------------------------------- truths
def augment_truths(truths: np.ndarray, draw: DarknetDraw, orig_hw: Tuple[int, int], net_hw: Tuple[int, int]
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """Label boxes through the crop and mirror: ``correct_boxes`` then ``fill_truth_detection``'s checks.

    Args:
        truths: Float[N, 4] ``(x, y, w, h)`` centre boxes normalized to the original image (the label file).
    Returns:
        ``(boxes Float32[K, 4] (x, y, w, h) normalized to the network input, keep Bool[N])``.
    """
    oh, ow = orig_hw
    sheight, swidth = draw.crop_size(orig_hw)
    sx, sy = F32(swidth) / F32(ow), F32(sheight) / F32(oh)
    dx = (F32(draw.pleft) / F32(ow)) / sx
    dy = (F32(draw.ptop) / F32(oh)) / sy
    inv_sx, inv_sy = F32(1.0 / float(sx)), F32(1.0 / float(sy))
    t = np.asarray(truths, dtype=F32).reshape(-1, 4)
    x, y, w, h = t[:, 0], t[:, 1], t[:, 2], t[:, 3]
    half_w, half_h = w / F32(2), h / F32(2)
    invalid = ((x == 0) & (y == 0)) | (x + half_w < 0) | (y + half_h < 0) | (x - half_w > 1) | (y - half_h > 1)
    left, right = (x - half_w) * inv_sx - dx, (x + half_w) * inv_sx - dx
    top, bottom = (y - half_h) * inv_sy - dy, (y + half_h) * inv_sy - dy
    if draw.flip:
        left, right = F32(1) - right, F32(1) - left
    left, right = np.clip(left, 0, 1), np.clip(right, 0, 1)
    top, bottom = np.clip(top, 0, 1), np.clip(bottom, 0, 1)
    nx, ny = (left + right) / F32(2), (top + bottom) / F32(2)
    nw, nh = np.clip(right - left, 0, 1), np.clip(bottom - top, 0, 1)
    net_h, net_w = net_hw
    keep = (~invalid & (nw >= F32(1) / F32(net_w)) & (nh >= F32(1) / F32(net_h))
            & (nx > 0) & (nx <= 1) & (ny > 0) & (ny <= 1))
    return np.stack([nx, ny, nw, nh], 1)[keep].astype(F32), keep


def input_matrix(draw: DarknetDraw, orig_hw: Tuple[int, int], net_hw: Tuple[int, int]) -> np.ndarray:
    """3x3 matrix mapping original-image pixels to network-input pixels (the truths' mapping)."""
    sheight, swidth = draw.crop_size(orig_hw)
    net_h, net_w = net_hw
    sx, sy = net_w / swidth, net_h / sheight
    matrix = np.array([[sx, 0.0, -draw.pleft * sx], [0.0, sy, -draw.ptop * sy], [0.0, 0.0, 1.0]])
    if draw.flip:
        matrix = np.array([[-1.0, 0.0, float(net_w)], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]) @ matrix
    return matrix


def mixup_images(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Darknet's ``blend_images(new, 0.5, old, 0.5)``: ``new * 0.5 + old * 0.5`` in float32."""
    return (new.astype(F32) * F32(0.5) + old.astype(F32) * F32(0.5)).astype(F32)


def mixup_truths(new: np.ndarray, old: np.ndarray, max_boxes: int) -> np.ndarray:
    """Darknet's ``blend_truth``: the rows of ``new`` then those of ``old``, at most ``max_boxes`` in all
    (works on any per-truth rows, e.g. Float[K, 4] boxes or Int64[K] labels)."""
    return np.concatenate([new, old])[:max_boxes]


def _one_image(image: np.ndarray, boxes: np.ndarray, labels: np.ndarray, rng: np.random.Generator,
               net_hw: Tuple[int, int], hyp: Mapping[str, float]):
    """One image's float32 pixels, truths (xyxy input pixels), labels and matrix."""
    oh, ow = image.shape[:2]
    net_h, net_w = net_hw
    draw = draw_darknet(rng, (oh, ow), net_hw, hyp)
    # Darknet shuffles the truths and keeps the first `max` of them, before any check.
    order = rng.permutation(len(labels))[: int(hyp.get("max_boxes", 200))]
    boxes, labels = np.asarray(boxes, np.float32)[order].reshape(-1, 4), np.asarray(labels)[order]
    truths = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2 / ow, (boxes[:, 1] + boxes[:, 3]) / 2 / oh,
                       (boxes[:, 2] - boxes[:, 0]) / ow, (boxes[:, 3] - boxes[:, 1]) / oh], 1)
    out, keep = augment_truths(truths, draw, (oh, ow), net_hw)
    xyxy = np.stack([(out[:, 0] - out[:, 2] / 2) * net_w, (out[:, 1] - out[:, 3] / 2) * net_h,
                     (out[:, 0] + out[:, 2] / 2) * net_w, (out[:, 1] + out[:, 3] / 2) * net_h], 1)
    pixels = augment_image(np.asarray(image, dtype=np.uint8), draw, net_hw)
    return pixels, xyxy.astype(np.float32).reshape(-1, 4), labels[keep].astype(np.int64), \
        input_matrix(draw, (oh, ow), net_hw)


def _to_uint8(pixels: np.ndarray) -> np.ndarray:
    """Darknet's float input rounded to ``uint8`` (within half a level)."""
    return np.clip(np.rint(pixels * 255), 0, 255).astype(np.uint8)


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
    pixels, boxes, labels, matrix = _one_image(image, boxes, labels, rng, net_hw, hyp)
    return _to_uint8(pixels), boxes, labels, matrix


def darknet_item(load: Callable[[int], tuple], index: int, num_items: int, rng: np.random.Generator,
                 net_hw: Tuple[int, int], hyp: Mapping[str, float]
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Training item ``index`` as Darknet makes it, with ``mixup`` (``load(i) -> (image, boxes, labels)``).

    Returns :func:`darknet_sample`'s tuple; the matrix is ``None`` for a mixed image.
    """
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


__all__ = ["DarknetDraw", "augment_image", "augment_truths", "crop_image", "darknet_item", "darknet_sample",
           "distort_image", "draw_darknet", "hsv_to_rgb", "input_matrix", "mixup_images", "mixup_truths",
           "resize_image", "rgb_to_hsv"]
