"""Darknet's multi-scale training: the ``random`` option of the last ``[yolo]``/``[region]`` head.

Darknet's ``train_detector`` (src/detector.c) picks a new network input size every 10 iterations (an
iteration is one update: ``batch`` images, all at one size) when that head's ``random`` is non-zero:

* ``coef = 1.4`` when ``random=1``, else ``coef = random`` (``parse_yolo`` reads it as a float);
* ``r = rand_scale(coef)`` (:mod:`yolo.data.darknet_random`): ``s`` uniform between 1 and ``coef``, then
  ``s`` or ``1/s`` on a coin;
* each side becomes ``roundl(r * init / resize_step + 1) * resize_step`` (``init``: the run's
  ``width``/``height``; ``resize_step`` from ``[net]``, default 32; the ``+ 1`` is Darknet's);
* a shrinking draw (``r < 1``) that still lands above the initial size keeps the initial size;
* the first resize of a run and any resize after iteration ``max_batches - 100`` use the largest size,
  ``roundl(coef * init / resize_step + 1) * resize_step``;
* no side below ``resize_step``.

The images are then *loaded* at the new size (Darknet restarts its loader thread with the new ``w``/``h``);
:class:`yolo.data.loader.SizedBatchSampler` hands the size to the dataset with every index.

Reproducibility: Darknet draws ``r`` from C's ``rand()`` (not seeded, not reproducible). Here the draw
of the size period ``p`` (updates ``10 p .. 10 p + 9``) comes from ``numpy.random.default_rng([seed, p])``,
so a run's sizes are a function of ``(seed, update index)``: a resumed run repeats the sizes of an
uninterrupted one (Darknet, which counts from 0 again after a restart, would draw anew and use the largest
size for the restart's first 10 iterations).
"""
from __future__ import annotations

import math
from typing import Tuple

import numpy as np

from yolo.data.darknet_random import rand_scale

F32 = np.float32
EVERY = 10          # iterations between size changes (train_detector: count++ % 10)
LAST_AT_MAX = 100   # the last iterations run at the largest size (max_batches - 100)


def _roundl(x: float) -> int:
    """C's ``roundl``: halves away from zero."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def random_coef(random: float) -> np.float32:
    """``rand_coef``: 1.4 for ``random=1``, else the cfg's value (as a C float)."""
    return F32(1.4) if F32(random) == F32(1.0) else F32(random)


def _side(factor: np.float32, init: int, step: int) -> int:
    # float arithmetic as in C: float * int, / int, + 1, then roundl
    return _roundl(float(F32(F32(F32(factor * F32(init)) / F32(step)) + F32(1.0)))) * step


def darknet_size(random_val: float, init_hw: Tuple[int, int], coef: float, resize_step: int = 32,
                 largest: bool = False) -> Tuple[int, int]:
    """The ``(h, w)`` ``train_detector`` resizes to for the draw ``random_val = rand_scale(coef)``.

    ``largest``: the first resize of a run or one after ``max_batches - 100`` (the draw is then unused).
    """
    init_h, init_w = int(init_hw[0]), int(init_hw[1])
    step = int(resize_step)
    random_val, coef = F32(random_val), F32(coef)
    h, w = _side(random_val, init_h, step), _side(random_val, init_w, step)
    if random_val < 1 and (w > init_w or h > init_h):
        h, w = init_h, init_w
    if largest:
        h, w = _side(coef, init_h, step), _side(coef, init_w, step)
    return max(h, step), max(w, step)


class DarknetMultiScale:
    """The input size of every update under Darknet's ``random`` rule, seeded.

    Example::

        sizes = DarknetMultiScale((416, 416), random=1.0, resize_step=32, total_updates=5000, seed=0)
        sizes(0)   # (608, 608): the first period runs at the largest size
        sizes(10)  # a drawn size, the same for updates 10..19
    """

    def __init__(self, init_hw: Tuple[int, int], random: float, resize_step: int = 32, total_updates: int = 0,
                 seed: int = 0):
        if not random:
            raise ValueError("random=0 means no multi-scale")
        if int(resize_step) < 1:
            raise ValueError(f"resize_step={resize_step} must be at least 1")
        self.init_hw = (int(init_hw[0]), int(init_hw[1]))
        self.coef = random_coef(random)
        self.resize_step, self.total_updates, self.seed = int(resize_step), int(total_updates), int(seed)

    def draw(self, period: int) -> np.float32:
        """``rand_scale(coef)`` for size period ``period`` (updates ``10 period .. 10 period + 9``)."""
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, int(period)])
        u = F32(rng.random())
        return rand_scale(u, int(rng.integers(2)), self.coef)

    def __call__(self, update: int) -> Tuple[int, int]:
        """The ``(h, w)`` of every image of update ``update`` (0-based over the whole run)."""
        period = int(update) // EVERY
        first_of_period = period * EVERY  # train_detector's get_current_iteration() at the resize
        largest = period == 0 or first_of_period > self.total_updates - LAST_AT_MAX
        return darknet_size(self.draw(period), self.init_hw, self.coef, self.resize_step, largest)

    def largest(self) -> Tuple[int, int]:
        """The largest size this rule uses (the first and the last iterations)."""
        return darknet_size(F32(1.0), self.init_hw, self.coef, self.resize_step, largest=True)


__all__ = ["DarknetMultiScale", "darknet_size", "random_coef"]
