"""Checkpoints: what a training checkpoint holds, when it is written, and how a run resumes from it.

**Writing.** ``best.pt`` then ``last.pt`` after every epoch, ``last.pt`` when a stop is requested mid-epoch
(after an epoch's last update or during its evaluation: ``epoch_step`` is then the epoch's update count, and a
resumed run evaluates the epoch first): :class:`CheckpointHook`. A training checkpoint holds what a resumed run
needs to continue bit for bit (:func:`training_checkpoint`): the training weights, the EMA weights (saved as the
model), optimizer, GradScaler, update counters, the position in the epoch with the epoch's loss sums so far, the
best fitness and the last evaluation's metrics (the saved part of :class:`yolo.engine.train_state.TrainState`),
the torch / numpy / Python RNG states (:mod:`yolo.engine.rng`), the hooks' states (``hooks``:
:meth:`yolo.engine.hooks.base.HookBase.state_dict` by ``state_key``) and what the run's dataset was
(``dataset``: :func:`dataset_record`, made once when the run is built).

**Resuming** from a run's ``last.pt`` (:func:`read_resume_checkpoint`): the saved options, with what a resumed
run may change (:data:`RESUME_MAY_CHANGE`), the saved hyperparameters (:func:`saved_hyp`), and the training
state put back into the built parts and the trainer's counters (:func:`load_training_state`,
:class:`ResumeState`), after checking that the counters are a place in the run (:func:`check_resume_counters`).

**The dataset record.** A run resumed after the dataset changed (class names reordered or renamed, images added
or removed) would go on silently with other classes or another data order, and its ``last.pt`` would carry names
its run folder's ``data.yaml`` does not. The record is the class names and, per split, the count and a hash of
the usable images' paths (:func:`split_record`). Resume compares it with the dataset as it is now and refuses a
change, saying what changed (:func:`check_same_dataset`).
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import numbers
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from yolo.engine.config import Hyperparameters, TrainOptions
from yolo.engine.hooks.base import HookBase
from yolo.engine.rng import rng_state
from yolo.errors import ConfigError, WeightsError
from yolo.files.names import names_difference
from yolo.models.checkpoint import load_checkpoint_file, model_checkpoint, save_checkpoint
from yolo.models.preprocessing import training_preprocessing
from yolo.settings.declare import declaration

logger = logging.getLogger(__name__)



class CheckpointHook(HookBase):
    """Saves after each epoch (``best.pt`` when ``trainer.state.is_best``) and at a requested stop, with
    ``dataset``, the run's dataset record, in each checkpoint (None: none)."""

    def __init__(self, dataset: Optional[Dict[str, Any]] = None):
        self.dataset = dataset

    def after_epoch(self, trainer) -> None:
        save(trainer, best=trainer.state.is_best, dataset=self.dataset)

    def after_interrupt(self, trainer) -> None:
        save(trainer, best=False, dataset=self.dataset)
        last = trainer.parts.run_dir / "last.pt"
        state, steps = trainer.state, trainer.parts.plan.steps_per_epoch
        # how to continue is said once, by the caller (tools/train.py names the command the user ran)
        pending = " (its evaluation is left to the resumed run)" if state.epoch_step == steps else ""
        logger.warning("stopped at epoch %d, update %d/%d%s; saved %s", state.epoch + 1, state.epoch_step, steps,
                       pending, last)


def save(trainer, best: bool, dataset: Optional[Dict[str, Any]] = None) -> None:
    """Write ``best.pt`` (when ``best``) and then ``last.pt``, each atomically.

    The order makes a kill at any point recoverable: ``last.pt`` records the best score, so it must
    never reach the disk before the ``best.pt`` holding that score. A kill between the two leaves the
    previous ``last.pt``; resuming from it repeats the epoch and writes both again. A second Ctrl-C waits for the
    end of the saves (:meth:`yolo.engine.stop.StopRequest.deferred`).
    """
    stop = getattr(trainer, "stop_request", None)
    with stop.deferred() if stop is not None else contextlib.nullcontext():
        ckpt = training_checkpoint(trainer, dataset)
        if best:
            save_checkpoint(ckpt, trainer.parts.run_dir / "best.pt")
        save_checkpoint(ckpt, trainer.parts.run_dir / "last.pt")


def training_checkpoint(trainer, dataset: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The checkpoint dict: the evaluated model (EMA when on) with ``train`` holding the training state
    (``dataset``: the run's dataset record, when known)."""
    t, state, step = trainer.parts, trainer.state, trainer.step_runner
    train_state = {
        "model": {k: v.detach().cpu().contiguous() for k, v in t.model.state_dict().items()},  # NCHW on disk
        "optimizer": t.optimizer.state_dict(),
        "scaler": t.scaler.state_dict() if t.precision.amp else None,
        "ema": t.ema.state_dict() if t.ema is not None else None,
        "epoch": state.epoch,
        "epoch_step": state.epoch_step,
        "global_step": state.global_step,
        "best_fitness": state.best_fitness,
        "metrics": state.metrics,
        "hooks": trainer.hooks_state(),
        "rng": rng_state(),
        # float64 (box, obj, cls, mini-batches) of the epoch so far; .cpu() syncs, once per save
        "epoch_sums": step.loss_sums.to("cpu", copy=True) if state.epoch_step else None,
        "options": t.options.to_dict() | {"hyp": None},
        "hyp": t.hyp.to_dict(),
        "dataset": dataset,
    }
    preprocessing = training_preprocessing(t.hyp.augment, tuple(t.plan.img_size), t.options.decode or "opencv")
    return model_checkpoint(step.eval_model(), names=t.data.names, train=train_state, epoch=state.epoch,
                            metrics=state.metrics, preprocessing=preprocessing)


# ---------------------------------------------------------------- resuming

# What a resumed run may change (tools/train.py --resume ... --epochs N, --device, --workers, --tf32, --compile,
# --cache-images); its opt.yaml and hyp.yaml record the new values (yolo.engine.run_folder.update_settings).
RESUME_KEYS = ("epochs", "device", "workers", "tf32", "compile", "cache_images")

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


# ---------------------------------------------------------------- the dataset record
def split_record(dataset) -> Dict[str, Any]:
    """``{"images": N, "digest": hex}`` of a split's usable images (``dataset.records`` paths, in order, relative
    to the folder of the split's folder, list file or COCO JSON: a run resumed from another working directory, or
    with the dataset moved along with its config, still matches)."""
    root = Path(dataset.source).resolve().parent
    digest = hashlib.sha256()
    for record in dataset.records:
        path = Path(record.path)
        relative = os.path.relpath(path, root) if path.is_absolute() else str(path)
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\n")
    return {"images": len(dataset.records), "digest": digest.hexdigest()}


def dataset_record(data, train_set, val_set) -> Dict[str, Any]:
    """What a checkpoint keeps of the run's dataset: ``{"names": [...], "train": split_record, "val": ...}``
    (``val`` None where this process has no val set)."""
    return {"names": list(data.names), "train": split_record(train_set),
            "val": split_record(val_set) if val_set is not None else None}


def _split_change(split: str, saved: Optional[Dict[str, Any]], now: Optional[Dict[str, Any]]) -> Optional[str]:
    if not isinstance(saved, dict) or now is None or saved == now:
        return None
    if saved.get("images") != now["images"]:
        difference = now["images"] - int(saved.get("images") or 0)
        how = f"{difference} added" if difference > 0 else f"{-difference} removed"
        return f"the {split} split has {now['images']} usable images, {saved.get('images')} at the start ({how})"
    return f"the {split} split holds other images than at the start (the same count, {now['images']})"


def check_same_dataset(saved: Optional[Dict[str, Any]], saved_names: Optional[Sequence[str]],
                       now: Dict[str, Any], source: Optional[str], resume_path: Path) -> None:
    """Refuse to resume on a dataset that is not the one the checkpoint ``resume_path`` recorded (``saved``:
    its ``train["dataset"]``, None in a checkpoint written before it was recorded; ``saved_names``: its
    ``names``), with a :class:`ConfigError` that says what changed. ``now`` is the dataset as it is
    (:func:`dataset_record`), ``source`` its config file (None: unnamed)."""
    changes: List[str] = []
    names = saved.get("names") if isinstance(saved, dict) else saved_names
    if isinstance(names, (list, tuple)):
        change = names_difference(list(names), now["names"])
        if change:
            changes.append(change)
    if isinstance(saved, dict):
        for split in ("train", "val"):
            change = _split_change(split, saved.get(split), now[split])
            if change:
                changes.append(change)
    if changes:
        raise ConfigError(f"--resume {resume_path}: {source or 'the dataset'} is not the dataset the run started with: "
                          f"{'; '.join(changes)}; resume with the dataset as it was, or start a new run with "
                          f"--weights {resume_path}")


__all__ = ["CheckpointHook", "MACHINE_SETTINGS", "RESUME_KEYS", "RESUME_MAY_CHANGE", "ResumeState", "check_resume_counters",
           "check_same_dataset", "check_same_run", "dataset_record", "load_training_state", "read_resume_checkpoint",
           "refuse_settings_on_resume", "save", "saved_hyp", "split_record", "training_checkpoint"]
