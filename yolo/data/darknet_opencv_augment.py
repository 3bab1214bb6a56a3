"""Darknet's training augmentation in its OpenCV build (what Darknet users train with), formula for formula:
src/data.c ``load_data_detection`` (the ``#ifdef OPENCV`` branch), ``blend_truth_mosaic``, ``blend_truth``;
src/image_opencv.cpp ``image_data_augmentation``, ``mat_to_image``, ``blend_images_cv``; src/parser.c's
mapping of ``mixup`` / ``cutmix`` / ``mosaic``.

One image goes through OpenCV on ``uint8`` RGB pixels (``load_image_mat_cv`` reads with ``cv::imread`` and swaps
BGR to RGB): the crop of :func:`yolo.data.darknet_augment.darknet_crop` (parts outside the image filled with
the image's mean colour), ``cv::resize`` (``INTER_LINEAR``) to the network size, a mirror, HSV on ``uint8``
(saturation and value scaled with rounding and saturation, hue shifted by ``179 * dhue`` and saturated to
[0, 255]), ``blur`` (1: a 17x17 Gaussian on the background only, the truth boxes copied back from the sharp
image; > 1: a ``(blur/2)*2+1`` Gaussian on the whole image, reduced to ``min_w_h / 8`` by the smallest truth),
``gaussian_noise`` (a ``uint8`` noise field: ``cv::randn`` saturates its negative draws to 0, so only
non-negative noise is added), then ``/ 255`` to float. A batch (one ``load_data_detection`` call) tosses one
coin that turns ``mixup`` / ``mosaic`` off for all its images; ``mixup=1`` averages each image with a second
random one (truths: the first's then the second's); ``mosaic`` fills the four quadrants around a random cut of
each image with four augmented images (one corner of each, every second one pushed into its corner) and moves
their truths with ``blend_truth_mosaic`` (clipped to the picture, or to the quadrant with ``mosaic_bound``).

Randomness: every draw goes through ``rng.random()`` (Darknet's ``random_float()``) or ``rng.integers(k)``
(``random_gen() % k``), one call per Darknet call and in Darknet's order, so a stand-in that replays
Darknet's values reproduces Darknet's batch (tests/test_augment_darknet_opencv.py); a numpy ``Generator`` is
the training source. The draws of one image are an :class:`OpenCVDraw`; the image and truth steps are pure
functions of it. The one exception is the noise field: OpenCV's ``cv::randn`` cannot be replayed, so it comes
from a seed drawn from ``rng`` (``OpenCVDraw.noise_seed``).

Formats: images ``uint8`` ``H x W x 3`` RGB; truths ``Float32[K, 5]`` rows ``(x, y, w, h, class)``, centre
boxes normalized to the image (Darknet's truth rows without the track id); Darknet's batch ``d.X`` is
``Float32[n, 3, h, w]`` in [0, 1] (:meth:`OpenCVBatch.X`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

import cv2
import numpy as np

from yolo.data.darknet_augment import _to_uint8
from yolo.data.darknet_draw import F32, DarknetDraw, _trunc, draw_image_randoms
from yolo.data.darknet_truths import (augment_truths, input_matrix, mixup_images, mixup_truths, truths_from_xyxy,
                                      xyxy_from_truths)

RAND_MAX = 2147483647  # glibc's: random_gen() returns rand()
MOSAIC, MIXUP = 3, 1   # Darknet's use_mixup values of the two blends


def effective_mixup(mixup: int, mosaic: int, cutmix: int) -> int:
    """Darknet's ``use_mixup`` for a detector in the OpenCV build: src/parser.c sets ``mixup`` to 4 (mosaic and
    cutmix), 2 (cutmix) or 3 (mosaic), else keeps ``[net] mixup``; load_data_detection prints that cutmix is not
    supported for detectors and turns 2 into 0 and 4 into 3. Returns 0, ``mixup`` or 3."""
    if mosaic and cutmix:
        return MOSAIC
    if cutmix:
        return 0
    if mosaic:
        return MOSAIC
    return int(mixup)


def mixup_mode(hyp: Mapping[str, float]) -> int:
    """``use_mixup`` from augmentation settings whose ``mosaic`` / ``mixup`` already follow :func:`effective_mixup`."""
    return MOSAIC if hyp.get("mosaic", 0) else (MIXUP if hyp.get("mixup", 0) else 0)


# ---------------------------------------------------------------------------------------------- draws
@dataclass(frozen=True)
class OpenCVDraw:
    """One image's random part in the OpenCV build: the crop as Darknet's variables hold it when the image is
    augmented (after ``letter_box``, the mosaic corner rule and the reset of an invalid crop, which sets
    ``pleft = ptop = 0`` and the crop size to the image's but leaves ``pright`` / ``pbot``), the mirror, the HSV
    changes, ``blur`` (0, 1 or the cfg's value, before the small-object limit), ``gaussian_noise`` (0 or the
    cfg's value) and the seed of the noise field.

    The draws it shares with the plain-C build's :class:`~yolo.data.darknet_augment.DarknetDraw` are made by the
    same :func:`~yolo.data.darknet_augment.draw_image_randoms`; what is this build's own: the unused
    ``r_scale`` draw kept in the stream, the blur and noise draws, the mosaic corner rule and the reset, which is
    why the crop size is kept apart from the margins (:meth:`crop` gives the plain view of it).
    """

    pleft: int
    pright: int
    ptop: int
    pbot: int
    swidth: int
    sheight: int
    flip: bool
    dhue: float = 0.0
    dsat: float = 1.0
    dexp: float = 1.0
    blur: int = 0
    gaussian_noise: int = 0
    noise_seed: int = 0

    def crop(self, orig_hw: Tuple[int, int]) -> DarknetDraw:
        """The crop as a :class:`DarknetDraw` (right and bottom margins from the crop size): the truths' and the
        pixel mapping's view of it."""
        oh, ow = orig_hw
        return DarknetDraw(self.pleft, ow - self.pleft - self.swidth, self.ptop, oh - self.ptop - self.sheight,
                           self.flip, self.dhue, self.dsat, self.dexp)


def _rand_int(rng, lo: int, hi: int) -> int:
    """Darknet's ``rand_int(lo, hi)``: ``random_gen() % (hi - lo + 1) + lo`` (bounds ordered)."""
    lo, hi = min(lo, hi), max(lo, hi)
    return int(rng.integers(hi - lo + 1)) + lo


def draw_opencv(rng, orig_hw: Tuple[int, int], net_hw: Tuple[int, int], hyp: Mapping[str, float],
                use_mixup: int = 0, i_mixup: int = 0) -> OpenCVDraw:
    """Draw one image's augmentation as the OpenCV ``load_data_detection`` does, in its order.

    ``hyp``: ``jitter``, ``resize``, ``letter_box``, ``flip``, ``hue``, ``saturation``, ``exposure``, ``blur``,
    ``gaussian_noise``. ``use_mixup``: the batch's (after its coin); ``i_mixup``: the mosaic piece 0..3
    (top-left, top-right, bottom-left, bottom-right).
    """
    oh, ow = orig_hw
    randoms = draw_image_randoms(rng, hyp, r_scale=True)
    flip = randoms.flip
    use_blur = int(hyp.get("blur", 0))
    blur = 0
    if use_blur:
        blur = (0, 1, use_blur)[_rand_int(rng, 0, 2)]  # 0 none, 1 background, 2 whole image
    use_noise = int(hyp.get("gaussian_noise", 0))
    noise = use_noise if use_noise and _rand_int(rng, 0, 1) == 1 else 0
    noise_seed = int(rng.integers(2 ** 62)) if noise else 0  # not a Darknet draw: cv::randn has its own RNG
    pleft, pright, ptop, pbot = randoms.margins(orig_hw, net_hw, hyp)
    if use_mixup == MOSAIC and rng.integers(2) == 0:
        # "move each 2nd image to the corner": the margin on the picture's side goes to the outer side
        if (i_mixup in (0, 2)) != flip:  # pieces 0 and 2 show their right side (their left one when mirrored)
            pright, pleft = pright + pleft, 0
        else:
            pleft, pright = pleft + pright, 0
        if i_mixup in (0, 1):
            pbot, ptop = pbot + ptop, 0
        else:
            ptop, pbot = ptop + pbot, 0
    swidth, sheight = ow - pleft - pright, oh - ptop - pbot
    if swidth <= 0 or sheight <= 0 or ow - pleft <= 0 or oh - ptop <= 0:  # Darknet's "invalid resize" reset
        swidth, sheight, pleft, ptop = ow, oh, 0, 0
    return OpenCVDraw(pleft, pright, ptop, pbot, swidth, sheight, flip, randoms.dhue, randoms.dsat, randoms.dexp,
                      blur, noise, noise_seed)


def shuffle_order(rng, n: int) -> np.ndarray:
    """Darknet's ``randomize_boxes``: swap truth ``i`` with truth ``random_gen() % n``, for each ``i`` in turn."""
    order = np.arange(n)
    for i in range(n):
        j = int(rng.integers(n))
        order[i], order[j] = order[j], order[i]
    return order


# ---------------------------------------------------------------------------------------------- truths
def fill_truths(rows: np.ndarray, order: np.ndarray, max_boxes: int, draw: OpenCVDraw, orig_hw: Tuple[int, int],
                net_hw: Tuple[int, int]) -> Tuple[np.ndarray, int]:
    """``fill_truth_detection``: the shuffled rows cut to ``max_boxes``, through the crop and mirror, small or
    outside ones dropped; and its return value ``min_w_h``, the smallest side of a kept truth in network pixels.

    ``rows``: Float32[N, 5] ``(x, y, w, h, class)`` normalized to the image. Returns Float32[K, 5] normalized to
    the network input, in Darknet's order.
    """
    rows = np.asarray(rows, F32).reshape(-1, 5)[order][:max_boxes]
    boxes, keep = augment_truths(rows[:, :4], draw.crop(orig_hw), orig_hw, net_hw)
    out = np.concatenate([boxes, rows[keep, 4:5]], 1).astype(F32)
    net_h, net_w = net_hw
    min_w_h = 0
    for w_px, h_px in zip(out[:, 2] * F32(net_w), out[:, 3] * F32(net_h)):  # int min_w_h vs float sides, as C
        if min_w_h == 0:
            min_w_h = int(w_px)
        if min_w_h > w_px:
            min_w_h = int(w_px)
        if min_w_h > h_px:
            min_w_h = int(h_px)
    return out, min_w_h


def blend_truth_mosaic(current: np.ndarray, piece: np.ndarray, max_boxes: int, net_hw: Tuple[int, int],
                       cut_x: int, cut_y: int, i_mixup: int, shifts: Tuple[int, int, int, int],
                       mosaic_bound: bool) -> np.ndarray:
    """Darknet's ``blend_truth_mosaic``: ``piece``'s truths moved into quadrant ``i_mixup`` of the mosaic and
    appended to ``current`` (the mosaic's so far), at most ``max_boxes`` rows considered in all.

    A truth is moved by the piece's offset, then clipped to the picture (a box cut by the picture's border
    shrinks towards its centre) or, with ``mosaic_bound``, to its quadrant in whole pixels; it is kept if it
    lies inside, is more than a pixel wide and high and less than the picture. ``shifts``: ``(left, right, top,
    bot)`` of :func:`mosaic_shifts`. Rows are Float32[K, 5] ``(x, y, w, h, class)`` normalized to the network.
    """
    net_h, net_w = net_hw
    w, h = F32(net_w), F32(net_h)
    # Darknet's build (-Ofast) divides by w and h as products with their float reciprocals; the whole-pixel
    # truncations below can tell the two apart, so we do the same.
    inv_w, inv_h = F32(1) / w, F32(1) / h
    cx, cy = F32(cut_x), F32(cut_y)
    left_shift, right_shift, top_shift, bot_shift = (F32(v) for v in shifts)
    current = np.asarray(current, F32).reshape(-1, 5)
    piece = np.asarray(piece, F32).reshape(-1, 5)[:max(max_boxes - len(current), 0)]
    xb, yb, wb, hb = (piece[:, k].copy() for k in range(4))
    xb = xb - (w - cx - right_shift) * inv_w if i_mixup in (0, 2) else xb + (cx - left_shift) * inv_w
    yb = yb - (h - cy - bot_shift) * inv_h if i_mixup in (0, 1) else yb + (cy - top_shift) * inv_h

    def ints(centre, size, scale):  # (int)((c - s / 2) * scale), (int)((c + s / 2) * scale)
        return (np.trunc((centre - size / F32(2)) * scale).astype(np.int64),
                np.trunc((centre + size / F32(2)) * scale).astype(np.int64))

    left, right = ints(xb, wb, w)
    top, bot = ints(yb, hb, h)
    if mosaic_bound:
        lb, rb = (F32(0), cx) if i_mixup in (0, 2) else (cx, w)
        tb, bb = (F32(0), cy) if i_mixup in (0, 1) else (cy, h)
        left = np.where(left < lb, int(lb), left)
        right = np.where(right > rb, int(rb), right)
        top = np.where(top < tb, int(tb), top)
        bot = np.where(bot > bb, int(bb), bot)
        xb = ((right + left).astype(F32) / F32(2)) * inv_w
        wb = (right - left).astype(F32) * inv_w
        yb = ((bot + top).astype(F32) / F32(2)) * inv_h
        hb = (bot - top).astype(F32) * inv_h
    else:
        for low, high, centre, size, scale, inv in ((left, right, xb, wb, w, inv_w), (top, bot, yb, hb, h, inv_h)):
            cut_low = low < 0
            diff = low.astype(F32) * inv
            centre[cut_low] -= diff[cut_low] / F32(2)
            size[cut_low] += diff[cut_low]
            cut_high = high > int(scale)
            diff = (high - int(scale)).astype(F32) * inv
            centre[cut_high] -= diff[cut_high] / F32(2)
            size[cut_high] -= diff[cut_high]
        left, right = ints(xb, wb, w)
        top, bot = ints(yb, hb, h)
    lowest_w, lowest_h = F32(1) / w, F32(1) / h
    keep = ((left >= 0) & (right <= net_w) & (top >= 0) & (bot <= net_h) & (wb > 0) & (wb < 1) & (hb > 0)
            & (hb < 1) & (xb > 0) & (xb < 1) & (yb > 0) & (yb < 1) & (wb > lowest_w) & (hb > lowest_h))
    moved = np.stack([xb, yb, wb, hb, piece[:, 4]], 1)[keep].astype(F32)
    return np.concatenate([current, moved])


# ---------------------------------------------------------------------------------------------- pixels
def _lut(values: np.ndarray) -> np.ndarray:
    return np.clip(values, 0, 255).astype(np.uint8)


_LEVELS = np.arange(256, dtype=F32)
_INV_255 = F32(1) / F32(255)


def image_data_augmentation(image: np.ndarray, net_hw: Tuple[int, int], pleft: int, ptop: int, swidth: int,
                            sheight: int, flip: bool, dhue: float, dsat: float, dexp: float, blur: int = 0,
                            truths: Optional[np.ndarray] = None, noise: Optional[np.ndarray] = None) -> np.ndarray:
    """Darknet's ``image_data_augmentation`` (OpenCV build) before ``mat_to_image``.

    Args:
        image: ``uint8`` ``H x W x 3`` RGB. net_hw: the output ``(h, w)``.
        pleft, ptop, swidth, sheight: the crop rectangle in image pixels (may reach outside).
        blur: 0, 1 (background only: ``truths`` keep their sharp pixels) or the kernel hint (> 1).
        truths: Float[K, >=4] ``(x, y, w, h, ...)`` normalized to the output, for ``blur == 1``.
        noise: ``uint8`` ``h x w x 3`` added with saturation (:func:`noise_field`), or None.
    Returns:
        ``uint8`` ``h x w x 3`` RGB.
    """
    net_h, net_w = net_hw
    ih, iw = image.shape[:2]
    if pleft == 0 and ptop == 0 and (swidth, sheight) == (iw, ih):
        sized = cv2.resize(image, (net_w, net_h), interpolation=cv2.INTER_LINEAR)
    else:
        # cv::mean then setTo: the mean colour rounded half to even, as saturate_cast<uchar>
        mean = np.rint(np.array(cv2.mean(np.ascontiguousarray(image))[:image.shape[2]]))
        cropped = np.empty((sheight, swidth, image.shape[2]), np.uint8)
        cropped[:] = mean.astype(np.uint8)
        x0, y0 = max(pleft, 0), max(ptop, 0)
        x1, y1 = min(pleft + swidth, iw), min(ptop + sheight, ih)
        if x1 > x0 and y1 > y0:
            dx, dy = max(0, -pleft), max(0, -ptop)
            cropped[dy:dy + y1 - y0, dx:dx + x1 - x0] = image[y0:y1, x0:x1]
        sized = cv2.resize(cropped, (net_w, net_h), interpolation=cv2.INTER_LINEAR)
    if flip:
        sized = cv2.flip(sized, 1)
    if F32(dsat) != 1 or F32(dexp) != 1 or F32(dhue) != 0:
        hue, sat, val = cv2.split(cv2.cvtColor(sized, cv2.COLOR_RGB2HSV))
        # hsv[1] *= dsat, hsv[2] *= dexp: convertTo, float product rounded half to even and saturated;
        # hsv[0] += 179 * dhue: cv::add of a uint8 Mat and a scalar works in int (the scalar rounded), saturated.
        shift = int(np.rint(np.float64(F32(179) * F32(dhue))))
        hue = cv2.LUT(hue, _lut(np.arange(256) + shift))
        sat = cv2.LUT(sat, _lut(np.rint(_LEVELS * F32(dsat))))
        val = cv2.LUT(val, _lut(np.rint(_LEVELS * F32(dexp))))
        sized = cv2.cvtColor(cv2.merge([hue, sat, val]), cv2.COLOR_HSV2RGB)
    if blur:
        ksize = 17 if blur == 1 else (int(blur) // 2) * 2 + 1
        blurred = cv2.GaussianBlur(sized, (ksize, ksize), 0)
        if blur == 1 and truths is not None:
            rows, cols = sized.shape[:2]
            boxes = np.asarray(truths, F32)
            for x, y, w, h in (boxes.reshape(len(boxes), -1)[:, :4] if boxes.size else ()):
                if x == 0:
                    break
                left = int((float(x) - float(w) / 2.0) * cols)   # double arithmetic, truncated
                top = int((float(y) - float(h) / 2.0) * rows)
                width, height = int(w * F32(cols)), int(h * F32(rows))  # float arithmetic
                xa, ya = max(left, 0), max(top, 0)
                xb, yb = min(left + width, cols), min(top + height, rows)
                if xb > xa and yb > ya:
                    blurred[ya:yb, xa:xb] = sized[ya:yb, xa:xb]
        sized = blurred
    if noise is not None:
        sized = cv2.add(sized, noise)  # uint8 + uint8, saturated
    return sized


def noise_field(seed: int, shape: Tuple[int, ...], sigma: int) -> np.ndarray:
    """The noise Darknet adds for ``gaussian_noise = sigma``: ``cv::randn`` into a ``uint8`` Mat, i.e. normal
    draws of standard deviation ``min(sigma, 127)`` rounded and saturated to [0, 255] (negatives become 0)."""
    sigma = min(max(int(sigma), 0), 127)
    draws = np.random.default_rng(seed).standard_normal(shape, dtype=F32) * F32(sigma)
    return np.clip(np.rint(draws), 0, 255).astype(np.uint8)


def mat_to_image(sized: np.ndarray) -> np.ndarray:
    """Darknet's ``mat_to_image``: ``uint8`` ``h x w x 3`` -> Float32 ``3 x h x w`` planes in [0, 1].

    The source divides by ``255.0f``; Darknet's build (``-Ofast``) multiplies by the float reciprocal, which
    differs by one float step for half of the levels: we do what the built Darknet does.
    """
    planes = np.ascontiguousarray(sized.transpose(2, 0, 1)).astype(F32)
    planes *= _INV_255
    return planes


# ---------------------------------------------------------------------------------------------- mosaic
def mosaic_cut(rng, net_hw: Tuple[int, int]) -> Tuple[int, int]:
    """``cut_x``, ``cut_y``: ``rand_int`` between 20% and 80% of the network's width / height."""
    net_h, net_w = net_hw
    cut_x = _rand_int(rng, _trunc(F32(net_w) * F32(0.2)), _trunc(F32(net_w) * (F32(1) - F32(0.2))))
    cut_y = _rand_int(rng, _trunc(F32(net_h) * F32(0.2)), _trunc(F32(net_h) * (F32(1) - F32(0.2))))
    return cut_x, cut_y


def mosaic_shifts(draw: OpenCVDraw, orig_hw: Tuple[int, int], net_hw: Tuple[int, int], cut: Tuple[int, int]
                  ) -> Tuple[int, int, int, int]:
    """``(left, right, top, bot)`` shifts of a mosaic piece: the crop's outward margins (negative ``p*``, after
    the mirror swaps ``pleft`` and ``pright``) in network pixels, at most the quadrant's size."""
    oh, ow = orig_hw
    net_h, net_w = net_hw
    pleft, pright = (draw.pright, draw.pleft) if draw.flip else (draw.pleft, draw.pright)

    def outward(p: int, size: int, orig: int) -> int:  # max(0, -p * size / orig) in C's int arithmetic
        return (-p * size) // orig if -p * size > 0 else 0

    return (min(cut[0], outward(pleft, net_w, ow)), min(net_w - cut[0], outward(pright, net_w, ow)),
            min(cut[1], outward(draw.ptop, net_h, oh)), min(net_h - cut[1], outward(draw.pbot, net_h, oh)))


def place_piece(canvas: np.ndarray, piece: np.ndarray, i_mixup: int, cut: Tuple[int, int],
                shifts: Tuple[int, int, int, int]) -> None:
    """Copy quadrant ``i_mixup`` of the mosaic (``canvas``, ``h x w x 3``) from the augmented ``piece``: the
    piece's corner next to the cut, moved inwards by the shifts."""
    h, w = canvas.shape[:2]
    cut_x, cut_y = cut
    left_shift, right_shift, top_shift, bot_shift = shifts
    x_src = w - cut_x - right_shift if i_mixup in (0, 2) else left_shift
    cols = slice(0, cut_x) if i_mixup in (0, 2) else slice(cut_x, w)
    if i_mixup in (0, 1):
        y_src, rows = h - cut_y - bot_shift, slice(0, cut_y)
    else:
        y_src, rows = top_shift, slice(cut_y, h)
    height, width = rows.stop - rows.start, cols.stop - cols.start
    canvas[rows, cols] = piece[y_src:y_src + height, x_src:x_src + width]


# ---------------------------------------------------------------------------------------------- a batch
@dataclass
class OpenCVBatch:
    """What one ``load_data_detection`` call returns: per image its pixels (``uint8`` ``h x w x 3``, or float32
    in [0, 1] for a mixup blend), its truths (Float32[K, 5] normalized rows), and its draw when the image is a
    single augmented image (None in a mixup or mosaic)."""

    images: List[np.ndarray]
    truths: List[np.ndarray]
    draws: List[Optional[OpenCVDraw]]
    use_mixup: int

    def X(self) -> np.ndarray:
        """Darknet's ``d.X``: Float32[n, 3, h, w] planes in [0, 1]."""
        return np.stack([mat_to_image(im) if im.dtype == np.uint8 else np.ascontiguousarray(im.transpose(2, 0, 1))
                         for im in self.images])


Loader = Callable[[int], Tuple[np.ndarray, np.ndarray]]  # index -> (uint8 RGB image, Float32[N, 5] rows)


def load_data_detection(rng, n: int, num_items: int, load: Loader, net_hw: Tuple[int, int],
                        hyp: Mapping[str, float], first: Optional[Sequence[int]] = None) -> OpenCVBatch:
    """One call of the OpenCV build's ``load_data_detection``: ``n`` images at ``net_hw`` (``(h, w)``).

    ``load(i)`` gives image ``i`` of ``num_items``; each round (1, 2 with mixup, 4 with mosaic) picks ``n`` of
    them with ``random_gen() % num_items`` as ``get_random_paths_custom``, except round 0 when ``first`` names
    its images. ``hyp``: as :func:`draw_opencv`, plus ``max_boxes``, ``mixup``, ``mosaic`` (see
    :func:`mixup_mode`) and ``mosaic_bound``.
    """
    use_mixup = mixup_mode(hyp)
    if use_mixup == MOSAIC and hyp.get("letter_box", 0):
        raise ValueError("letter_box=1 with mosaic=1 is not supported by Darknet (load_data_detection refuses it)")
    max_boxes = int(hyp.get("max_boxes", 200))
    rng.integers(RAND_MAX)  # random_index: names the images Darknet saves with -show_imgs
    if rng.integers(2) == 0:
        use_mixup = 0
    cuts = [mosaic_cut(rng, net_hw) for _ in range(n)] if use_mixup == MOSAIC else []
    net_h, net_w = net_hw
    images: List[np.ndarray] = [np.zeros((net_h, net_w, 3), np.uint8) for _ in range(n)]
    truths = [np.zeros((0, 5), F32) for _ in range(n)]
    draws: List[Optional[OpenCVDraw]] = [None] * n
    for i_mixup in range(use_mixup + 1):
        if i_mixup == 0 and first is not None:
            picks = [int(k) for k in first]
        else:
            picks = [int(rng.integers(num_items)) for _ in range(n)]
        for i in range(n):
            image, rows = load(picks[i])
            orig_hw = image.shape[:2]
            draw = draw_opencv(rng, orig_hw, net_hw, hyp, use_mixup, i_mixup)
            order = shuffle_order(rng, len(rows))
            kept, min_w_h = fill_truths(rows, order, max_boxes, draw, orig_hw, net_hw)
            blur = draw.blur
            if min_w_h // 8 < blur and blur > 1:  # "disable blur if one of the objects is too small"
                blur = min_w_h // 8
            noise = noise_field(draw.noise_seed, (net_h, net_w, 3), draw.gaussian_noise) if draw.gaussian_noise \
                else None
            sized = image_data_augmentation(image, net_hw, draw.pleft, draw.ptop, draw.swidth, draw.sheight,
                                            draw.flip, draw.dhue, draw.dsat, draw.dexp, blur, kept, noise)
            if use_mixup == 0 or i_mixup == 0 and use_mixup == MIXUP:
                images[i], truths[i], draws[i] = sized, kept, draw if use_mixup == 0 else None
            elif use_mixup == MIXUP:
                # blend_images_cv(new, 0.5, old, 0.5): float32 average; blend_truth: the first image's truths first
                images[i] = mixup_images(mat_to_image(sized), mat_to_image(images[i])).transpose(1, 2, 0)
                truths[i] = mixup_truths(truths[i], kept, max_boxes)
            else:
                shifts = mosaic_shifts(draw, orig_hw, net_hw, cuts[i])
                place_piece(images[i], sized, i_mixup, cuts[i], shifts)
                truths[i] = blend_truth_mosaic(truths[i], kept, max_boxes, net_hw, cuts[i][0], cuts[i][1], i_mixup,
                                               shifts, bool(hyp.get("mosaic_bound", 0)))
    return OpenCVBatch(images, truths, draws, use_mixup)


def darknet_opencv_item(load: Callable[[int], tuple], index: int, num_items: int, rng: np.random.Generator,
                        net_hw: Tuple[int, int], hyp: Mapping[str, float]
                        ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Training item ``index`` as Darknet's OpenCV build makes it: a ``load_data_detection`` call of one image
    whose first round is ``index`` (the mixup / mosaic partners are random items), with ``load(i) -> (image RGB
    uint8, boxes Float32[N, 4] xyxy original pixels, labels Int64[N])``.

    Returns ``(image uint8 net_h x net_w x 3, boxes Float32[K, 4] xyxy input pixels, labels Int64[K], matrix)``;
    the 3x3 original -> input matrix is None for a mixup or mosaic image.
    """
    def load_rows(i: int) -> Tuple[np.ndarray, np.ndarray]:
        image, boxes, labels = load(i)
        sizes[i] = image.shape[:2]
        rows = np.concatenate([truths_from_xyxy(boxes, sizes[i]), np.asarray(labels, F32).reshape(-1, 1)], 1)
        return np.asarray(image, np.uint8), rows.astype(F32)

    sizes = {}
    batch = load_data_detection(rng, 1, num_items, load_rows, net_hw, hyp, first=[index])
    image, rows, draw = batch.images[0], batch.truths[0], batch.draws[0]
    image = image if image.dtype == np.uint8 else _to_uint8(image)
    matrix = input_matrix(draw.crop(sizes[index]), sizes[index], net_hw) if draw is not None else None
    return image, xyxy_from_truths(rows, net_hw), rows[:, 4].astype(np.int64), matrix


__all__ = ["OpenCVBatch", "OpenCVDraw", "blend_truth_mosaic", "darknet_opencv_item", "draw_opencv",
           "effective_mixup", "fill_truths", "image_data_augmentation", "load_data_detection", "mat_to_image",
           "mixup_mode", "mosaic_cut", "mosaic_shifts", "noise_field", "place_piece", "shuffle_order"]
