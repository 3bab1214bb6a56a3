"""Darknet's ``random`` multi-scale rule (train_detector in src/detector.c) and its use in training.

The size formula lives inline in ``train_detector`` (no Darknet function to call through the harness), so
it is checked against a plain transcription of those lines written here, with C's float arithmetic done
through ``struct`` (a float32 round trip) and ``roundl`` through ``decimal``.
"""
from __future__ import annotations

import decimal
import struct

import numpy as np
import pytest
import yaml

from cfg_snippets import CONV8, CONV8_MAXPOOL
from yolo.data import SHAPE_NAMES, DetectionDataset, ensure_shapes_dataset
from yolo.data.darknet_multiscale import DarknetMultiScale, darknet_size, random_coef
from yolo.data.darknet_random import rand_scale
from yolo.engine import TrainOptions, Trainer


def f(x: float) -> float:
    """A C float: ``x`` rounded to float32."""
    return struct.unpack("f", struct.pack("f", x))[0]


def c_roundl(x: float) -> int:
    return int(decimal.Decimal(x).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


def transcription(u: float, coin: int, random: float, init_w: int, init_h: int, resize_step: int,
                  iteration: int, max_batches: int, first: bool):
    """train_detector's resize block for one draw: ``u`` is random_float(), ``coin`` random_gen() % 2."""
    rand_coef = f(1.4)
    if f(random) != 1.0:
        rand_coef = f(random)
    lo, hi = (1.0, rand_coef) if rand_coef >= 1.0 else (rand_coef, 1.0)   # rand_uniform_strong's swap
    scale = f(f(f(u) * f(hi - lo)) + lo)
    random_val = scale if coin else f(1.0 / scale)
    dim_w = c_roundl(f(f(f(random_val * init_w) / resize_step) + 1)) * resize_step
    dim_h = c_roundl(f(f(f(random_val * init_h) / resize_step) + 1)) * resize_step
    if random_val < 1 and (dim_w > init_w or dim_h > init_h):
        dim_w, dim_h = init_w, init_h
    max_dim_w = c_roundl(f(f(f(rand_coef * init_w) / resize_step) + 1)) * resize_step
    max_dim_h = c_roundl(f(f(f(rand_coef * init_h) / resize_step) + 1)) * resize_step
    if first or iteration > max_batches - 100:  # avg_loss < 0 only before the first iteration of a run
        dim_w, dim_h = max_dim_w, max_dim_h
    return max(dim_h, resize_step), max(dim_w, resize_step)


CASES = [(1.0, 416, 416, 32), (1.0, 608, 320, 32), (1.0, 64, 32, 32), (0.5, 416, 416, 32), (2.0, 416, 416, 32),
         (1.2, 512, 288, 64), (1.4, 416, 416, 8), (1.0, 96, 96, 16), (0.9, 320, 320, 32)]


@pytest.mark.parametrize("random,init_w,init_h,step", CASES)
def test_size_matches_train_detector(random, init_w, init_h, step):
    rng = np.random.default_rng(3)
    draws = list(rng.random(400)) + [0.0, 1.0, 0.5, 0.25, 0.75]
    for u in draws:
        for coin in (0, 1):
            for first, iteration in ((True, 0), (False, 10), (False, 950), (False, 901), (False, 900)):
                want = transcription(u, coin, random, init_w, init_h, step, iteration, 1000, first)
                largest = first or iteration > 1000 - 100
                got = darknet_size(rand_scale(np.float32(u), coin, random_coef(random)), (init_h, init_w),
                                   random_coef(random), step, largest)
                assert got == want, (u, coin, first, iteration)


def test_known_sizes():
    # yolov3.cfg at 416 (random=1): largest roundl(1.4 * 13 + 1) = 19 steps; no change 14 steps (the +1)
    assert darknet_size(1.0, (416, 416), random_coef(1.0), 32, largest=True) == (608, 608)
    assert darknet_size(1.0, (416, 416), random_coef(1.0), 32) == (448, 448)
    assert darknet_size(1 / 1.4, (416, 416), random_coef(1.0), 32) == (320, 320)
    assert darknet_size(1.4, (416, 416), random_coef(1.0), 32) == (608, 608)


def test_schedule_periods_seed_and_last_iterations():
    sizes = DarknetMultiScale((416, 416), random=1.0, resize_step=32, total_updates=1000, seed=5)
    seq = [sizes(n) for n in range(1000)]
    assert all(seq[n] == seq[n - n % 10] for n in range(1000))          # one size per 10 updates
    assert seq[:10] == [(608, 608)] * 10                                 # the run's first resize: largest
    assert seq[910:] == [(608, 608)] * 90                                # resizes after max_batches - 100
    middle = {s for s in seq[10:900]}
    assert len(middle) >= 5 and all(320 <= h <= 608 and h % 32 == 0 for h, _ in middle)
    again = DarknetMultiScale((416, 416), random=1.0, resize_step=32, total_updates=1000, seed=5)
    other = DarknetMultiScale((416, 416), random=1.0, resize_step=32, total_updates=1000, seed=6)
    assert [again(n) for n in range(1000)] == seq                        # a function of the seed
    assert [other(n) for n in range(1000)] != seq
    with pytest.raises(ValueError):
        DarknetMultiScale((416, 416), random=0.0)


def test_random_is_trained_and_resolved_from_the_last_head(tmp_path):
    from yolo.models.cfg import parse_cfg
    from yolo.engine.config import resolve_hyp

    path = tmp_path / "m.cfg"
    path.write_text(CFG.format(random="random=0.5\n", width=64, height=32).replace("hue=", "resize_step=16\nhue="))
    sections = parse_cfg(path)
    heads = [s for s in sections if s.type == "yolo"]
    assert resolve_hyp(sections[0], heads, None, {})["multi_scale"] == {"random": 0.5, "resize_step": 16}
    assert resolve_hyp(sections[0], heads, {"multi_scale": False}, {})["multi_scale"] is False
    path.write_text(CFG.format(random="random=-1\n", width=64, height=32))
    sections = parse_cfg(path)
    with pytest.raises(Exception, match=r"m.cfg:\d+: .*random=-1 must not be negative"):
        resolve_hyp(sections[0], [s for s in sections if s.type == "yolo"], None, {})


CFG = """[net]
batch=2
subdivisions=2
width={width}
height={height}
channels=3
learning_rate=0.001
burn_in=0
policy=constant
max_batches=120
hue=.05

""" + CONV8_MAXPOOL + "\n" + CONV8 + """
[convolutional]
size=1
stride=1
pad=1
filters=30
activation=linear

[yolo]
mask=0,1,2
anchors=10,14, 23,27, 37,58
classes=5
num=3
jitter=.3
{random}"""


@pytest.mark.slow
def test_training_loads_each_update_at_darknet_size(tmp_path, monkeypatch):
    """A random=1 cfg (64x32 input): every mini-batch's images are augmented at the rule's size (the dataset
    is asked for that size; no resizing after loading), both mini-batches of an update share it, and it
    changes during the run."""
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    root = ensure_shapes_dataset(tmp_path / "data", num_train=24, num_val=4, seed=7, size_range=(96, 128),
                                 max_shapes=3)
    data = tmp_path / "data.yaml"
    data.write_text(yaml.safe_dump({"path": str(root), "train": "images/train", "val": "images/val",
                                    "names": list(SHAPE_NAMES)}))
    cfg = tmp_path / "random.cfg"
    cfg.write_text(CFG.format(random="random=1\n", width=64, height=32))

    loaded = []  # (asked size, produced image size) per item, in loading order (workers=0)
    original = DetectionDataset.__getitem__

    def spy(self, item):
        tensor, targets, info = original(self, item)
        loaded.append((tuple(item[1]), tuple(tensor.shape[-2:]), info["input_shape"]))
        return tensor, targets, info

    monkeypatch.setattr(DetectionDataset, "__getitem__", spy)
    options = TrainOptions(cfg=str(cfg), data=str(data), device="cpu", project=str(tmp_path), progress=False,
                           epochs=10, seed=1,
                           hyp={"workers": 0, "tensorboard": False, "plots": False, "eval_interval": 100,
                                "ema": False})
    trainer = Trainer.from_options(options)
    inputs = []

    def start(t):
        assert t.parts.plan.total_steps == 120  # 12 updates of 2 one-image mini-batches per epoch
        t.parts.model.register_forward_pre_hook(lambda module, args: inputs.append(tuple(args[0].shape[-2:])))

    def stop(t):
        if t.state.global_step == 22:
            t.request_stop()

    trainer.add_callback("before_train", start)
    trainer.add_callback("after_step", stop)
    result = trainer.fit()
    assert result.status == "interrupted" and result.global_step == 22
    rule = DarknetMultiScale((32, 64), random=1.0, resize_step=32, total_updates=120, seed=1)
    want = [rule(b // 2) for b in range(44)]  # mini-batch b belongs to update b // 2
    assert inputs[:44] == want
    assert [asked for asked, _, _ in loaded[:44]] == want
    assert all(asked == made == shown for asked, made, shown in loaded)
    assert want[:20] == [(64, 128)] * 20 and len(set(want)) >= 2  # largest first, then drawn sizes

    # A resumed run goes on with the sizes of the uninterrupted one (a function of the seed and update index).
    loaded.clear()
    resumed = Trainer.from_options(TrainOptions(resume=str(result.run_dir / "last.pt"), progress=False))

    def stop_again(t):
        if t.state.global_step == 26:
            t.request_stop()

    resumed.add_callback("after_step", stop_again)
    assert resumed.fit().global_step == 26
    assert [asked for asked, _, _ in loaded[:8]] == [rule(b // 2) for b in range(44, 52)]
