"""Hostile input to the training tool is one line, never a traceback or a silent surprise: flags out of range or
that would be ignored, a cfg the datasets cannot feed, data configs and image lists that are not what they claim,
a damaged settings record in a run folder, a resume from the wrong file, a failure said twice, and a folder that
cannot be created blamed on a full disk.

The runs are ``training_helpers.write_one_head_training``'s: 8 train images, a stride-8 64x64 one-head cfg."""
import errno
import os
import shutil

import pytest
import yaml

import yolo.cli.train as train_cli
import yolo.files.write_errors as write_errors
from helpers import REPO, one_line_error, run_tool
from training_helpers import HYP as ONE_HEAD_HYP, write_one_head_training
from yolo.data import load_data_config
from yolo.engine import TrainOptions, Trainer
from yolo.errors import DataError
from yolo.files.write_errors import output_error

pytestmark = pytest.mark.usefixtures("private_cache")


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


def base_flags(trained_setup, tmp_path, **given):
    """The flags of a one-epoch CPU run of ``trained_setup`` into ``tmp_path/runs``; ``given`` (``--flag value``, keys
    without the dashes, ``_`` for ``-``) replace or add flags."""
    flags = {"cfg": trained_setup / "tiny.cfg", "data": trained_setup / "data.yaml",
             "hyp": trained_setup / "hyp.yaml", "epochs": 1, "device": "cpu", "project": tmp_path / "runs"}
    flags.update(given)
    argv = [item for key, value in flags.items() for item in (f"--{key.replace('_', '-')}", str(value))]
    return argv + ["--no-progress"]


def train_error(capsys, argv) -> str:
    """``tools/train.py ARGV`` in this process: its one ``error:`` line (exit status 2)."""
    return one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args([str(a) for a in argv])))


def line_of(text: str, start: str) -> int:
    """The number of the first line of ``text`` that starts with ``start``."""
    return next(n for n, line in enumerate(text.splitlines(), start=1) if line.startswith(start))


# ------------------------------------------------------------------------------ flags
def test_freeze_beyond_the_models_layers_is_one_line(capsys, trained_setup, tmp_path):
    err = train_error(capsys, base_flags(trained_setup, tmp_path, freeze=999))
    assert err == ("error: --freeze 999 is out of range: the model has 5 layers (0..4); --freeze N freezes layers "
                   "0..N-1, so N is 0 to 5"), err


def test_a_seed_numpy_and_torch_cannot_take_is_refused_by_the_flag(capsys):
    with pytest.raises(SystemExit) as info:
        train_cli.parse_args(["--seed", "99999999999999999999"])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert ("argument --seed: 99999999999999999999 is out of range: a seed must be between 0 and 4294967295"
            in err), err
    assert train_cli.parse_args(["--seed", "4294967295"]).seed == 2**32 - 1  # numpy's largest legacy seed


def test_cutoff_with_a_pt_checkpoint_is_refused(capsys, trained_setup, tmp_path):
    checkpoint = trained_setup / "runs" / "run" / "last.pt"
    err = train_error(capsys, base_flags(trained_setup, tmp_path, weights=checkpoint, cutoff=2))
    assert err == (f"error: --cutoff 2: applies to Darknet .weights only, not to the checkpoint {checkpoint} "
                   "(its tensors load by name): drop --cutoff"), err
    assert not (tmp_path / "runs").exists()


def test_cutoff_without_weights_is_refused(capsys, trained_setup, tmp_path):
    err = train_error(capsys, base_flags(trained_setup, tmp_path, cutoff=2))
    assert err == "error: --cutoff 2: applies to Darknet .weights given with --weights, and there is no --weights"


# ------------------------------------------------------------------------------ the cfg
def test_a_one_channel_cfg_is_refused_at_its_channels_line(capsys, trained_setup, tmp_path):
    text = (trained_setup / "tiny.cfg").read_text().replace("channels=3", "channels=1")
    cfg = tmp_path / "gray.cfg"
    cfg.write_text(text)
    err = train_error(capsys, base_flags(trained_setup, tmp_path, cfg=cfg))
    assert err == (f"error: {cfg}:{line_of(text, 'channels=')}: [net] (layer -1): channels=1: training reads "
                   "3-channel (RGB) images; grayscale or other inputs are not supported: set channels=3"), err


# ------------------------------------------------------------------------------ data configs and image lists
def write_data_yaml(trained_setup, tmp_path, **changes):
    """``trained_setup``'s data YAML with ``changes``, written to ``tmp_path/data.yaml``."""
    data = yaml.safe_load((trained_setup / "data.yaml").read_text())
    data.update(changes)
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_single_image_as_the_train_split_is_one_line(capsys, trained_setup, tmp_path):
    image = trained_setup / "data" / "images" / "train" / "00000.jpg"
    data = write_data_yaml(trained_setup, tmp_path, train=str(image))
    err = train_error(capsys, base_flags(trained_setup, tmp_path, data=data))
    assert err == (f"error: {image}: an image, not a text list of image paths: give the folder of the split's "
                   "images or a .txt list of them"), err


def test_a_darknet_data_file_whose_train_is_an_image_is_one_line(capsys, trained_setup, tmp_path):
    image = trained_setup / "data" / "images" / "train" / "00000.jpg"
    names = tmp_path / "shapes.names"
    names.write_text("circle\nsquare\ntriangle\ncross\nstar\n")
    data = tmp_path / "obj.data"
    data.write_text(f"classes=5\ntrain={image}\nvalid={trained_setup / 'data' / 'images' / 'val'}\nnames={names}\n")
    err = train_error(capsys, base_flags(trained_setup, tmp_path, data=data))
    assert err == (f"error: {image}: an image, not a text list of image paths: give the folder of the split's "
                   "images or a .txt list of them"), err


def test_a_list_file_with_a_line_that_is_not_utf8_is_one_line_at_that_line(capsys, trained_setup, tmp_path):
    listing = tmp_path / "train.txt"
    listing.write_bytes(f"{trained_setup / 'data' / 'images' / 'train' / '00000.jpg'}\n".encode() + b"\xff\xfei\x00\n")
    data = write_data_yaml(trained_setup, tmp_path, train=str(listing))
    err = train_error(capsys, base_flags(trained_setup, tmp_path, data=data))
    assert err == f"error: {listing}:2: not a text list of image paths (this line is not UTF-8 text)", err


def test_generate_that_is_neither_a_name_nor_a_mapping_names_the_file_and_line(trained_setup, tmp_path):
    data = write_data_yaml(trained_setup, tmp_path, generate=[1, 2])
    line = line_of(data.read_text(), "generate:")
    with pytest.raises(DataError) as info:
        load_data_config(data)
    assert str(info.value) == (f"{data}:{line}: 'generate' must be a generator name (shapes) or a mapping with "
                               "'name: shapes' and its settings, got [1, 2]")


def test_a_generate_setting_with_a_number_for_a_name_is_an_unknown_setting(trained_setup, tmp_path):
    data = write_data_yaml(trained_setup, tmp_path, generate={"name": "shapes", 1: 2})
    with pytest.raises(DataError, match=r"'generate': unknown setting '1' \(known: name, size_range"):
        load_data_config(data)


# ------------------------------------------------------------------------------ resuming
def test_resume_from_best_pt_is_refused_and_the_run_is_untouched(capsys, run_copy):
    before = {name: (run_copy / name).read_bytes() for name in ("last.pt", "results.csv")}
    err = train_error(capsys, ["--resume", run_copy / "best.pt", "--device", "cpu", "--no-progress"])
    assert err == (f"error: --resume {run_copy / 'best.pt'}: a run resumes from its last.pt (the state it stopped "
                   f"in), here {run_copy / 'last.pt'}, or from its folder; to train from best.pt's weights start a "
                   f"new run with --weights {run_copy / 'best.pt'}"), err
    assert {name: (run_copy / name).read_bytes() for name in before} == before


def test_resume_refuses_the_settings_it_would_ignore(capsys, trained_setup, run_copy):
    last = run_copy / "last.pt"
    err = train_error(capsys, ["--resume", last, "--cfg", trained_setup / "tiny.cfg",
                               "--data", trained_setup / "data.yaml", "--batch-size", "4", "--epochs", "2",
                               "--device", "cpu", "--workers", "0", "--no-progress"])
    assert err == (f"error: --resume {last} continues the run with its saved settings: --cfg, --data, --batch-size "
                   "cannot change (only --epochs, --device, --workers, --tf32, --compile and --cache-images can); "
                   f"to train with other settings start a new run with --weights {last}"), err


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


@pytest.mark.parametrize("values, message", [
    ({"workers": 1000}, "workers=1000 is out of range: it must be between 0 and 64 (as --workers)"),
    ({"learning_rate": 1e308}, "learning_rate=1e+308 is out of range: it must be between 0 and 1e+30"),
])
def test_a_hyp_file_value_beyond_its_flags_range_is_refused(capsys, trained_setup, tmp_path, values, message):
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**ONE_HEAD_HYP, **values}))
    err = train_error(capsys, base_flags(trained_setup, tmp_path, hyp=hyp))
    assert err == f"error: {hyp}: {message}", err


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


def test_resume_refuses_a_dataset_whose_names_were_reordered(capsys, trained_setup, run_copy, tmp_path):
    names = yaml.safe_load((trained_setup / "data.yaml").read_text())["names"]
    data = write_data_yaml(trained_setup, tmp_path, names=[names[1], names[0], *names[2:]])
    last = edited_last(run_copy, train={"options": {"data": str(data)}})
    err = train_error(capsys, ["--resume", last, "--epochs", "2", "--device", "cpu", "--no-progress"])
    assert err == (f"error: --resume {last}: {data} is not the dataset the run started with: the class names "
                   f"reordered (class 0 was '{names[0]}', now '{names[1]}'; class 1 was '{names[1]}', now "
                   f"'{names[0]}'); resume with the dataset as it was, or start a new run with --weights {last}"), err


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


def test_resume_accepts_the_same_dataset_moved_to_another_folder(trained_setup, run_copy, tmp_path):
    """The record is of the images relative to their split's folder: the dataset moved (with a config naming its
    new place) is the same dataset."""
    moved = shutil.copytree(trained_setup / "data", tmp_path / "moved")
    data = write_data_yaml(trained_setup, tmp_path, path=str(moved))
    last = edited_last(run_copy, train={"options": {"data": str(data)}})
    status = train_cli.main(train_cli.parse_args(["--resume", str(last), "--epochs", "2", "--device", "cpu",
                                                  "--no-progress"]))
    assert status == 0


def test_an_opt_yaml_nested_too_deep_is_rewritten_from_the_checkpoint_on_resume(capsys, caplog, run_copy):
    (run_copy / "opt.yaml").write_text("epochs: " + "[" * 5000 + "]" * 5000 + "\n")
    with caplog.at_level("WARNING"):
        status = train_cli.main(train_cli.parse_args(["--resume", str(run_copy / "last.pt"), "--epochs", "2",
                                                      "--device", "cpu", "--no-progress"]))
    assert status == 0
    assert f"{run_copy / 'opt.yaml'}: not a readable settings record: rewritten from the checkpoint" in caplog.text
    assert yaml.safe_load((run_copy / "opt.yaml").read_text())["epochs"] == 2


# ------------------------------------------------------------------------------ failures said once, and rightly
def test_a_non_finite_loss_is_reported_once(trained_setup, tmp_path):
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**ONE_HEAD_HYP, "learning_rate": 1e30}))
    proc = run_tool("train", *base_flags(trained_setup, tmp_path, hyp=hyp), env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 3, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "non-finite loss" in line]
    assert len(lines) == 1 and lines[0].startswith("error: non-finite loss ("), proc.stderr[-2000:]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_folder_that_cannot_be_created_is_not_called_a_full_disk(capsys, trained_setup, tmp_path):
    err = train_error(capsys, base_flags(trained_setup, tmp_path, project="/proc/probe"))
    assert err == "error: /proc/probe/exp: cannot write: no such file or directory", err


def test_the_os_reason_wins_over_a_free_space_guess(tmp_path, monkeypatch):
    """A file system that reports no free blocks (as /proc does) is not the cause when the OS gave its own."""
    real_statvfs = os.statvfs

    class NoFreeBlocks:
        def __init__(self, stats):
            self.f_flag, self.f_frsize, self.f_bavail = stats.f_flag, stats.f_frsize, 0

    monkeypatch.setattr(write_errors.os, "statvfs", lambda p: NoFreeBlocks(real_statvfs(p)))
    target = tmp_path / "missing" / "exp"
    error = output_error(target, FileNotFoundError(errno.ENOENT, "No such file or directory", str(target)))
    assert str(error) == f"{target}: cannot write: no such file or directory"
    error = output_error(target, OSError(errno.ENOSPC, "No space left on device", str(target)))
    assert str(error) == f"{target}: cannot write: the disk is full: free some space"


def test_a_file_system_without_blocks_is_not_called_full(tmp_path, monkeypatch):
    """/proc and /sys report no blocks at all, so no free ones either: a write there that fails without a
    reason (cv2.imwrite's False) is not put down to a full disk."""
    real_statvfs = os.statvfs

    class Pseudo:
        def __init__(self, stats):
            self.f_flag, self.f_frsize, self.f_bavail, self.f_blocks = stats.f_flag, stats.f_frsize, 0, 0

    monkeypatch.setattr(write_errors.os, "statvfs", lambda p: Pseudo(real_statvfs(p)))
    target = tmp_path / "image.jpg"
    assert str(output_error(target)) == f"{target}: cannot write: the writer reported a failure"
