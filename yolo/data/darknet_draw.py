"""The random part of Darknet's detection augmentation (src/data.c ``load_data_detection``, the build without
OpenCV), drawn once per image into a :class:`DarknetDraw`: the crop's four sides (``jitter``, ``resize``,
``letter_box``), the mirror (``flip``) and the HSV changes (``hue``, ``saturation``, ``exposure``), in Darknet's
order of draws. The image and truth functions (:mod:`yolo.data.darknet_augment`, :mod:`yolo.data.darknet_truths`)
are pure functions of it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Tuple

import numpy as np

from yolo.data.darknet_random import draw_rand_scale

F32 = np.float32


@dataclass(frozen=True)
class DarknetDraw:
    """The random part of one image's augmentation in the plain-C build: the crop (pixels cut from each side;
    negative values extend the crop beyond the image), the mirror, and the HSV changes (hue shift in turns,
    factors); made by :func:`draw_darknet` from :func:`draw_image_randoms`.

    The OpenCV build's draw (:class:`yolo.data.darknet_opencv_augment.OpenCVDraw`) takes the same randoms and
    more (blur, noise), and its crop passes the mosaic corner rule and Darknet's reset of an invalid crop, after
    which its right and bottom margins no longer give the crop size: it keeps the size apart. Here the four
    margins are the crop.
    """

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


def darknet_crop(orig_hw: Tuple[int, int], net_hw: Tuple[int, int], hyp: Mapping[str, float],
                 resize_r1: float, resize_r2: float, r1: float, r2: float, r3: float, r4: float
                 ) -> Tuple[int, int, int, int]:
    """``(pleft, pright, ptop, pbot)`` from ``load_data_detection``'s uniform draws (``random_float``): the
    ``jitter`` crop, the ``resize`` zoom and the ``letter_box`` widening, integer formulas as in C.

    ``hyp`` holds ``jitter``, ``resize`` and ``letter_box`` (see :func:`draw_darknet`).
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
    resize_r1, resize_r2 = F32(resize_r1), F32(resize_r2)

    pleft, pright = _trunc(_precalc(-dw, dw, F32(r1))), _trunc(_precalc(-dw, dw, F32(r2)))
    ptop, pbot = _trunc(_precalc(-dh, dh, F32(r3))), _trunc(_precalc(-dh, dh, F32(r4)))
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
    return pleft, pright, ptop, pbot


@dataclass(frozen=True)
class ImageRandoms:
    """The random values ``load_data_detection`` takes for one image in both of Darknet's builds, in its order
    (src/data.c, under ``if (!augmentation_calculated || !track)``): the zoom's uniforms ``resize_r``
    (``resize_r1``, ``resize_r2``), the jitter's ``jitter_r`` (``r1`` .. ``r4``: left, right, top, bottom), the
    mirror, and the colour changes (hue shift in turns; saturation and exposure factors from ``rand_scale``)."""

    resize_r: Tuple[np.float32, np.float32]
    jitter_r: Tuple[np.float32, np.float32, np.float32, np.float32]
    flip: bool
    dhue: float
    dsat: float
    dexp: float

    def margins(self, orig_hw: Tuple[int, int], net_hw: Tuple[int, int], hyp: Mapping[str, float]
                ) -> Tuple[int, int, int, int]:
        """``(pleft, pright, ptop, pbot)``: :func:`darknet_crop` of these uniforms."""
        return darknet_crop(orig_hw, net_hw, hyp, *self.resize_r, *self.jitter_r)


def draw_image_randoms(rng, hyp: Mapping[str, float], r_scale: bool) -> ImageRandoms:
    """Draw :class:`ImageRandoms` from ``rng`` in Darknet's order: ``rng.random()`` for each ``random_float()``,
    ``rng.integers(2)`` for the mirror's ``random_gen() % 2`` (only when ``hyp["flip"]`` > 0), and
    :func:`draw_rand_scale`'s two draws for each factor. ``hyp``: ``flip``, ``hue``, ``saturation``, ``exposure``.

    ``r_scale``: also take ``r_scale = random_float()``, which both of Darknet's builds draw between the mirror
    and the hue and never use. The OpenCV draw takes it: its whole stream is compared with Darknet's, call for
    call. The plain-C draw does not and never did: what is compared with Darknet there is the values a draw
    gives (fed to Darknet's image and truth functions), not the stream (its truths are shuffled with
    ``rng.permutation``, not Darknet's ``randomize_boxes``), and taking the extra draw would change every seeded
    augmentation of the ``darknet`` pipeline.
    """
    resize_r = (F32(rng.random()), F32(rng.random()))
    jitter_r = tuple(F32(rng.random()) for _ in range(4))
    flip = bool(rng.integers(2)) if hyp.get("flip", 0) > 0 else False
    if r_scale:
        rng.random()
    hue = F32(hyp.get("hue", 0.0))
    dhue = float(F32(F32(rng.random()) * (hue - -hue) + -hue))
    dsat = draw_rand_scale(rng, float(hyp.get("saturation", 1.0)))
    dexp = draw_rand_scale(rng, float(hyp.get("exposure", 1.0)))
    return ImageRandoms(resize_r, jitter_r, flip, dhue, dsat, dexp)


def draw_darknet(rng: np.random.Generator, orig_hw: Tuple[int, int], net_hw: Tuple[int, int],
                 hyp: Mapping[str, float]) -> DarknetDraw:
    """Draw one image's augmentation as the plain-C ``load_data_detection`` does (less its unused ``r_scale``,
    see :func:`draw_image_randoms`).

    ``hyp`` holds ``jitter``, ``resize`` (of the last ``[yolo]``), ``letter_box`` (0/1), ``flip`` (> 0: mirror
    half of the images), ``hue``, ``saturation``, ``exposure`` (Darknet's ``[net]`` values).
    """
    randoms = draw_image_randoms(rng, hyp, r_scale=False)
    pleft, pright, ptop, pbot = randoms.margins(orig_hw, net_hw, hyp)
    return DarknetDraw(pleft, pright, ptop, pbot, randoms.flip, randoms.dhue, randoms.dsat, randoms.dexp)
