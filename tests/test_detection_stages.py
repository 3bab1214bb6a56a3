"""Where a detection batch's time goes (yolo.benchmark.detection_stages): each stage timed on its own, on a fake
clock (exact attribution), and the real Detector on the CPU as tools/benchmark.py runs it."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import asset
from helpers import FakeClock
from yolo.benchmark import detection_stages as stages_module
from yolo.benchmark.detection_stages import detection_stages, format_stages, stage_figures
from yolo.inference.detector import Detector


def test_each_stage_gets_its_own_time(monkeypatch):
    """Pre-processing 2 ms, model 7 ms, post-processing 3 ms (on a fake clock): each lands in its stage."""
    clock = FakeClock()
    monkeypatch.setattr(stages_module.time, "perf_counter", clock)
    detector = Detector(asset("cfg/yolov3-tiny.cfg"), None, device="cpu", img_size=64)
    calls = []

    def preprocess(images):
        calls.append(("preprocess", len(images)))
        clock.spend(2)
        return "batch", ["infos"]

    def forward(batch):
        assert batch == "batch"
        clock.spend(7)
        return "predictions"

    def postprocess(predictions, infos, shapes):
        assert predictions == "predictions" and infos == ["infos"] and shapes == [(30, 40)] * 3
        clock.spend(3)

    monkeypatch.setattr(detector, "preprocess", preprocess)
    monkeypatch.setattr(detector, "forward", forward)
    monkeypatch.setattr(detector, "postprocess", postprocess)
    images = [np.zeros((30, 40, 3), np.uint8)] * 3
    got = detection_stages(detector, images, rounds=4, warmup=2)
    assert calls == [("preprocess", 3)] * 6  # 2 warm-up rounds, 4 timed
    assert (got.batch, got.upload) == (3, None)  # on the CPU nothing is uploaded
    assert (got.preprocess, got.model, got.postprocess, got.total) == pytest.approx((2, 7, 3, 12))
    line = format_stages("cpu fp32,", got)
    assert line == "cpu fp32, batch 3: pre-processing 2 ms, model 7 ms, post-processing 3 ms, total 12 ms per batch"


def test_stage_figures_of_the_real_pipeline_on_the_cpu(capsys):
    image = np.random.default_rng(0).integers(0, 256, (48, 80, 3), dtype=np.uint8)
    figures = stage_figures(asset("cfg/yolov3-tiny.cfg"), None, (64, 64), image, batch=2, rounds=1, warmup=0,
                            resize="stretch", conf_thres=0.25, iou_thres=0.45)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["stages cpu fp32, batch 1", "stages cpu fp32, batch 2"]
    for n in (1, 2):
        parts = [figures[f"stages_cpu_fp32_b{n}_{stage}_ms"] for stage in ("preprocess", "model", "postprocess")]
        assert all(p > 0 for p in parts)
        assert figures[f"stages_cpu_fp32_b{n}_total_ms"] == pytest.approx(sum(parts))  # one round: the sum
        assert f"stages_cpu_fp32_b{n}_upload_ms" not in figures


@pytest.mark.cuda
def test_stage_figures_on_cuda_have_the_upload(cuda_device, capsys):
    image = np.random.default_rng(0).integers(0, 256, (48, 80, 3), dtype=np.uint8)
    for half in (False, True):
        figures = stage_figures(asset("cfg/yolov3-tiny.cfg"), None, (64, 64), image, batch=4, rounds=2, warmup=1,
                                resize="stretch", conf_thres=0.25, iou_thres=0.45, device="cuda", half=half)
        precision = "fp16" if half else "fp32"
        for n in (1, 4):
            assert all(figures[f"stages_cuda_{precision}_b{n}_{stage}_ms"] > 0
                       for stage in ("upload", "preprocess", "model", "postprocess", "total"))
