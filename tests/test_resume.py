"""What --resume checks before it spends an epoch: the run folder's results.csv can be read, the last.pt is the run's
own (the model its cfg.cfg records), and no --project it would ignore was given. Each refusal is one line and
changes nothing in the folder."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from helpers import one_line_error
from training_helpers import HYP as ONE_HEAD_HYP, made_up_evaluation, write_one_head_training
from yolo.cli import train as train_cli
from yolo.engine import TrainOptions, Trainer, resume
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


def test_an_image_deleted_while_training_is_one_short_line_with_the_resume_command(tmp_path, capsys, monkeypatch):
    # before: 2,242+ characters of the loader worker's flattened traceback, cut before the file name, no resume hint
    folder = write_one_head_training(tmp_path)
    images = sorted((folder / "data" / "images" / "train").glob("*.jpg"))
    real = Trainer.from_options

    def with_a_deletion(options):
        trainer = real(options)
        trainer.add_callback("epoch_end", lambda t: [p.unlink() for p in images if p.exists()])
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
        resume.saved_options({"train": {"options": {"seed": "a"}}}, Path("last.pt"))


@pytest.fixture(scope="module")
def trained_setup(tmp_path_factory):
    """The one-head training files, with a finished one-epoch run of them in ``runs/run``."""
    folder = write_one_head_training(tmp_path_factory.mktemp("hostile"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("YOLO_CACHE_DIR", str(folder / "cache"))
        Trainer.from_options(TrainOptions(cfg=str(folder / "tiny.cfg"), data=str(folder / "data.yaml"),
                                          hyp=dict(ONE_HEAD_HYP), epochs=1, device="cpu", project=str(folder / "runs"),
                                          name="run", progress=False)).fit()
    return folder


@pytest.fixture
def run_copy(trained_setup, tmp_path):
    """A copy of the finished run, for a test that resumes it."""
    return shutil.copytree(trained_setup / "runs" / "run", tmp_path / "run")


def train_error(capsys, argv) -> str:
    """``tools/train.py ARGV`` in this process: its one ``error:`` line (exit status 2)."""
    return one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args([str(a) for a in argv])))


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


def mounted(path: Path, options: str):
    """Mount a tmpfs at ``path`` with ``options`` (``size=300k``, ``ro``); skip the test when the machine
    refuses (not root, or a container without the capability). Returns the unmount function."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({(proc.stderr or proc.stdout).strip() or 'mount failed'}): "
                    "the monkeypatched tests cover the same logic")
    return lambda: subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 300 kB file system (a tmpfs), unmounted after the test."""
    path = tmp_path / "small"
    unmount = mounted(path, "size=300k")
    yield path
    unmount()


@pytest.fixture
def train_setup(tmp_path):
    """8 tiny shapes images, the one-head cfg and its settings (training_helpers.HYP)."""
    return write_one_head_training(tmp_path)


def test_training_on_a_disk_that_fills_up_stops_with_one_line_and_resumes(capsys, train_setup, tmp_path,
                                                                          small_disk, monkeypatch):
    """The disk fills up after epoch 1 (a filler file takes every free block); the save of epoch 2 fails with
    one line saying the disk is full and how to continue; with space freed, --resume finishes the run."""
    import yolo.cli.train as train_cli
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.checkpoint import load_checkpoint_file

    filler = small_disk / "filler"

    def fill_disk(trainer):
        if trainer.epoch == 1:
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
            self.add_callback("epoch_end", fill_disk)

    monkeypatch.setattr(train_cli, "Trainer", FillingTrainer)
    monkeypatch.setattr(Trainer, "_evaluate", made_up_evaluation)
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
Trainer._evaluate = made_up_evaluation
from yolo.cli.train import cli
cli(sys.argv[1:])
"""


def test_two_resumes_of_one_run_at_once_the_second_refuses(capsys, train_setup, monkeypatch):
    import yolo.cli.train as train_cli
    from yolo.engine import TrainOptions, Trainer

    monkeypatch.setattr(Trainer, "_evaluate", made_up_evaluation)
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
