"""What the tools print: each data problem listed once, one Ctrl-C advice naming the command the user ran,
progress lines in logs during long loops, and a resumed run's settings files that say what it ran with."""
import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
import torch
import yaml

import yolo.data.validation
import yolo.progress
from training_helpers import fast_train, write_one_head_training
from yolo.cli import anchors as anchors_cli
from yolo.cli import eval as eval_cli
from yolo.cli.invocation import invoked_command
from yolo.progress import ProgressLines, use_bars


@pytest.mark.slow
def test_a_data_problem_is_listed_once_per_run_and_once_in_eval_and_anchors(stray_label_shapes, tmp_path, caplog):
    orphan = "renamed_image.txt: label file has no matching image"
    with caplog.at_level(logging.INFO):
        fast_train(stray_label_shapes, tmp_path, epochs=1)
    assert caplog.text.count(orphan) == 1  # the train split and the val split (the same folder): one listing
    assert "the same 1 problem(s) as listed above" in caplog.text

    # tools/eval.py and tools/anchors.py, each the first thing a process does: listed once each
    yolo.data.validation._LOGGED_PROBLEMS.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        eval_cli.main(eval_cli.parse_args(["--cfg", str(stray_label_shapes["cfg"]),
                                           "--weights", str(tmp_path / "run" / "last.pt"),
                                           "--data", str(stray_label_shapes["data"]), "--device", "cpu",
                                           "--workers", "0", "--no-plots", "--save-dir", str(tmp_path / "eval")]))
    assert caplog.text.count(orphan) == 1
    yolo.data.validation._LOGGED_PROBLEMS.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        anchors_cli.main(anchors_cli.parse_args(["--data", str(stray_label_shapes["data"]), "-n", "3", "--width", "64",
                                                 "--height", "64"]))
    assert caplog.text.count(orphan) == 1


@pytest.mark.slow
def test_long_loops_print_progress_lines_without_a_bar(stray_label_shapes, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(yolo.progress, "LINE_SECONDS", 0.0)  # every step is "long" here
    with caplog.at_level(logging.INFO):
        fast_train(stray_label_shapes, tmp_path, epochs=1)
    assert "epoch 1/1: 1/2 (50%)" in caplog.text and "epoch 1/1: 2/2 (100%)" in caplog.text
    assert "val 1/1 (batches): 1/" in caplog.text


def test_progress_lines_come_every_line_seconds_only(monkeypatch):
    now = [0.0]
    messages = []

    class Log:
        def info(self, fmt, *args):
            messages.append(fmt % args)

    lines = ProgressLines("epoch 1/2", 100, True, Log(), clock=lambda: now[0])
    for step in range(1, 101):
        now[0] = step * 1.0  # one second a step: a line at 30, 60 and 90 s
        lines.update(step)
    assert messages == ["epoch 1/2: 30/100 (30%), 30 s, about 70 s left",
                        "epoch 1/2: 60/100 (60%), 60 s, about 40 s left",
                        "epoch 1/2: 90/100 (90%), 90 s, about 10 s left"]
    silent = ProgressLines("eval", 10, False, Log(), clock=lambda: now[0])
    now[0] = 1e6
    silent.update(5)
    assert len(messages) == 3


@pytest.mark.parametrize("argv0, command", [
    ("/home/me/.venv/bin/yolo-train", "yolo-train"),
    ("tools/train.py", "python tools/train.py"),
    ("/work/yolo/yolo/cli/train.py", "python -m yolo.cli.train"),
    ("tools/demo.py", "yolo-train"),  # the demo runs the trainer in its own process
])
def test_advice_names_the_command_the_user_ran(argv0, command):
    assert invoked_command("train", [argv0]) == command


@pytest.mark.slow
def test_darknet_map_adds_its_column_to_results_and_metrics(stray_label_shapes, tmp_path, caplog):
    """--darknet-map: each evaluation's Darknet mAP@0.50 in results.csv (after mAP50_95), the epoch line and
    metrics.json (whose darknet_map is the eval tool's report of the same weights)."""
    import csv
    import json

    with caplog.at_level(logging.INFO):
        result = fast_train(stray_label_shapes, tmp_path, epochs=2, darknet_map=True)
    with open(result.run_dir / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    columns = list(rows[0].keys())
    assert columns[columns.index("mAP50_95") + 1] == "darknet_mAP50"
    saved = json.loads((result.run_dir / "metrics.json").read_text())["darknet_map"]
    assert float(rows[-1]["darknet_mAP50"]) == pytest.approx(saved["map"], abs=1e-5)
    assert all(r["darknet_mAP50"] for r in rows)
    assert caplog.text.count("darknet mAP50 ") == 2
    assert set(saved["classes"]) == set(shapes_names(stray_label_shapes))
    eval_cli.main(eval_cli.parse_args(["--weights", str(result.run_dir / "last.pt"),
                                       "--data", str(stray_label_shapes["data"]), "--device", "cpu", "--workers", "0",
                                       "--no-plots", "--darknet-map", "--save-dir", str(tmp_path / "eval")]))
    again = json.loads((tmp_path / "eval" / "metrics.json").read_text())["darknet_map"]
    assert again["map"] == pytest.approx(saved["map"], abs=1e-9) and again["tp"] == saved["tp"]


@pytest.mark.slow
def test_without_darknet_map_results_have_no_such_column(stray_label_shapes, tmp_path):
    result = fast_train(stray_label_shapes, tmp_path, epochs=1)
    assert "darknet_mAP50" not in (result.run_dir / "results.csv").read_text()


def shapes_names(stray_label_shapes):
    return yaml.safe_load(stray_label_shapes["data"].read_text())["names"]


# ------------------------------------------------------------------------------------------ run records
def test_opt_yaml_records_no_hyp_as_null(tmp_path):
    from yolo.engine.run_folder import options_record, write_yaml

    for given, recorded in ((None, None), ("hyp.yaml", "hyp.yaml"), ({"lr0": 0.01}, "inline")):
        write_yaml(tmp_path / "opt.yaml", options_record({"epochs": 3, "hyp": given}))
        assert yaml.safe_load((tmp_path / "opt.yaml").read_text())["hyp"] == recorded


REPO = Path(__file__).resolve().parents[1]


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


@pytest.mark.slow
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
