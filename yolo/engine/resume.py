"""Resuming a run from its ``last.pt``: the saved options (with what a resumed run may change), the saved
hyperparameters, and the training state put back into the built parts and the trainer's counters.

What a checkpoint holds is written by :func:`yolo.engine.hooks.checkpointing.training_checkpoint`.
"""
from __future__ import annotations

import logging
import numbers
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch

from yolo.engine.config import Hyperparameters, TrainOptions
from yolo.engine.run_folder import RESUME_KEYS
from yolo.errors import ConfigError, WeightsError
from yolo.models.checkpoint import load_checkpoint_file
from yolo.settings.declare import declaration

logger = logging.getLogger(__name__)

# Settings given both as hyperparameters and as options (flags) that a resumed run may change: how the step runs
# (yolo.engine.step_precision) and whether the train images are kept in memory; never what it computes.
MACHINE_SETTINGS = ("tf32", "compile", "cache_images")

# The options a resumed run takes from the caller, not from its checkpoint: those its opt.yaml records as changed
# (the run length, the device, the workers, the machine settings), the progress display, and --project (where a
# bare --resume looks for the newest run).
RESUME_MAY_CHANGE = ("resume", "progress", "project", *RESUME_KEYS)


@dataclass
class ResumeState:
    """Where a run goes on from: the counters, the last evaluation, the RNG states, the epoch's loss sums so far
    and the hooks' states. The default is a fresh run."""

    epoch: int = 0  # the epoch in progress (0-based)
    epoch_step: int = 0  # updates done in it
    global_step: int = 0  # updates done in the run
    best_fitness: float = -1.0  # the best evaluation's so far (-1: none yet)
    last_metrics: Dict[str, Any] = field(default_factory=dict)
    rng: Optional[Dict[str, Any]] = None  # yolo.engine.rng.rng_state() (None: leave the RNGs as they are)
    epoch_sums: Optional[torch.Tensor] = None  # Float64[4]: box, obj, cls, mini-batches of the epoch so far
    hooks: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # HookBase.state_key -> its state_dict()


def read_resume_checkpoint(options: TrainOptions) -> Tuple[TrainOptions, Optional[Dict[str, Any]]]:
    """With ``--resume``: the run's saved options (only the machine-dependent settings and the run length may
    change; ``resume`` set to the checkpoint's path) and the checkpoint. Otherwise ``options`` with its paths
    made absolute (so that the saved options resume from any working directory), and None."""
    if not options.resume:
        for key in ("cfg", "data", "weights"):
            value = getattr(options, key)
            if value and Path(value).exists():
                setattr(options, key, str(Path(value).resolve()))
        return options, None
    resume_path = Path(options.resume)
    if resume_path.is_dir():
        resume_path = resume_path / "last.pt"
    if resume_path.name != "last.pt":
        raise ConfigError(f"--resume {resume_path}: a run resumes from its last.pt (the state it stopped in), "
                          f"here {resume_path.parent / 'last.pt'}, or from its folder; to train from "
                          f"{resume_path.name}'s weights start a new run with --weights {resume_path}")
    refuse_settings_on_resume(options, resume_path)
    ckpt = load_checkpoint_file(resume_path)
    if "train" not in ckpt:
        raise ConfigError(f"{resume_path}: not a training checkpoint (no optimizer/epoch state); "
                          "use --weights to start a new run from it")
    check_same_run(ckpt, resume_path)
    saved = saved_options(ckpt, resume_path)
    saved.device = options.device if options.device is not None else saved.device
    saved.workers = options.workers if options.workers is not None else saved.workers
    saved.progress = options.progress
    for key in MACHINE_SETTINGS:  # how the step runs may change; the saved value otherwise
        if getattr(options, key) is not None:
            setattr(saved, key, getattr(options, key))
    if options.epochs is not None:
        saved.epochs = options.epochs
    saved.resume = str(resume_path)
    return saved, ckpt


def check_same_run(ckpt: Dict[str, Any], resume_path: Path) -> None:
    """Refuse a ``last.pt`` that is not the run's own: its folder's ``cfg.cfg`` (written when the run started, the
    cfg every checkpoint of the run carries) holds another cfg than the checkpoint, as when another run's last.pt
    was copied in; resumed, it would train the other model under this run's settings and results.csv."""
    recorded = resume_path.parent / "cfg.cfg"
    if not recorded.is_file() or not isinstance(ckpt.get("cfg"), str):
        return
    try:
        run_cfg = recorded.read_bytes().decode("utf-8", errors="replace")  # as written: line ends unchanged
    except OSError:
        return
    if run_cfg != ckpt["cfg"]:
        raise ConfigError(f"{resume_path}: not this run's checkpoint: it holds another model than the run's "
                          f"{recorded} (another run's last.pt copied here?); resume the run it came from, or start a "
                          f"new run with --weights {resume_path}")


def saved_options(ckpt: Dict[str, Any], resume_path: Path) -> TrainOptions:
    """The options a training checkpoint was started with; a value :class:`TrainOptions` refuses (a damaged or
    hand-edited checkpoint) is a :class:`WeightsError` naming the file, not a traceback."""
    saved = ckpt["train"].get("options") if isinstance(ckpt["train"], dict) else None
    try:
        if not isinstance(saved, dict):
            raise TypeError(f"expected a dict, got {type(saved).__name__}")
        return TrainOptions(**{k: v for k, v in saved.items() if k in TrainOptions.__dataclass_fields__})
    except (TypeError, ValueError) as exc:
        raise WeightsError(f"{resume_path}: its saved training options are not valid: {exc}") from None


def refuse_settings_on_resume(options: TrainOptions, resume_path: Path) -> None:
    """A :class:`ConfigError` naming the flags given with ``--resume`` that the resumed run would not use: it
    continues with the settings it was started with, but for :data:`RESUME_MAY_CHANGE`."""
    defaults = TrainOptions()
    flag = {f.name: declaration(f).name or f.name for f in fields(TrainOptions)}
    ignored = [flag[f.name] for f in fields(TrainOptions)
               if f.name not in RESUME_MAY_CHANGE and getattr(options, f.name) != getattr(defaults, f.name)]
    if ignored:
        *most, last = [flag[key] for key in RESUME_KEYS]
        raise ConfigError(f"--resume {resume_path} continues the run with its saved settings: {', '.join(ignored)} "
                          f"cannot change (only {', '.join(most)} and {last} can); to train with other settings "
                          f"start a new run with --weights {resume_path}")


def saved_hyp(ckpt: Dict[str, Any], options: TrainOptions) -> Hyperparameters:
    """The resumed run's hyperparameters: the saved ones, with the run length, the workers and the machine
    settings the options give."""
    hyp = Hyperparameters.from_saved(ckpt["train"].get("hyp"), f"{options.resume}: saved hyp")
    if options.epochs is not None:
        hyp.epochs = int(options.epochs)
    if options.workers is not None:
        hyp.workers = int(options.workers)
    for key in MACHINE_SETTINGS:
        if getattr(options, key) is not None:
            setattr(hyp, key, bool(getattr(options, key)))
    return hyp


def load_training_state(ckpt: Dict[str, Any], model, optimizer, scaler, ema) -> ResumeState:
    """Put the checkpoint's weights and optimizer, GradScaler (when enabled) and EMA (when given) states back;
    returns the rest as a :class:`ResumeState`."""
    state = ckpt["train"]
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if scaler.is_enabled() and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    if ema is not None:
        ema.load_state_dict(state["ema"], ckpt["model"])
    # Every checkpoint keeps the best fitness at the top (those of earlier versions also under hooks["EvalHook"],
    # the same number: the evaluation hook held it then).
    return ResumeState(epoch=_whole(state["epoch"]), epoch_step=_whole(state["epoch_step"]),
                       global_step=_whole(state["global_step"]), best_fitness=state.get("best_fitness"),
                       last_metrics=dict(state.get("metrics") or {}), rng=state["rng"],
                       epoch_sums=state.get("epoch_sums"), hooks=dict(state.get("hooks") or {}))


def _whole(value: Any) -> Any:
    """An integer counter as an ``int`` (a numpy integer too); anything else as it is, for
    :func:`check_resume_counters` to refuse."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value


def check_resume_counters(start: ResumeState, steps_per_epoch: int, resume_path: Path) -> None:
    """Refuse a checkpoint whose update counters cannot be a place in this run (a damaged or hand-edited file):
    ``epoch >= 0``, ``0 <= epoch_step <= steps_per_epoch`` (a finished epoch is saved as the next one's update 0;
    ``steps_per_epoch`` is a stop after the epoch's last update, its evaluation left to the resumed run) and
    ``global_step >= epoch_step``; each a whole number; ``best_fitness`` a number and ``epoch_sums`` absent or 4
    floats. Otherwise ``epoch_step=999`` would skip the rest of an
    epoch without a word and ``epoch=-5`` fail deep in the data order."""
    counters = {"epoch": start.epoch, "epoch_step": start.epoch_step, "global_step": start.global_step}
    for key, value in counters.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise WeightsError(f"{resume_path}: damaged training state: {key}={value!r} is not a whole number")
    ranges = {"epoch": (start.epoch >= 0, "0 or more"),
              "epoch_step": (0 <= start.epoch_step <= steps_per_epoch,
                             f"between 0 and {steps_per_epoch} (this run has {steps_per_epoch} updates an epoch)"),
              "global_step": (start.global_step >= start.epoch_step,
                              f"at least epoch_step={start.epoch_step} (the updates done in the run)")}
    for key, (valid, text) in ranges.items():
        if not valid:
            raise WeightsError(f"{resume_path}: damaged training state: {key}={counters[key]} is out of range: it "
                               f"must be {text}")
    if isinstance(start.best_fitness, bool) or not isinstance(start.best_fitness, numbers.Real):
        raise WeightsError(f"{resume_path}: damaged training state: best_fitness={start.best_fitness!r} is not a "
                           "number")
    start.best_fitness = float(start.best_fitness)
    sums = start.epoch_sums
    if sums is not None and not (isinstance(sums, torch.Tensor) and sums.is_floating_point()
                                 and tuple(sums.shape) == (4,)):
        raise WeightsError(f"{resume_path}: damaged training state: epoch_sums is not 4 numbers (the epoch's box, "
                           "obj and cls loss sums and its mini-batches)")


__all__ = ["MACHINE_SETTINGS", "RESUME_MAY_CHANGE", "ResumeState", "check_resume_counters", "check_same_run",
           "load_training_state", "read_resume_checkpoint", "refuse_settings_on_resume", "saved_hyp"]
