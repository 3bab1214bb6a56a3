"""The trainer on tiny shapes runs: it learns, resumes exactly (in-process and after a real Ctrl-C), stops on NaN.

Every run here is a few seconds: 64-128 px inputs, a few dozen images, a cfg of a few thousand weights.
"""
import os
from pathlib import Path

import pytest
import torch
import yaml

import yolo.cli.train as train_cli
from helpers import run_tool
from training_helpers import FAST, HYP as ONE_HEAD_HYP, base_flags, read_results, run, shapes_training, train_error, train_state, write_data
from yolo.data import SHAPE_NAMES
from yolo.engine import TrainOptions, Trainer
from yolo.errors import NonFiniteLossError
from yolo.engine.hooks.writers import RESULTS_COLUMNS

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A tiny generated shapes dataset (24 train, 8 val images of 96-128 px) and its YAML."""
    return shapes_training(tmp_path_factory.mktemp("shapes"), num_train=24, num_val=8, seed=7)


pytestmark = pytest.mark.usefixtures("private_cache")


# ------------------------------------------------------------------------------------------ learning
@pytest.mark.slow
def test_loss_falls_and_map_rises(shapes, tmp_path):
    """Overfit 24 images (val = the train images): the loss must fall and mAP@0.5 must rise well above chance."""
    data = write_data(shapes["folder"], shapes["root"], val="images/train", name="overfit.yaml")
    options = TrainOptions(cfg=str(shapes["cfg"]), data=str(data), device="cpu", project=str(tmp_path), name="learn",
                           progress=False, img_size=96, epochs=20,
                           hyp={**FAST, "eval_interval": 10, "tensorboard": True, "conf_thres": 0.01, "batch": 8, "subdivisions": 1,
                                "learning_rate": 0.02, "burn_in": 10, "steps": [0.8], "scales": [0.1],
                                "bn_momentum": 0.1, "augment": {"jitter": 0.0, "hue": 0.0, "saturation": 1.0,
                                                                "exposure": 1.0, "flip": 0.0}})
    result = Trainer.from_options(options).fit()
    rows = read_results(result.run_dir)
    assert [int(r["epoch"]) for r in rows] == list(range(1, 21))
    assert list(rows[0].keys()) == list(RESULTS_COLUMNS)
    assert float(rows[-1]["loss"]) < 0.5 * float(rows[0]["loss"])
    evaluated = [r for r in rows if r["mAP50"]]
    assert [int(r["epoch"]) for r in evaluated] == [10, 20]
    first, last = evaluated
    assert float(first["mAP50"]) < 0.2 and float(last["mAP50"]) > float(first["mAP50"]) + 0.25, \
        (first["mAP50"], last["mAP50"])
    assert result.metrics["mAP50"] == pytest.approx(float(last["mAP50"]), abs=1e-4)

    run_dir = result.run_dir
    for name in ("last.pt", "best.pt", "cfg.cfg", "hyp.yaml", "opt.yaml", "data.yaml", "metrics.json"):
        assert (run_dir / name).is_file(), name
    assert list(run_dir.glob("events.out.tfevents.*"))
    assert (run_dir / "cfg.cfg").read_text() == shapes["cfg"].read_text()
    hyp = yaml.safe_load((run_dir / "hyp.yaml").read_text())
    assert hyp["learning_rate"] == 0.02 and hyp["momentum"] == 0.9 and hyp["decay"] == 0.0005  # YAML and cfg
    best = train_state(run_dir, "best.pt")
    assert best["num_classes"] == 5 and best["names"] == list(SHAPE_NAMES)
    best_map = max(float(r["mAP50_95"]) * 0.9 + float(r["mAP50"]) * 0.1 for r in evaluated)
    assert best["train"]["best_fitness"] == pytest.approx(best_map, abs=1e-4)

    # The checkpoint serves inference straight away.
    from yolo.models.model import load_model

    model = load_model(weights=run_dir / "best.pt").eval()
    assert model(torch.rand(1, 3, 96, 96)).shape[-1] == 10


@pytest.mark.slow
def test_lr_follows_the_darknet_schedule_and_batches_accumulate(shapes, tmp_path):
    seen = []
    trainer = run(shapes, tmp_path, epochs=2, hooks={"after_step": lambda t: seen.append(
        (t.state.global_step, t.parts.optimizer.param_groups[0]["lr"]))})
    # 24 images, batch 8 in 2 subdivisions of 4 -> 3 updates an epoch; burn_in 4 (power 4); step at 0.7 of 6.
    plan = trainer.parts.plan
    assert plan.mini_batch == 4 and plan.accumulate == 2 and plan.steps_per_epoch == 3
    expected = [0.01 * (n / 4) ** 4 if n < 4 else (0.01 if n < round(0.7 * 6) else 0.001) for n in range(1, 7)]
    assert [n for n, _ in seen] == list(range(1, 7))
    assert [lr for _, lr in seen] == pytest.approx(expected, rel=1e-9)
    assert len(read_results(trainer.result.run_dir)) == 2


# ------------------------------------------------------------------------------------------ failures
@pytest.mark.slow
def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(shapes, tmp_path):
    def poison(t):
        criterion = t.parts.criterion

        def nan_in_epoch_two(outputs, targets, size, images_seen):
            loss, parts = criterion(outputs, targets, size, images_seen=images_seen)
            if t.state.epoch == 1 and t.state.epoch_step == 1:
                loss = loss * float("nan")
            return loss, parts

        t.parts.criterion = nan_in_epoch_two

    with pytest.raises(NonFiniteLossError) as info:
        run(shapes, tmp_path, name="nan", epochs=3, hooks={"before_train": poison})
    message = str(info.value)
    assert "epoch 2/3" in message and "iteration 3 " in message and "update 2/3" in message
    assert "last good checkpoint" in message and str(tmp_path / "nan" / "last.pt") in message
    saved = train_state(tmp_path / "nan")
    assert (saved["train"]["epoch"], saved["train"]["epoch_step"]) == (1, 0)  # end of epoch 1
    for state in (saved["model"], saved["train"]["model"]):
        assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    assert len(read_results(tmp_path / "nan")) == 1


@pytest.mark.slow
def test_run_folders_are_never_reused_and_transfer_is_reported(shapes, tmp_path, assets, caplog):
    """Fine-tuning COCO yolov3-tiny weights to 5 classes (--adapt-classes): heads reported, new run folder."""
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "keep.txt").write_text("an earlier run")
    options = TrainOptions(cfg=str(assets("cfg/yolov3-tiny.cfg")), data=str(shapes["data"]), adapt_classes=True,
                           weights=str(assets("weights/yolov3-tiny.weights")), freeze=13, epochs=1, img_size=64,
                           batch_size=8, device="cpu", project=str(tmp_path), progress=False,
                           hyp={**FAST, "max_steps_per_epoch": 1, "burn_in": 0, "learning_rate": 0.001,
                                # our multi-scale, named: Darknet's rule for the cfg's random=1 would run the
                                # first 10 updates at its largest size (128 px here): 4.8 s instead of 2.7 s
                                "multi_scale": True})
    with caplog.at_level("INFO"):
        result = Trainer.from_options(options).fit()
    assert result.run_dir == tmp_path / "exp2" and (tmp_path / "exp" / "keep.txt").read_text() == "an earlier run"
    text = caplog.text
    assert "re-initialized layer 15" in text and "re-initialized layer 22" in text and "froze layers 0..12" in text
    saved = train_state(result.run_dir)
    assert saved["num_classes"] == 5 and "classes=5" in saved["cfg"].replace(" ", "")


@pytest.mark.slow
def test_trainer_survives_corrupt_images_and_broken_labels(shapes, tmp_path, caplog):
    import shutil

    root = tmp_path / "damaged"
    shutil.copytree(shapes["root"], root)
    (root / "images" / "train" / "00000.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    (root / "labels" / "train" / "00001.txt").write_text("2 0.5 0.5 0.2\nseven 0.1 0.1 0.1 0.1\n9 0.5 0.5 0.1 0.1\n")
    data = write_data(tmp_path, root, name="damaged.yaml")
    options = TrainOptions(cfg=str(shapes["cfg"]), data=str(data), device="cpu", project=str(tmp_path),
                           progress=False, epochs=1, hyp=dict(FAST))
    with caplog.at_level("WARNING"):
        trainer = Trainer.from_options(options)
        result = trainer.fit()
    assert result.status == "finished" and result.global_step == trainer.parts.plan.steps_per_epoch
    assert len(trainer.parts.train_set) == 23  # the unreadable image is left out
    text = caplog.text
    assert "00000.jpg" in text and "00001.txt" in text


def line_of(text: str, start: str) -> int:
    """The number of the first line of ``text`` that starts with ``start``."""
    return next(n for n, line in enumerate(text.splitlines(), start=1) if line.startswith(start))


# ------------------------------------------------------------------------------ flags
@pytest.mark.slow
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


@pytest.mark.slow
def test_cutoff_with_a_pt_checkpoint_is_refused(capsys, trained_setup, tmp_path):
    checkpoint = trained_setup / "runs" / "run" / "last.pt"
    err = train_error(capsys, base_flags(trained_setup, tmp_path, weights=checkpoint, cutoff=2))
    assert err == (f"error: --cutoff 2: applies to Darknet .weights only, not to the checkpoint {checkpoint} "
                   "(its tensors load by name): drop --cutoff"), err
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_cutoff_without_weights_is_refused(capsys, trained_setup, tmp_path):
    err = train_error(capsys, base_flags(trained_setup, tmp_path, cutoff=2))
    assert err == "error: --cutoff 2: applies to Darknet .weights given with --weights, and there is no --weights"


# ------------------------------------------------------------------------------ the cfg
@pytest.mark.slow
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


@pytest.mark.slow
def test_a_single_image_as_the_train_split_is_one_line(capsys, trained_setup, tmp_path):
    image = trained_setup / "data" / "images" / "train" / "00000.jpg"
    data = write_data_yaml(trained_setup, tmp_path, train=str(image))
    err = train_error(capsys, base_flags(trained_setup, tmp_path, data=data))
    assert err == (f"error: {image}: an image, not a text list of image paths: give the folder of the split's "
                   "images or a .txt list of them"), err


@pytest.mark.slow
def test_a_darknet_data_file_whose_train_is_an_image_is_one_line(capsys, trained_setup, tmp_path):
    image = trained_setup / "data" / "images" / "train" / "00000.jpg"
    names = tmp_path / "shapes.names"
    names.write_text("circle\nsquare\ntriangle\ncross\nstar\n")
    data = tmp_path / "obj.data"
    data.write_text(f"classes=5\ntrain={image}\nvalid={trained_setup / 'data' / 'images' / 'val'}\nnames={names}\n")
    err = train_error(capsys, base_flags(trained_setup, tmp_path, data=data))
    assert err == (f"error: {image}: an image, not a text list of image paths: give the folder of the split's "
                   "images or a .txt list of them"), err


@pytest.mark.slow
def test_a_list_file_with_a_line_that_is_not_utf8_is_one_line_at_that_line(capsys, trained_setup, tmp_path):
    listing = tmp_path / "train.txt"
    listing.write_bytes(f"{trained_setup / 'data' / 'images' / 'train' / '00000.jpg'}\n".encode() + b"\xff\xfei\x00\n")
    data = write_data_yaml(trained_setup, tmp_path, train=str(listing))
    err = train_error(capsys, base_flags(trained_setup, tmp_path, data=data))
    assert err == f"error: {listing}:2: not a text list of image paths (this line is not UTF-8 text)", err


@pytest.mark.slow
@pytest.mark.parametrize("values, message", [
    ({"workers": 1000}, "workers=1000 is out of range: it must be between 0 and 64 (as --workers)"),
    ({"learning_rate": 1e308}, "learning_rate=1e+308 is out of range: it must be between 0 and 1e+30"),
])
def test_a_hyp_file_value_beyond_its_flags_range_is_refused(capsys, trained_setup, tmp_path, values, message):
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**ONE_HEAD_HYP, **values}))
    err = train_error(capsys, base_flags(trained_setup, tmp_path, hyp=hyp))
    assert err == f"error: {hyp}: {message}", err


# ------------------------------------------------------------------------------ failures said once, and rightly
@pytest.mark.slow
def test_a_non_finite_loss_is_reported_once(trained_setup, tmp_path):
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(yaml.safe_dump({**ONE_HEAD_HYP, "learning_rate": 1e30}))
    proc = run_tool("train", *base_flags(trained_setup, tmp_path, hyp=hyp), env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 3, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if "non-finite loss" in line]
    assert len(lines) == 1 and lines[0].startswith("error: non-finite loss ("), proc.stderr[-2000:]
