"""One input-size rule for every tool (detect, the Detector, benchmark, eval, export): ``--img-size``, else the
training size a checkpoint of ours records, else the cfg's ``[net]`` width/height, else 416; each tool says which.

The cfg here is ONE_HEAD_CFG (stride 8) at 64 high, 96 wide: a size no tool would pick by accident (416 is the
old fixed default of detect, the Detector and benchmark)."""
import json

import cv2
import numpy as np
import pytest

from cfg_snippets import ONE_HEAD_CFG
from helpers import run_export_cli
from training_helpers import write_one_head_training
from yolo.models.cfg import parse_cfg_text
from yolo.models.preprocessing import chosen_input_size

CFG_REASON = "the cfg's [net] width/height"


def wide_cfg_text() -> str:
    return ONE_HEAD_CFG.replace("width=64", "width=96")


@pytest.fixture
def wide_model(tmp_path):
    """``(cfg, weights)``: ONE_HEAD_CFG at 64x96 (height x width) with random Darknet weights."""
    import torch
    from yolo.models.model import Darknet

    torch.manual_seed(0)
    cfg = tmp_path / "wide.cfg"
    cfg.write_text(wide_cfg_text())
    weights = tmp_path / "wide.weights"
    Darknet(cfg).save_darknet_weights(weights)
    return cfg, weights


def test_the_rule_in_order():
    net = parse_cfg_text(wide_cfg_text())[0]
    no_size = parse_cfg_text("[net]\nchannels=3\n\n[maxpool]\n")[0]
    assert chosen_input_size([320, 416], "--img-size", (128, 128), net) == ((320, 416), "--img-size")
    assert chosen_input_size(None, "--img-size", (128, 160), net) == ((128, 160), "the checkpoint's training size")
    assert chosen_input_size(None, "--img-size", None, net) == ((64, 96), CFG_REASON)
    size, why = chosen_input_size(None, "--img-size", None, no_size)
    assert size == (416, 416) and "416" in why and "no size" in why
    assert chosen_input_size(None, "--img-size", None, None)[0] == (416, 416)


def test_detector_runs_the_cfgs_size_unless_told(wide_model):
    from yolo.inference.detector import Detector

    cfg, weights = wide_model
    detector = Detector(cfg, weights, device="cpu")
    assert (detector.img_size, detector.img_size_from) == ((64, 96), CFG_REASON)
    assert Detector(cfg, weights, device="cpu", img_size=128).img_size == (128, 128)


def test_detector_runs_a_checkpoint_at_its_training_size(wide_model, tmp_path):
    from yolo.inference.detector import Detector
    from yolo.models.model import Darknet
    from yolo.models.checkpoint import model_checkpoint, save_checkpoint

    cfg, _ = wide_model
    pt = tmp_path / "wide.pt"
    record = {"resize": "stretch", "img_size": [48, 80], "pipeline": "darknet"}
    save_checkpoint(model_checkpoint(Darknet(cfg), preprocessing=record), pt)
    detector = Detector(None, pt, device="cpu")
    assert (detector.img_size, detector.img_size_from) == ((48, 80), "the checkpoint's training size")


def test_detect_tool_says_which_size_and_why(wide_model, tmp_path, capsys):
    from yolo.cli.detect import main
    from yolo.cli.flags.detect import parse_args

    cfg, weights = wide_model
    image = tmp_path / "scene.png"
    cv2.imwrite(str(image), np.full((120, 160, 3), 90, np.uint8))
    main(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--source", str(image), "--nosave",
                     "--device", "cpu", "--no-progress"]))
    captured = capsys.readouterr()
    assert f"network input 96x64 stretch ({CFG_REASON})" in captured.err
    assert "96x64 stretch" in captured.out
    main(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--source", str(image), "--nosave",
                     "--device", "cpu", "--no-progress", "--img-size", "32"]))
    captured = capsys.readouterr()
    assert "network input" not in captured.err and "32x32 stretch" in captured.out  # a size given is not explained


def test_eval_tool_runs_the_cfgs_size_and_logs_why(wide_model, tmp_path, caplog):
    import logging

    from yolo.cli.eval import main, parse_args

    cfg, weights = wide_model
    folder = write_one_head_training(tmp_path / "shapes")
    with caplog.at_level(logging.INFO):
        metrics = main(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--data", str(folder / "data.yaml"),
                                   "--device", "cpu", "--workers", "0", "--fast", "--no-plots",
                                   "--save-dir", str(tmp_path / "run")]))
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["settings"]["img_size"] == [64, 96], metrics
    assert f"at 96x64 ({CFG_REASON})" in caplog.text


def test_export_uses_the_cfgs_size_and_prints_why(wide_model, tmp_path, capsys):
    cfg, weights = wide_model
    run_export_cli(["--cfg", cfg, "--weights", weights, "--format", "torchscript", "--no-verify",
                    "--output", tmp_path / "wide.torchscript"])
    assert f"input size 96x64 ({CFG_REASON})" in capsys.readouterr().out


def test_benchmark_uses_the_cfgs_size_and_prints_why(wide_model, capsys):
    from yolo.cli.benchmark import main
    from yolo.cli.flags.benchmark import parse_args

    cfg, weights = wide_model
    main(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--no-opencv", "--no-gpu", "--iters", "1",
                     "--warmup", "0", "--batch-size", "1", "--threads", "1"]))
    out = capsys.readouterr().out
    assert f"input size 96x64 ({CFG_REASON})" in out and "at 96x64" in out
