"""Darknet's ``rand_scale`` (src/utils.c) against a plain transcription of its C, and the ``yolo`` pipeline's
colour factor, which only shares its range."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from yolo.data.darknet_random import draw_rand_scale, rand_scale
from yolo.data.transforms import random_factor_or_inverse


def c_float(x: float) -> float:
    """``x`` rounded to a C float (a float32 round trip through ``struct``)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def transcription(u: float, coin: int, s: float) -> float:
    """utils.c: ``scale = rand_uniform_strong(1, s)`` (bounds swapped when ``s < 1``; ``random_float() * (max -
    min) + min``), then ``scale`` if ``random_gen() % 2`` else ``1. / scale``, each step a C float."""
    lo, hi = (1.0, c_float(s)) if c_float(s) >= 1.0 else (c_float(s), 1.0)
    scale = c_float(c_float(c_float(u) * c_float(hi - lo)) + lo)
    return scale if coin % 2 else c_float(1.0 / scale)


@pytest.mark.parametrize("s", [1.5, 1.0, 0.5, 2.0, 1.4, 0.9])
def test_rand_scale_matches_the_c(s):
    draws = list(np.random.default_rng(7).random(300)) + [0.0, 1.0, 0.5]
    for u in draws:
        for coin in (0, 1):
            assert float(rand_scale(u, coin, s)) == transcription(u, coin, s), (u, coin)


class Scripted:
    """A generator stand-in that hands out given draws and records the order they are asked for."""

    def __init__(self, u: float, coin: int):
        self.u, self.coin, self.calls = u, coin, []

    def random(self):
        self.calls.append("random")
        return self.u

    def integers(self, n):
        self.calls.append(f"integers({n})")
        return self.coin


@pytest.mark.parametrize("u,coin,s", [(0.5, 1, 1.5), (0.5, 0, 1.5), (0.25, 1, 0.5), (0.0, 0, 1.0)])
def test_draw_rand_scale_takes_the_uniform_then_the_coin(u, coin, s):
    rng = Scripted(u, coin)
    assert draw_rand_scale(rng, s) == transcription(u, coin, s)
    assert rng.calls == ["random", "integers(2)"]  # Darknet: rand_uniform_strong, then random_gen() % 2
    assert draw_rand_scale(Scripted(0.5, 1), 1.5) == 1.25  # 1 + 0.5 * (1.5 - 1), kept


def test_darknet_draws_even_when_s_is_one():
    rng = Scripted(0.3, 0)
    assert draw_rand_scale(rng, 1.0) == 1.0 and len(rng.calls) == 2


def test_the_yolo_pipeline_factor_has_rand_scales_range_only():
    rng = np.random.default_rng(0)
    values = np.array([random_factor_or_inverse(rng, 1.5) for _ in range(2000)])
    assert values.min() >= 1 / 1.5 and values.max() <= 1.5
    above = values > 1
    assert 0.45 < above.mean() < 0.55  # inverted half of the time
    assert np.all(values[above] > 1) and np.all(values[~above] < 1)
    before = rng.bit_generator.state
    assert random_factor_or_inverse(rng, 1.0) == 1.0 and random_factor_or_inverse(rng, 0.0) == 1.0
    assert rng.bit_generator.state == before  # no draw for s <= 1, unlike Darknet's rand_scale
