"""What a new user runs into: logs without progress-bar noise, absurd cfg values and bad flags refused with
one line, inputs that are only partly bad kept where they are good, and complete error messages."""
import io
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import yaml

from cfg_snippets import ONE_HEAD_CFG
from helpers import one_line_error, write_mjpg_video
from training_helpers import write_one_head_training
from yolo.models.cfg import parse_cfg, parse_cfg_text
from yolo.errors import CfgError
from yolo.models.checkpoint import load_checkpoint_file, model_checkpoint, save_checkpoint
from yolo.data import SHAPE_NAMES
from yolo.data.validation import read_label_file
from yolo.models.model import Darknet
from yolo.progress import use_bars
from yolo.errors import WeightsError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_pt(tmp_path):
    """A .pt checkpoint of the tiny one-head cfg (5 classes) with random weights."""
    torch.manual_seed(0)
    cfg = tmp_path / "tiny.cfg"
    cfg.write_text(ONE_HEAD_CFG)
    path = tmp_path / "tiny.pt"
    save_checkpoint(model_checkpoint(Darknet(cfg), names=list(SHAPE_NAMES)), path)
    return path


# ------------------------------------------------------------------------------------------ progress
class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_bars_only_on_a_terminal():
    assert use_bars(True, _Terminal())
    assert not use_bars(False, _Terminal())  # --no-progress
    assert not use_bars(True, io.StringIO())  # a pipe, a log file
    closed = io.StringIO()
    closed.close()  # isatty() raises on a closed stream
    assert not use_bars(True, closed)


def test_training_log_without_terminal_is_one_line_per_epoch_and_evaluation(tmp_path):
    """tools/train.py with its output in a pipe (as under CI or nohup): no carriage returns, no bar lines."""
    write_one_head_training(tmp_path, hyp={"workers": 0, "tensorboard": False, "plots": False})
    cmd = [sys.executable, str(REPO / "tools" / "train.py"), "--cfg", str(tmp_path / "tiny.cfg"),
           "--data", str(tmp_path / "data.yaml"), "--hyp", str(tmp_path / "hyp.yaml"), "--epochs", "3",
           "--device", "cpu", "--project", str(tmp_path / "runs")]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "YOLO_CACHE_DIR": str(tmp_path / "cache")})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "\r" not in out and "it/s" not in out, out[-3000:]
    for epoch in (1, 2, 3):
        lines = [line for line in out.splitlines() if line.startswith(f"epoch {epoch}/3:")]
        assert len(lines) == 2, out  # one for the training (losses, lr, speed), one for the evaluation
        assert "box" in lines[0] and "lr" in lines[0] and "mAP50" in lines[1]
    # What identical losses depend on is logged and kept with the run.
    env = yaml.safe_load((tmp_path / "runs" / "exp" / "environment.yaml").read_text())
    assert env["opencv"] == cv2.__version__ and env["torch"] == torch.__version__ and env["cpu_threads"] >= 1
    assert "environment: " in out


# ------------------------------------------------------------------------------------------ cfg values
@pytest.mark.parametrize("line, value, key", [
    (7, "filters=160000000", "filters"),   # would allocate 16 GiB of weights
    (8, "size=100001", "size"),           # 1.8 TiB of weights, with pad=1 the output shape looks fine
    (13, "filters=2550000", "filters"),   # 2.4 GiB on 256 channels: a typo for 255
])
def test_absurd_layer_sizes_are_refused_with_their_line_before_allocation(line, value, key):
    # Written out here, not from tests/cfg_snippets.py: the cases name its line numbers.
    text = ("[net]\nwidth=416\nheight=416\nchannels=3\n"
            "[convolutional]\nbatch_normalize=1\nfilters=256\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
            "[convolutional]\nfilters=255\nsize=1\nstride=1\npad=1\nactivation=linear\n")
    lines = text.splitlines()
    lines[line - 1] = value
    with pytest.raises(CfgError) as info:
        Darknet(parse_cfg_text("\n".join(lines), "typo.cfg"))
    message = str(info.value)
    assert message.startswith(f"typo.cfg:{line}: [convolutional]") and f"'{key}'" in message, message
    assert "\n" not in message


def test_absurd_upsample_and_input_sizes_are_refused():
    # Written out here: the expected messages name its line numbers.
    text = ("[net]\nwidth={w}\nheight={w}\nchannels=3\n"
            "[convolutional]\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
            "[upsample]\nstride={s}\n")
    with pytest.raises(CfgError, match=r"^big.cfg:12: \[upsample\] .*'stride'"):
        Darknet(parse_cfg_text(text.format(w=416, s=10000), "big.cfg"))
    with pytest.raises(CfgError, match=r"^big.cfg:6: \[convolutional\] .*input size"):
        Darknet(parse_cfg_text(text.format(w=100001, s=2), "big.cfg"))
    Darknet(parse_cfg_text(text.format(w=416, s=2), "big.cfg"))  # the normal case builds


def test_cfg_with_byte_order_mark_reads_like_without(assets, tmp_path):
    original = assets("cfg/yolov3-tiny.cfg")
    with_bom = tmp_path / "bom.cfg"
    with_bom.write_bytes(b"\xef\xbb\xbf" + original.read_bytes())
    plain, marked = parse_cfg(original), parse_cfg(with_bom)
    assert [(s.type, s.line, s.options) for s in marked] == [(s.type, s.line, s.options) for s in plain]
    assert Darknet(with_bom).summary() == Darknet(original).summary()


def test_invisible_characters_are_shown_in_cfg_errors():
    with pytest.raises(CfgError) as info:
        parse_cfg_text("[net]\nwidth=32\nheight=32\n\u200bbatch\n[maxpool]\n", "zw.cfg")
    assert str(info.value) == "zw.cfg:4: expected 'key=value' or '[section]', got '\\u200bbatch'"


# ------------------------------------------------------------------------------------------ flags
@pytest.mark.parametrize("tool, argv, flag", [
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--conf-thres", "-1"], "--conf-thres"),
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--iou-thres", "1.5"], "--iou-thres"),
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--batch-size", "0"], "--batch-size"),
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--img-size", "-416"], "--img-size"),
    ("eval", ["--weights", "w.pt", "--data", "d.yaml", "--conf-thres", "nan"], "--conf-thres"),
    ("eval", ["--weights", "w.pt", "--data", "d.yaml", "--max-det", "0"], "--max-det"),
    ("eval", ["--weights", "w.pt", "--data", "d.yaml", "--workers", "-2"], "--workers"),
    ("export", ["--weights", "w.pt", "--format", "onnx", "--conf-thres", "2"], "--conf-thres"),
    ("export", ["--weights", "w.pt", "--format", "onnx", "--opset", "9"], "--opset"),
    ("benchmark", ["--cfg", "c.cfg", "--iters", "0"], "--iters"),
    ("train", ["--cfg", "c.cfg", "--data", "d.yaml", "--epochs", "0"], "--epochs"),
    ("train", ["--cfg", "c.cfg", "--data", "d.yaml", "--batch-size", "x"], "--batch-size"),
    ("convert", ["--weights", "w.pt", "--output", "o.weights", "--cutoff", "-1"], "--cutoff"),
    ("demo", ["--epochs", "-5"], "--epochs"),
])
def test_out_of_range_flags_are_one_line_errors(capsys, tool, argv, flag):
    import importlib

    module = importlib.import_module(f"yolo.cli.{tool}")
    err = one_line_error(capsys, lambda: module.parse_args(argv))
    assert f"argument {flag}:" in err, err


def test_more_than_two_image_sides_is_an_error(capsys, tiny_pt, tmp_path):
    from yolo.cli import detect

    args = detect.parse_args(["--weights", str(tiny_pt), "--source", str(tmp_path), "--img-size", "64", "64", "64"])
    (tmp_path / "a.jpg").write_bytes(cv2.imencode(".jpg", np.zeros((8, 8, 3), np.uint8))[1].tobytes())
    assert "--img-size takes one value or two" in one_line_error(capsys, lambda: detect.main(args))


# ------------------------------------------------------------------------------------------ tools
def test_convert_writes_weights_into_a_new_folder(tiny_pt, tmp_path):
    from yolo.cli import convert

    for output in (tmp_path / "new" / "a" / "tiny.weights", tmp_path / "new" / "b" / "tiny.pt"):
        convert.main(convert.parse_args(["--weights", str(tiny_pt if output.suffix == ".weights" else
                                                            tmp_path / "new" / "a" / "tiny.weights"),
                                         "--cfg", str(tmp_path / "tiny.cfg"), "--output", str(output)]))
        assert output.is_file() and not list(output.parent.glob(".*tmp"))
    # Round trip through the new folders: same tensors.
    a = load_checkpoint_file(tiny_pt)["model"]
    b = load_checkpoint_file(tmp_path / "new" / "b" / "tiny.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a if "num_batches" not in k)


def test_truncated_video_reports_expected_and_read_frames(tiny_pt, tmp_path, capsys):
    from yolo.cli import detect

    video = tmp_path / "clip.avi"
    rng = np.random.default_rng(0)
    write_mjpg_video(video, (rng.integers(0, 255, (64, 64, 3), dtype=np.uint8) for _ in range(20)), 10)
    capture = cv2.VideoCapture(str(video))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 20  # the header's count
    capture.release()
    data = video.read_bytes()
    video.write_bytes(data[:len(data) // 2])  # the header still says 20 frames

    out = detect.main(detect.parse_args(["--weights", str(tiny_pt), "--source", str(video), "--img-size", "64",
                                         "--device", "cpu", "--output", str(tmp_path / "runs"), "--nosave"]))
    captured = capsys.readouterr()
    err = captured.err
    read = len([line for line in captured.out.splitlines() if line.startswith("clip.avi frame ")])
    assert 0 < read < 20
    assert f"should have 20 frames but only {read} could be read" in err, err
    assert out is None and not (tmp_path / "runs").exists()  # --nosave and nothing else to save: no run folder


# ------------------------------------------------------------------------------------------ data
def test_non_utf8_label_line_drops_only_that_line(tmp_path):
    path = tmp_path / "img.txt"
    path.write_bytes(b"0 0.5 0.5 0.2 0.2\n\xff\xfe garbage \x80\n1 0.3 0.3 0.1 0.1\n")
    labels, problems = read_label_file(path, num_classes=5)
    assert labels[:, 0].tolist() == [0, 1]
    assert [(p.line, p.kind) for p in problems] == [(2, "box")]
    assert "not UTF-8" in problems[0].reason and str(problems[0]).startswith(f"{path}:2:")


def test_label_file_with_byte_order_mark_keeps_its_first_line(tmp_path):
    path = tmp_path / "img.txt"
    path.write_bytes(b"\xef\xbb\xbf0 0.5 0.5 0.2 0.2\n")
    labels, problems = read_label_file(path, num_classes=5)
    assert len(labels) == 1 and not problems


# ------------------------------------------------------------------------------------------ checkpoints
def test_checkpoint_errors_are_complete_and_never_advise_unsafe_loading(tiny_pt, tmp_path):
    import argparse

    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(tiny_pt.read_bytes()[:5000])
    foreign = tmp_path / "foreign.pt"
    torch.save({"model": argparse.Namespace(a=1)}, foreign)  # a pickled Python object
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    text = tmp_path / "text.pt"
    text.write_text("not a checkpoint\n")
    expected = {truncated: "truncated or damaged", foreign: "not a checkpoint written by this project",
                empty: "empty file", text: "not a PyTorch checkpoint"}
    for path, words in expected.items():
        with pytest.raises(WeightsError) as info:
            load_checkpoint_file(path)
        message = str(info.value)
        assert message.startswith(f"{path}: ") and words in message, message
        assert "\n" not in message and "weights_only" not in message and "\x1b" not in message, message


@pytest.mark.parametrize("setting, words", [
    ("num_train: 4000000", "'generate: num_train' must be an integer from 0 to 100,000"),
    ("size_range: [416, 256]", "'generate: size_range' must be two integers"),
    ("max_shape: 3", "unknown setting 'max_shape'"),
])
def test_generator_settings_out_of_range_are_refused_with_their_line(tmp_path, setting, words):
    from yolo.data import load_data_config
    from yolo.errors import DataError

    path = tmp_path / "data.yaml"
    path.write_text(f"path: {tmp_path / 'shapes'}\ntrain: images/train\nval: images/val\nnames: [a, b]\n"
                    f"generate:\n  name: shapes\n  {setting}\n")
    with pytest.raises(DataError) as info:
        load_data_config(path)
    assert str(info.value).startswith(f"{path}:7: ") and words in str(info.value), str(info.value)
    assert not (tmp_path / "shapes").exists()  # nothing generated
