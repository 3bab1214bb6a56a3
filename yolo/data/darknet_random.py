"""Darknet's ``rand_scale`` (src/utils.c), the factor its colour jitter and its multi-scale rule draw.

``rand_scale(s)`` takes ``scale = rand_uniform_strong(1, s)`` (uniform between 1 and ``s``, the bounds put in
order, so ``s < 1`` draws in ``[s, 1]``), then keeps ``scale`` when ``random_gen() % 2`` is 1 and returns
``1 / scale`` otherwise. Everything is C ``float`` arithmetic, so it is done here in ``float32``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["rand_scale", "draw_rand_scale"]

F32 = np.float32


def rand_scale(u: float, coin: int, coef: float) -> np.float32:
    """Darknet's ``rand_scale(coef)`` from its two draws: ``u`` in [0, 1] and a coin (1: keep, 0: invert)."""
    lo, hi = sorted((F32(1.0), F32(coef)))
    scale = F32(F32(F32(u) * F32(hi - lo)) + lo)
    return scale if coin else F32(1.0 / float(scale))


def draw_rand_scale(rng: np.random.Generator, coef: float) -> float:
    """:func:`rand_scale` with its two draws taken from ``rng``, in Darknet's order: ``u`` (``rng.random()``), then
    the coin (``rng.integers(2)``)."""
    u = rng.random()
    return float(rand_scale(u, int(rng.integers(2)), coef))
