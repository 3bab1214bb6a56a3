"""What the training tests share: their settings, the cfg and data files of a run on generated shapes, reading a
run's results and checkpoints back (and comparing two), one in-process run, and a made-up evaluation that stands in
for the real one."""
from __future__ import annotations

import csv
from pathlib import Path

import torch
import yaml

from cfg_snippets import ONE_HEAD_CFG, TWO_HEAD_CFG
from yolo.data import SHAPE_NAMES, ensure_shapes_dataset
from yolo.engine import TrainOptions, Trainer
from yolo.models.checkpoint import load_checkpoint_file, model_checkpoint, save_checkpoint
from yolo.models.model import Darknet

# Fast settings of the TWO_HEAD_CFG runs (no TensorBoard, no plots, no worker processes).
# The trainer's own improvements (EMA, prior head bias; off by default) stay on here: these tests cover them,
# and from scratch at lr 0.02 Darknet's plain start can diverge.
FAST = {"workers": 0, "tensorboard": False, "plots": False, "eval_interval": 100, "conf_thres": 0.1,
        "ema": True, "head_prior": True}

# The settings of the ONE_HEAD_CFG runs: evaluated every epoch (with made_up_evaluation, each epoch a new best),
# no EMA.
HYP = {"workers": 0, "tensorboard": False, "plots": False, "eval_interval": 1, "ema": False}


def write_cfg(folder: Path, bn: int = 1, name: str = "tiny.cfg") -> Path:
    """TWO_HEAD_CFG (its convolutions' batch_normalize = ``bn``) written to ``folder/name``."""
    path = folder / name
    path.write_text(TWO_HEAD_CFG.format(bn=bn))
    return path


def write_data(folder: Path, root: Path, val: str = "images/val", name: str = "data.yaml") -> Path:
    """The data YAML of a shapes dataset at ``root`` (train split ``images/train``), written to ``folder/name``."""
    path = folder / name
    path.write_text(yaml.safe_dump({"path": str(root), "train": "images/train", "val": val,
                                    "names": list(SHAPE_NAMES)}))
    return path


def shapes_training(folder: Path, num_train: int, num_val: int, seed: int, val: str = "images/val",
                    data_name: str = "data.yaml", bn: int = 1) -> dict:
    """In ``folder``: ``num_train`` + ``num_val`` shapes images of 96-128 px with up to 3 shapes each (``data/``),
    their data YAML (:func:`write_data`) and TWO_HEAD_CFG (:func:`write_cfg`). Returns ``{"folder", "root" (the
    dataset), "data", "cfg"}``."""
    root = ensure_shapes_dataset(folder / "data", num_train=num_train, num_val=num_val, seed=seed, size_range=(96, 128),
                                 max_shapes=3)
    return {"folder": folder, "root": root, "data": write_data(folder, root, val=val, name=data_name),
            "cfg": write_cfg(folder, bn=bn)}


def write_one_head_model(folder: Path):
    """``(cfg, pt, weights)`` in ``folder``: ``tiny.cfg`` (ONE_HEAD_CFG, 5 classes), a checkpoint of it with random
    weights (seed 0) and the shapes' class names, and the same weights as Darknet ``tiny.weights``."""
    torch.manual_seed(0)
    cfg = folder / "tiny.cfg"
    cfg.write_text(ONE_HEAD_CFG)
    model = Darknet(cfg)
    pt = folder / "tiny.pt"
    save_checkpoint(model_checkpoint(model, names=list(SHAPE_NAMES)), pt)
    weights = folder / "tiny.weights"
    model.save_darknet_weights(weights)
    return cfg, pt, weights


def write_one_head_training(folder: Path, hyp: dict = HYP) -> Path:
    """In ``folder``: 8 train and 2 val shapes images of 64-80 px (``data/``), ``data.yaml``, ``tiny.cfg``
    (ONE_HEAD_CFG) and ``hyp.yaml``; returns ``folder``."""
    root = ensure_shapes_dataset(folder / "data", num_train=8, num_val=2, seed=3, size_range=(64, 80), max_shapes=2)
    write_data(folder, root)
    (folder / "tiny.cfg").write_text(ONE_HEAD_CFG)
    (folder / "hyp.yaml").write_text(yaml.safe_dump(hyp))
    return folder


def read_results(run_dir: Path):
    with open(run_dir / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def train_state(run_dir: Path, name: str = "last.pt"):
    return load_checkpoint_file(run_dir / name)


def run(shapes, project: Path, name: str = "exp", hooks=None, **overrides) -> "Trainer":
    """One in-process run on ``shapes["cfg"]`` and ``shapes["data"]`` with the FAST settings (``hyp=`` entries
    override them), ``hooks`` ({event: function}) added: the trainer, its ``result`` set."""
    hyp = dict(FAST)
    hyp.update(overrides.pop("hyp", {}))
    options = TrainOptions(cfg=str(shapes["cfg"]), data=str(shapes["data"]), hyp=hyp, device="cpu",
                           project=str(project), name=name, progress=False, **overrides)
    trainer = Trainer.from_options(options)
    for event, fn in (hooks or {}).items():
        trainer.add_callback(event, fn)
    trainer.result = trainer.fit()
    return trainer


def assert_same_state(a, b, exact: bool = True):
    """Training weights, EMA weights, optimizer buffers and counters of two checkpoints agree."""
    for key in ("epoch", "epoch_step", "global_step"):
        assert a["train"][key] == b["train"][key], key
    pairs = [(a["train"]["model"], b["train"]["model"]), (a["model"], b["model"])]
    opt_a, opt_b = a["train"]["optimizer"]["state"], b["train"]["optimizer"]["state"]
    assert opt_a.keys() == opt_b.keys()
    pairs.append(({str(k): v["momentum_buffer"] for k, v in opt_a.items()},
                  {str(k): v["momentum_buffer"] for k, v in opt_b.items()}))
    for sa, sb in pairs:
        assert sa.keys() == sb.keys()
        for key in sa:
            if exact:
                assert torch.equal(sa[key], sb[key]), key
            else:
                torch.testing.assert_close(sa[key], sb[key], rtol=1e-5, atol=1e-6, msg=key)


def made_up_evaluation(trainer, epoch, final):
    """Stands in for yolo.engine.hooks.evaluation.evaluate_training: metrics that rise every epoch (no model run)."""
    return {"mAP50": (epoch + 1) / 10, "mAP50_95": (epoch + 1) / 20, "precision": 0.5, "recall": 0.5}


def base_flags(trained_setup: Path, tmp_path: Path, **given) -> list:
    """The flags of a one-epoch CPU run of ``trained_setup`` into ``tmp_path/runs``; ``given`` (``--flag value``, keys
    without the dashes, ``_`` for ``-``) replace or add flags."""
    flags = {"cfg": trained_setup / "tiny.cfg", "data": trained_setup / "data.yaml",
             "hyp": trained_setup / "hyp.yaml", "epochs": 1, "device": "cpu", "project": tmp_path / "runs"}
    flags.update(given)
    argv = [item for key, value in flags.items() for item in (f"--{key.replace('_', '-')}", str(value))]
    return argv + ["--no-progress"]


def train_error(capsys, argv) -> str:
    """``tools/train.py ARGV`` in this process: its one ``error:`` line (exit status 2)."""
    from helpers import one_line_error
    from yolo.cli import train as train_cli

    return one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args([str(a) for a in argv])))


def fast_train(shapes: dict, tmp_path: Path, **options):
    """A CPU run at 64 px of a ``shapes_training`` setup into ``tmp_path/run`` (FAST settings, batch 8, evaluated
    every epoch); ``options`` (TrainOptions fields) replace or add settings. Returns the trainer's result."""
    hyp = {**FAST, "batch": 8, "subdivisions": 1, "burn_in": 0, "eval_interval": 1}
    options = {"cfg": str(shapes["cfg"]), "data": str(shapes["data"]), "device": "cpu", "project": str(tmp_path),
               "name": "run", "progress": False, "img_size": 64, "hyp": hyp, **options}
    return Trainer.from_options(TrainOptions(**options)).fit()
