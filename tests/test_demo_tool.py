"""The demo tool (tools/demo.py, yolo.cli.demo): its paths, its datasets folder and where it loads."""
from __future__ import annotations

import os

import pytest

from cfg_snippets import ONE_HEAD_CFG
from helpers import one_line_error
from training_helpers import write_one_head_training
from yolo.cli import demo as demo_cli


# --------------------------------------------------------------------------------------------------- demo
def test_demo_reads_relative_paths_from_the_callers_folder(tmp_path, capsys, monkeypatch):
    folder = write_one_head_training(tmp_path / "run")
    (folder / "bad.cfg").write_text(ONE_HEAD_CFG.replace("filters=30", "filters=abc"))
    assert ONE_HEAD_CFG.splitlines()[34] == "filters=30"
    monkeypatch.chdir(folder)  # restored after the test: the demo itself moves to the repository
    argv = ["--cfg", "bad.cfg", "--data", "data.yaml", "--hyp", "hyp.yaml", "--epochs", "1", "--no-progress"]
    err = one_line_error(capsys, lambda: demo_cli.main(demo_cli.parse_args(argv)))
    assert err == f"error: {folder / 'bad.cfg'}:35: [convolutional] (layer 3): option 'filters=abc' is not an integer"


def test_demo_with_yolo_datasets_set_to_a_file_is_one_line_before_any_training(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(os.getcwd())  # the demo moves to the repository: back after the test
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("YOLO_DATASETS", str(tmp_path / "a-file"))
    monkeypatch.setattr(demo_cli.train_cli, "main", lambda args: pytest.fail("the demo trained"))
    err = one_line_error(capsys, lambda: demo_cli.main(demo_cli.parse_args(["--no-progress"])))
    assert err == (f"error: YOLO_DATASETS={tmp_path / 'a-file'}: {tmp_path / 'a-file'} is a file, not a folder; "
                   "YOLO_DATASETS must name a folder")


@pytest.mark.parametrize("device, workers", [("cpu", ["--workers", "0"]), ("cuda", []), ("cuda:1", []), ("0", []),
                                             ("tpu", [])])
def test_demo_loads_in_the_training_process_on_the_cpu_only(monkeypatch, device, workers):
    """On the CPU the demo trains with ``--workers 0`` (loader workers would compete for the cores); on a GPU the
    automatic workers load while it trains; a device the training refuses is left for it to refuse."""
    seen = []
    monkeypatch.chdir(os.getcwd())  # the demo moves to the repository: back after the test

    def stop_after_training(args):
        seen.append(args.workers)
        return 1
    monkeypatch.setattr(demo_cli.train_cli, "main", stop_after_training)
    assert demo_cli.main(demo_cli.parse_args(["--device", device, "--no-progress"])) == 1
    assert seen == ([int(workers[1])] if workers else [None])
