"""Resuming a run (--resume, ``TrainOptions(resume=...)``): what it checks before it spends an epoch (the run
folder's results.csv can be read, the last.pt is the run's own, no setting it would ignore was given, the dataset
is the run's; each refusal is one line and changes nothing in the folder), and what a resumed run continues
exactly: after Ctrl-C, a stop mid-epoch, a kill during the final save, a full disk; its epoch times, its
settings records, its hooks' state and its input size."""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from helpers import one_line_error, ticking_clock
from training_helpers import (FAST, HYP as ONE_HEAD_HYP, assert_same_state, fast_train, made_up_evaluation,
                              read_results, run, shapes_training, train_error, train_state, write_one_head_training)
from yolo.cli import train as train_cli
from yolo.engine import TrainOptions, Trainer
from yolo.engine.hooks.checkpointing import saved_options
from yolo.engine.epoch_times import EpochTimes
from yolo.engine.hooks import HookBase
from yolo.engine.hooks.evaluation import fitness
from yolo.engine.hooks.writers import RESULTS_COLUMNS, RESULTS_TIME_COLUMNS
from yolo.errors import ConfigError, WeightsError
from yolo.models.checkpoint import load_checkpoint_file


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished one-epoch run of the one-head model (its folder)."""
    folder = write_one_head_training(tmp_path_factory.mktemp("resume"))
    options = TrainOptions(cfg=str(folder / "tiny.cfg"), data=str(folder / "data.yaml"), hyp=str(folder / "hyp.yaml"),
                           epochs=1, device="cpu", project=str(folder / "runs"), name="run", progress=False)
    Trainer.from_options(options).fit()
    return folder / "runs" / "run"


def _resume(last, epochs=2):
    return Trainer.from_options(TrainOptions(resume=str(last), epochs=epochs, progress=False))


def test_a_results_csv_that_is_not_utf8_is_refused_before_training(run_dir, tmp_path):
    # before: UnicodeDecodeError after epoch 2 had trained; last.pt stayed at epoch 1, and every resume repeated it
    results = run_dir / "results.csv"
    original = results.read_bytes()
    results.write_bytes(original + b"2,\xff\xfe not text\n")
    damaged = results.read_bytes()
    try:
        trainer = _resume(run_dir / "last.pt")
        with pytest.raises(ConfigError, match="results.csv: not UTF-8 text at byte .*move it aside"):
            trainer.fit()
        assert results.read_bytes() == damaged  # the user's file as it was
        assert load_checkpoint_file(run_dir / "last.pt")["train"]["epoch"] == 1
    finally:
        results.write_bytes(original)


def test_another_runs_last_pt_is_refused(run_dir):
    # before: it trained the other model while opt.yaml and cfg.cfg named this one, and results.csv mixed the two
    last = run_dir / "last.pt"
    original = last.read_bytes()
    ckpt = load_checkpoint_file(last)
    ckpt["cfg"] = ckpt["cfg"].replace("filters=8", "filters=16", 1)
    torch.save(ckpt, last)
    try:
        with pytest.raises(ConfigError, match=r"not this run's checkpoint: it holds another model than the run's "
                                              r".*cfg\.cfg"):
            _resume(last)
    finally:
        last.write_bytes(original)


def test_resume_with_a_project_it_would_ignore_is_one_line(run_dir, tmp_path, capsys):
    err = one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args(
        ["--resume", str(run_dir / "last.pt"), "--project", str(tmp_path / "elsewhere")])))
    assert "a resumed run continues in its own folder" in err
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.slow
def test_an_image_deleted_while_training_is_one_short_line_with_the_resume_command(tmp_path, capsys, monkeypatch):
    # before: 2,242+ characters of the loader worker's flattened traceback, cut before the file name, no resume hint
    folder = write_one_head_training(tmp_path)
    images = sorted((folder / "data" / "images" / "train").glob("*.jpg"))
    real = Trainer.from_options

    def with_a_deletion(options):
        trainer = real(options)
        trainer.add_callback("after_epoch", lambda t: [p.unlink() for p in images if p.exists()])
        return trainer

    monkeypatch.setattr(train_cli.Trainer, "from_options", with_a_deletion)
    err = one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args(
        ["--cfg", str(folder / "tiny.cfg"), "--data", str(folder / "data.yaml"), "--hyp", str(folder / "hyp.yaml"),
         "--epochs", "2", "--workers", "1", "--device", "cpu", "--project", str(tmp_path / "runs"), "--name", "run",
         "--no-progress"])))
    last = tmp_path / "runs" / "run" / "last.pt"
    assert len(err) < 400, err
    assert "Traceback" not in err and "DataLoader worker" not in err
    assert any(str(p) in err for p in images), err
    assert err.endswith(f"continue with: yolo-train --resume {last}") or err.endswith(f"--resume {last}"), err


def test_a_checkpoint_with_damaged_training_options_is_one_line():
    with pytest.raises(WeightsError, match=r"^last\.pt: its saved training options are not valid: seed must be an "
                                           r"integer, got str 'a'$"):
        saved_options({"train": {"options": {"seed": "a"}}}, Path("last.pt"))


@pytest.fixture
def run_copy(trained_setup, tmp_path):
    """A copy of the finished run, for a test that resumes it."""
    return shutil.copytree(trained_setup / "runs" / "run", tmp_path / "run")


# ------------------------------------------------------------------------------ data configs and image lists
def write_data_yaml(trained_setup, tmp_path, **changes):
    """``trained_setup``'s data YAML with ``changes``, written to ``tmp_path/data.yaml``."""
    data = yaml.safe_load((trained_setup / "data.yaml").read_text())
    data.update(changes)
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ------------------------------------------------------------------------------ resuming
@pytest.mark.usefixtures("private_cache")
def test_resume_from_best_pt_is_refused_and_the_run_is_untouched(capsys, run_copy):
    before = {name: (run_copy / name).read_bytes() for name in ("last.pt", "results.csv")}
    err = train_error(capsys, ["--resume", run_copy / "best.pt", "--device", "cpu", "--no-progress"])
    assert err == (f"error: --resume {run_copy / 'best.pt'}: a run resumes from its last.pt (the state it stopped "
                   f"in), here {run_copy / 'last.pt'}, or from its folder; to train from best.pt's weights start a "
                   f"new run with --weights {run_copy / 'best.pt'}"), err
    assert {name: (run_copy / name).read_bytes() for name in before} == before


@pytest.mark.usefixtures("private_cache")
def test_resume_refuses_the_settings_it_would_ignore(capsys, trained_setup, run_copy):
    last = run_copy / "last.pt"
    err = train_error(capsys, ["--resume", last, "--cfg", trained_setup / "tiny.cfg",
                               "--data", trained_setup / "data.yaml", "--batch-size", "4", "--epochs", "2",
                               "--device", "cpu", "--workers", "0", "--no-progress"])
    assert err == (f"error: --resume {last} continues the run with its saved settings: --cfg, --data, --batch-size "
                   "cannot change (only --epochs, --device, --workers, --tf32, --compile and --cache-images can); "
                   f"to train with other settings start a new run with --weights {last}"), err


@pytest.mark.usefixtures("private_cache")
def test_a_damaged_opt_yaml_is_rewritten_from_the_checkpoint_on_resume(capsys, caplog, run_copy):
    """opt.yaml is a record (the run resumes from last.pt's options): a damaged one is written anew, with a
    warning, and the run goes on."""
    (run_copy / "opt.yaml").write_text("{{{{\n")
    with caplog.at_level("WARNING"):
        status = train_cli.main(train_cli.parse_args(["--resume", str(run_copy / "last.pt"), "--epochs", "2",
                                                      "--device", "cpu", "--no-progress"]))
    assert status == 0
    assert f"{run_copy / 'opt.yaml'}: not a readable settings record: rewritten from the checkpoint" in caplog.text
    opt = yaml.safe_load((run_copy / "opt.yaml").read_text())
    assert opt["epochs"] == 2 and opt["cfg"].endswith("tiny.cfg") and opt["data"].endswith("data.yaml")


def edited_last(run_dir, train=None, **top):
    """``run_dir/last.pt`` with ``train`` entries (``hyp`` and ``options`` merged key by key) and ``top`` entries
    replaced, written back in place (a hand-edited checkpoint)."""
    import torch
    from yolo.models.checkpoint import load_checkpoint_file
    last = run_dir / "last.pt"
    ckpt = load_checkpoint_file(last)
    for key, value in (train or {}).items():
        ckpt["train"][key] = {**ckpt["train"][key], **value} if key in ("hyp", "options") else value
    ckpt.update(top)
    torch.save(ckpt, last)
    return last


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("train, message", [
    ({"epoch": -5}, "epoch=-5 is out of range: it must be 0 or more"),
    ({"epoch_step": 999}, "epoch_step=999 is out of range: it must be between 0 and 2 (this run has 2 updates an "
                          "epoch)"),
    # 2 (= the updates of an epoch) is a stop after the epoch's last update, its evaluation left to the resume
    ({"epoch_step": 3}, "epoch_step=3 is out of range: it must be between 0 and 2 (this run has 2 updates an "
                        "epoch)"),
    ({"global_step": -100}, "global_step=-100 is out of range: it must be at least epoch_step=0 (the updates done "
                            "in the run)"),
    ({"epoch": 1.5}, "epoch=1.5 is not a whole number"),
    ({"best_fitness": None}, "best_fitness=None is not a number"),
    ({"epoch_sums": [1.0, 2.0]}, "epoch_sums is not 4 numbers (the epoch's box, obj and cls loss sums and its "
                                 "mini-batches)"),
])
def test_resume_refuses_update_counters_out_of_range(capsys, run_copy, train, message):
    last = edited_last(run_copy, train=train)
    err = train_error(capsys, ["--resume", last, "--epochs", "2", "--device", "cpu", "--no-progress"])
    assert err == f"error: {last}: damaged training state: {message}", err


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("hyp, message", [
    ({"learning_rate": -1}, "learning_rate=-1.0 is out of range: it must be between 0 and 1e+30"),
    ({"workers": 1000}, "workers=1000 is out of range: it must be between 0 and 64 (as --workers)"),
    ({"momentum": "fast"}, "momentum='fast' is not a number"),
    ({"img_size": [64, 64, 3]}, "img_size: an image size is one integer or two (height width), got [64, 64, 3]"),
])
def test_resume_checks_the_saved_hyperparameters_as_a_hyp_file(capsys, run_copy, hyp, message):
    last = edited_last(run_copy, train={"hyp": hyp})
    err = train_error(capsys, ["--resume", last, "--epochs", "2", "--device", "cpu", "--no-progress"])
    assert err == f"error: {last}: saved hyp: {message}", err


@pytest.mark.usefixtures("private_cache")
def test_resume_of_a_finished_run_leaves_its_settings_records(capsys, caplog, run_copy):
    """A 2-epoch run that has finished, resumed with --epochs 1: nothing to train, and opt.yaml and hyp.yaml still
    say 2 epochs."""
    edited_last(run_copy, train={"epoch": 2, "hyp": {"epochs": 2}, "options": {"epochs": 2}}, epoch=2)
    for name in ("opt.yaml", "hyp.yaml"):
        record = run_copy / name
        record.write_text(record.read_text().replace("epochs: 1", "epochs: 2"))
    before = {name: (run_copy / name).read_bytes() for name in ("opt.yaml", "hyp.yaml", "last.pt")}
    with caplog.at_level("INFO"):
        status = train_cli.main(train_cli.parse_args(["--resume", str(run_copy / "last.pt"), "--epochs", "1",
                                                      "--device", "cpu", "--no-progress"]))
    assert status == 0
    assert "the run already finished its 1 epochs: nothing to resume" in caplog.text
    assert {name: (run_copy / name).read_bytes() for name in before} == before


@pytest.mark.usefixtures("private_cache")
def test_resume_refuses_a_dataset_whose_names_were_reordered(capsys, trained_setup, run_copy, tmp_path):
    names = yaml.safe_load((trained_setup / "data.yaml").read_text())["names"]
    data = write_data_yaml(trained_setup, tmp_path, names=[names[1], names[0], *names[2:]])
    last = edited_last(run_copy, train={"options": {"data": str(data)}})
    err = train_error(capsys, ["--resume", last, "--epochs", "2", "--device", "cpu", "--no-progress"])
    assert err == (f"error: --resume {last}: {data} is not the dataset the run started with: the class names "
                   f"reordered (class 0 was '{names[0]}', now '{names[1]}'; class 1 was '{names[1]}', now "
                   f"'{names[0]}'); resume with the dataset as it was, or start a new run with --weights {last}"), err


@pytest.mark.usefixtures("private_cache")
def test_resume_refuses_a_dataset_with_an_image_removed(capsys, trained_setup, run_copy, tmp_path):
    images = sorted((trained_setup / "data" / "images" / "train").glob("*.jpg"))
    listing = tmp_path / "train.txt"
    listing.write_text("".join(f"{p}\n" for p in images[1:]))
    data = write_data_yaml(trained_setup, tmp_path, train=str(listing))
    last = edited_last(run_copy, train={"options": {"data": str(data)}})
    err = train_error(capsys, ["--resume", last, "--epochs", "2", "--device", "cpu", "--no-progress"])
    assert err == (f"error: --resume {last}: {data} is not the dataset the run started with: the train split has "
                   f"{len(images) - 1} usable images, {len(images)} at the start (1 removed); resume with the dataset "
                   f"as it was, or start a new run with --weights {last}"), err


@pytest.mark.usefixtures("private_cache")
def test_resume_accepts_the_same_dataset_moved_to_another_folder(trained_setup, run_copy, tmp_path):
    """The record is of the images relative to their split's folder: the dataset moved (with a config naming its
    new place) is the same dataset."""
    moved = shutil.copytree(trained_setup / "data", tmp_path / "moved")
    data = write_data_yaml(trained_setup, tmp_path, path=str(moved))
    last = edited_last(run_copy, train={"options": {"data": str(data)}})
    status = train_cli.main(train_cli.parse_args(["--resume", str(last), "--epochs", "2", "--device", "cpu",
                                                  "--no-progress"]))
    assert status == 0


@pytest.mark.usefixtures("private_cache")
def test_an_opt_yaml_nested_too_deep_is_rewritten_from_the_checkpoint_on_resume(capsys, caplog, run_copy):
    (run_copy / "opt.yaml").write_text("epochs: " + "[" * 5000 + "]" * 5000 + "\n")
    with caplog.at_level("WARNING"):
        status = train_cli.main(train_cli.parse_args(["--resume", str(run_copy / "last.pt"), "--epochs", "2",
                                                      "--device", "cpu", "--no-progress"]))
    assert status == 0
    assert f"{run_copy / 'opt.yaml'}: not a readable settings record: rewritten from the checkpoint" in caplog.text
    assert yaml.safe_load((run_copy / "opt.yaml").read_text())["epochs"] == 2


REPO = Path(__file__).resolve().parents[1]


def test_training_on_a_disk_that_fills_up_stops_with_one_line_and_resumes(capsys, train_setup, tmp_path,
                                                                          small_disk, monkeypatch):
    """The disk fills up after epoch 1 (a filler file takes every free block); the save of epoch 2 fails with
    one line saying the disk is full and how to continue; with space freed, --resume finishes the run."""
    import yolo.cli.train as train_cli
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.checkpoint import load_checkpoint_file

    filler = small_disk / "filler"

    def fill_disk(trainer):
        if trainer.state.epoch == 1:
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
            finally:
                os.close(fd)

    class FillingTrainer(Trainer):
        def __init__(self, parts):
            super().__init__(parts)
            self.add_callback("after_epoch", fill_disk)

    monkeypatch.setattr(train_cli, "Trainer", FillingTrainer)
    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    args = train_cli.parse_args(["--cfg", str(train_setup / "tiny.cfg"), "--data", str(train_setup / "data.yaml"),
                                 "--hyp", str(train_setup / "hyp.yaml"), "--epochs", "2", "--device", "cpu",
                                 "--project", str(small_disk), "--name", "run", "--no-progress"])
    err = one_line_error(capsys, lambda: train_cli.main(args))
    last = small_disk / "run" / "last.pt"
    assert "cannot write: the disk is full" in err and f"{last} is intact: continue with --resume {last}" in err
    filler.unlink()
    assert load_checkpoint_file(last)["train"]["epoch"] == 1
    result = Trainer.from_options(TrainOptions(resume=str(last), progress=False, workers=0)).fit()
    assert result.status == "finished" and load_checkpoint_file(last)["train"]["epoch"] == 2


HOLDING_DRIVER = """
import sys, time
sys.path.insert(0, {repo!r})
sys.path.insert(0, {tests!r})
from training_helpers import made_up_evaluation
from yolo.engine import Trainer

def hold(self):  # the run is open (its folder locked): say so, then train for a long time
    print("training", flush=True)
    time.sleep(120)

Trainer._train = hold
import yolo.engine.hooks.evaluation as evaluation_module
evaluation_module.evaluate_training = made_up_evaluation
from yolo.cli.train import cli
cli(sys.argv[1:])
"""


@pytest.mark.slow
def test_two_resumes_of_one_run_at_once_the_second_refuses(capsys, train_setup, monkeypatch):
    import yolo.cli.train as train_cli
    from yolo.engine import TrainOptions, Trainer

    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    first = Trainer.from_options(TrainOptions(cfg=str(train_setup / "tiny.cfg"), data=str(train_setup / "data.yaml"),
                                              hyp=ONE_HEAD_HYP, epochs=1, device="cpu",
                                              project=str(train_setup / "runs"),
                                              name="run", progress=False, workers=0)).fit()
    last = first.run_dir / "last.pt"
    holder = subprocess.Popen([sys.executable, "-c", HOLDING_DRIVER.format(repo=str(REPO), tests=str(REPO / "tests")),
                               "--resume", str(last), "--epochs", "2", "--device", "cpu", "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=train_setup)
    try:
        assert holder.stdout.readline().strip() == "training", holder.stderr.read()[-2000:]
        err = one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args(
            ["--resume", str(last), "--epochs", "2", "--device", "cpu", "--no-progress"])))
        assert f"{first.run_dir}: another training is running in this run folder" in err, err
    finally:
        holder.kill()
        holder.communicate()
    # The lock goes with its process (even killed): the run resumes and finishes.
    result = Trainer.from_options(TrainOptions(resume=str(last), epochs=2, progress=False, workers=0)).fit()
    assert result.status == "finished" and result.epochs_done == 2


# The killed process: tools/train.py with the made-up evaluation and a SIGKILL at one save point.
DRIVER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
sys.path.insert(0, {tests!r})
import yolo.engine.hooks.checkpointing as checkpointing_module
import yolo.engine.trainer as trainer_module
from training_helpers import made_up_evaluation

target, stage, occurrence = sys.argv[1], sys.argv[2], int(sys.argv[3])
count = 0
real_save, real_replace = checkpointing_module.save_checkpoint, os.replace

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def save(ckpt, path):
    global count
    hit = Path(path).name == target and (count := count + 1) == occurrence
    if hit and stage == "before":
        die()
    result = real_save(ckpt, path)
    if hit and stage == "after":
        die()
    return result

def replace(src, dst):  # the rename that ends an atomic save: its temp file is complete on disk
    if stage == "written" and Path(dst).name == target and count == occurrence:
        die()
    return real_replace(src, dst)

checkpointing_module.save_checkpoint = save
os.replace = replace
import yolo.engine.hooks.evaluation as evaluation_module
evaluation_module.evaluate_training = made_up_evaluation
sys.argv = ["train.py"] + sys.argv[4:]
from yolo.cli.train import main, parse_args
sys.exit(main(parse_args()))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return write_one_head_training(tmp_path_factory.mktemp("kill"))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["best.pt", "last.pt"])
@pytest.mark.parametrize("stage", ["before", "written", "after"])
def test_kill_during_final_save_then_resume_loses_nothing(setup, tmp_path, monkeypatch, target, stage):
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    driver = DRIVER.format(repo=str(REPO), tests=str(REPO / "tests"))
    cmd = [sys.executable, "-c", driver, target, stage, "2",
           "--cfg", str(setup / "tiny.cfg"), "--data", str(setup / "data.yaml"), "--hyp", str(setup / "hyp.yaml"),
           "--epochs", "2", "--device", "cpu", "--project", str(tmp_path), "--name", "run", "--no-progress"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run_dir = tmp_path / "run"
    if stage == "written":  # the kill left the unfinished temp file, as a real crash would
        assert list(run_dir.glob(f".{target}.*.tmp")), sorted(p.name for p in run_dir.iterdir())

    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    result = Trainer.from_options(TrainOptions(resume=str(run_dir), progress=False, workers=0)).fit()

    assert result.status == "finished" and result.epochs_done == 2
    assert not list(run_dir.glob(".*tmp")), sorted(p.name for p in run_dir.iterdir())
    last, best = load_checkpoint_file(run_dir / "last.pt"), load_checkpoint_file(run_dir / "best.pt")
    assert last["train"]["epoch"] == 2 and last["train"]["global_step"] == 4
    # The best epoch is the last one (rising metrics); best.pt must be that epoch, with the recorded score.
    expected = fitness(made_up_evaluation(None, 1, True))
    assert last["train"]["best_fitness"] == pytest.approx(expected)
    assert best["train"]["epoch"] == 2 and best["train"]["best_fitness"] == pytest.approx(expected)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A tiny generated shapes dataset (24 train, 8 val images of 96-128 px) and its YAML."""
    return shapes_training(tmp_path_factory.mktemp("shapes"), num_train=24, num_val=8, seed=7)


# ------------------------------------------------------------------------------------------ resume
@pytest.fixture(scope="module")
def reference_run(shapes, tmp_path_factory):
    """An uninterrupted 3-epoch run (EMA on, accumulation over 2 mini-batches)."""
    project = tmp_path_factory.mktemp("reference")
    trainer = run(shapes, project, epochs=3)
    return trainer.result.run_dir


@pytest.mark.slow
@pytest.mark.usefixtures("private_cache")
def test_resume_mid_epoch_matches_uninterrupted(shapes, reference_run, tmp_path):
    def stop_in_epoch_two(t):
        if t.state.global_step == 4:  # the first update of epoch 2 (3 updates per epoch)
            t.request_stop()

    first = run(shapes, tmp_path, epochs=3, hooks={"after_step": stop_in_epoch_two})
    assert first.result.status == "interrupted"
    saved = train_state(first.result.run_dir)
    assert (saved["train"]["epoch"], saved["train"]["epoch_step"], saved["train"]["global_step"]) == (1, 1, 4)
    assert len(read_results(first.result.run_dir)) == 1

    resumed = Trainer.from_options(TrainOptions(resume=str(first.result.run_dir / "last.pt"), progress=False)).fit()
    assert resumed.status == "finished" and resumed.run_dir == first.result.run_dir
    assert_same_state(train_state(resumed.run_dir), train_state(reference_run))
    ref_rows, rows = read_results(reference_run), read_results(resumed.run_dir)
    for a, b in zip(ref_rows, rows):
        untimed = [k for k in RESULTS_COLUMNS if k not in RESULTS_TIME_COLUMNS]
        assert [a[k] for k in untimed] == [b[k] for k in untimed]
    assert len(rows) == 3


@pytest.mark.slow
@pytest.mark.usefixtures("private_cache")
def test_ctrl_c_saves_and_resume_matches_uninterrupted(shapes, reference_run, tmp_path):
    """A real SIGINT to tools/train.py: it saves last.pt, exits cleanly; --resume ends where the reference did."""
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text(yaml.safe_dump(FAST))
    cmd = [sys.executable, str(REPO / "tools" / "train.py"), "--cfg", str(shapes["cfg"]), "--data",
           str(shapes["data"]), "--hyp", str(hyp_file), "--epochs", "3", "--device", "cpu", "--project",
           str(tmp_path), "--name", "killed", "--no-progress"]
    # the reference and the resumed run train in this process: the killed one uses as many threads
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(torch.get_num_threads())}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run_dir = tmp_path / "killed"
    deadline = time.time() + 120
    while not (run_dir / "results.csv").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert "--resume" in output and "Traceback" not in output, output
    # how to continue is said once, with the command that was run
    assert output.count("continue with") == 1 and f"python {cmd[1]} --resume {run_dir / 'last.pt'}" in output, output
    saved = train_state(run_dir)
    assert saved["train"]["epoch"] >= 1 and saved["train"]["global_step"] < 9  # stopped before the end

    resumed = Trainer.from_options(TrainOptions(resume=str(run_dir), progress=False)).fit()
    assert resumed.status == "finished" and resumed.global_step == 9
    assert_same_state(train_state(run_dir), train_state(reference_run), exact=False)


@pytest.fixture(scope="module")
def eight_shapes(tmp_path_factory):
    """8 train and 2 val images of generated shapes, for the resumed epoch."""
    return shapes_training(tmp_path_factory.mktemp("shapes"), num_train=8, num_val=2, seed=5)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("stop_at", [1, 2], ids=["mid-epoch", "after-the-last-update"])
def test_a_resumed_epoch_counts_the_time_trained_before_the_stop(eight_shapes, tmp_path, monkeypatch, stop_at):
    """Stopped after update ``stop_at`` of the first epoch (2 updates of 2 mini-batches) and resumed: the epoch's
    row counts every mini-batch's data wait and step, before the stop and after it. With the ticking clock an
    uninterrupted epoch reads (4, 4, 1); the stopped one reads its two clocks' parts added up: the same data and
    step, an extra second of other per clock. Before, the row held only the part after the stop (after the
    epoch's last update: a step of 0 s and a time_s of the evaluation alone)."""
    from training_helpers import train_state

    made = EpochTimes.__init__

    def with_ticking_clock(self, device, clock=None):
        made(self, device, clock=ticking_clock())
    monkeypatch.setattr(EpochTimes, "__init__", with_ticking_clock)

    def stop(t):
        if t.state.global_step == stop_at:
            t.request_stop()
    first = run(eight_shapes, tmp_path, epochs=1, img_size=64, hyp={"batch": 4, "subdivisions": 2},
                hooks={"after_step": stop})
    assert first.result.status == "interrupted" and train_state(first.result.run_dir)["train"]["epoch_step"] == stop_at
    resumed = Trainer.from_options(TrainOptions(resume=str(first.result.run_dir), progress=False)).fit()
    assert resumed.status == "finished"
    (row,) = read_results(resumed.run_dir)
    assert (float(row["time_data_s"]), float(row["time_step_s"]), float(row["time_other_s"])) == (4, 4, 2)
    assert "ResultsCSVWriter" not in train_state(resumed.run_dir)["train"]["hooks"]  # used, then dropped


@pytest.mark.parametrize("saved", [64])
def test_a_run_whose_checkpoint_holds_the_size_as_one_side_resumes(tmp_path, saved):
    """Checkpoints record hyp.img_size as YAML does ([height, width], checked below); one side, in hand-written
    or older files, loads too and the run resumes at that size."""
    from training_helpers import write_one_head_training
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.checkpoint import load_checkpoint_file, save_checkpoint

    folder = write_one_head_training(tmp_path)
    options = dict(data=str(folder / "data.yaml"), hyp=str(folder / "hyp.yaml"), device="cpu", progress=False)
    first = Trainer.from_options(TrainOptions(cfg=str(folder / "tiny.cfg"), epochs=1, img_size=64,
                                              project=str(tmp_path / "runs"), **options)).fit()
    last = first.run_dir / "last.pt"
    ckpt = load_checkpoint_file(last)
    assert ckpt["train"]["hyp"]["img_size"] == [64, 64]  # YAML's safe dumper has no tuples
    ckpt["train"]["hyp"]["img_size"] = saved
    save_checkpoint(ckpt, last)
    resumed = Trainer.from_options(TrainOptions(resume=str(last), epochs=2, progress=False, workers=0))
    assert resumed.parts.hyp.img_size == (64, 64)
    result = resumed.fit()
    assert result.status == "finished" and result.epochs_done == 2
    assert load_checkpoint_file(last)["train"]["hyp"]["img_size"] == [64, 64]


@pytest.mark.slow
def test_resume_with_more_epochs_updates_the_settings_files(stray_label_shapes, tmp_path):
    first = fast_train(stray_label_shapes, tmp_path, epochs=1)
    assert yaml.safe_load((first.run_dir / "opt.yaml").read_text())["epochs"] == 1
    resumed = Trainer.from_options(TrainOptions(resume=str(first.run_dir), epochs=2, progress=False)).fit()
    assert resumed.epochs_done == 2 and resumed.run_dir == first.run_dir
    opt = yaml.safe_load((first.run_dir / "opt.yaml").read_text())
    hyp = yaml.safe_load((first.run_dir / "hyp.yaml").read_text())
    assert opt["epochs"] == 2 and hyp["epochs"] == 2
    # the rest as the run started
    assert opt["cfg"] == str(stray_label_shapes["cfg"].resolve()) and opt["resume"] is None


LR = 2.0 ** -7  # a float32 number: the schedule's rate and torch's are the same number


# 8 images, batch 4 in 2 mini-batches of 2: 2 updates per epoch; constant rate, decay on conv weights
HYP = {"workers": 0, "tensorboard": False, "plots": False, "eval_interval": 1, "ema": False, "batch": 4,
       "subdivisions": 2, "burn_in": 0, "policy": "constant", "learning_rate": LR, "momentum": 0.9,
       "decay": 0.0005, "multi_scale": False}


class CountingHook(HookBase):
    """Counts the updates of the run, resumed ones included (its state)."""

    def __init__(self):
        self.updates = 0

    def after_step(self, trainer) -> None:
        self.updates += 1

    def state_dict(self):
        return {"updates": self.updates}

    def load_state_dict(self, state) -> None:
        self.updates = state["updates"]


@pytest.mark.slow
@pytest.mark.usefixtures("private_cache")
def test_a_hooks_state_survives_a_resume(setup, tmp_path, monkeypatch):
    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP), epochs=2,
                           device="cpu", project=str(tmp_path), name="run", progress=False)
    first = Trainer.from_options(options)
    first.hooks.append(CountingHook())
    first.add_callback("after_step", lambda t: t.request_stop() if t.state.global_step == 3 else None)
    assert first.fit().status == "interrupted"  # in epoch 2, after its first update
    last = tmp_path / "run" / "last.pt"
    saved = load_checkpoint_file(last)["train"]
    best_after_epoch_1 = fitness(made_up_evaluation(None, 0, False))
    # the best fitness is the trainer's state; results.csv keeps the stopped epoch's time so far
    assert saved["hooks"].keys() == {"CountingHook", "ResultsCSVWriter"}
    assert saved["hooks"]["CountingHook"] == {"updates": 3} and saved["hooks"]["ResultsCSVWriter"]["epoch"] == 1
    assert saved["best_fitness"] == pytest.approx(best_after_epoch_1)
    assert saved["metrics"] == made_up_evaluation(None, 0, False)
    ckpt = load_checkpoint_file(last)
    # Two earlier formats: the evaluation hook held the best fitness (its state beside the others), and before
    # that hooks had no states. Each keeps the best fitness at the top too.
    older_formats = {"eval_hook": {"EvalHook": {"best_fitness": saved["best_fitness"]}, "CountingHook": {"updates": 3}},
                     "no_hooks": None}
    for name, hooks in older_formats.items():
        folder = tmp_path / name
        folder.mkdir()
        if hooks is None:
            del ckpt["train"]["hooks"]
        else:
            ckpt["train"]["hooks"] = hooks
        torch.save(ckpt, folder / "last.pt")
        (folder / "best.pt").write_bytes((tmp_path / "run" / "best.pt").read_bytes())

    resumed = Trainer.from_options(TrainOptions(resume=str(last), progress=False))
    counter = CountingHook()
    resumed.hooks.append(counter)
    seen = []
    resumed.add_callback("before_train", lambda t: seen.append((t.state.best_fitness, counter.updates)))
    result = resumed.fit()
    assert seen == [(pytest.approx(best_after_epoch_1), 3)]
    assert result.status == "finished" and result.global_step == 4 and counter.updates == 4
    assert load_checkpoint_file(last)["train"]["hooks"]["CountingHook"] == {"updates": 4}
    assert result.best_fitness == pytest.approx(fitness(made_up_evaluation(None, 1, True)))

    # The earlier formats: the best fitness comes back; a hook they knew nothing of starts afresh.
    for name, updates_before in (("eval_hook", 3), ("no_hooks", 0)):
        resumed = Trainer.from_options(TrainOptions(resume=str(tmp_path / name), progress=False))
        counter = CountingHook()
        resumed.hooks.append(counter)
        seen.clear()
        resumed.add_callback("before_train", lambda t: seen.append((t.state.best_fitness, counter.updates)))
        result = resumed.fit()
        assert seen == [(pytest.approx(best_after_epoch_1), updates_before)], name
        assert result.global_step == 4 and counter.updates == updates_before + 1, name
        assert result.best_fitness == pytest.approx(fitness(made_up_evaluation(None, 1, True))), name


@pytest.mark.slow
@pytest.mark.usefixtures("private_cache")
def test_a_best_fitness_without_its_best_pt_is_dropped_on_resume(setup, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP), epochs=1,
                           device="cpu", project=str(tmp_path), name="run", progress=False)
    Trainer.from_options(options).fit()
    (tmp_path / "run" / "best.pt").unlink()  # as a kill between the two saves of an epoch would leave it
    resumed = Trainer.from_options(TrainOptions(resume=str(tmp_path / "run"), epochs=2, progress=False))
    seen = []
    resumed.add_callback("before_train", lambda t: seen.append(t.state.best_fitness))
    with caplog.at_level("WARNING"):
        result = resumed.fit()
    assert seen == [-1.0] and "best.pt is missing although last.pt records a best fitness" in caplog.text
    assert result.best is not None and load_checkpoint_file(result.best)["train"]["epoch"] == 2
