"""The run folder: where a run writes, its lock, the settings it records and the hooks that write into it.

``runs/train/NAME`` (:func:`run_folder`: never an earlier run's) is locked for the run's process
(:class:`RunFolderLock`), cleaned of what a kill during a save left (:func:`recover_run_folder`), and receives
``cfg.cfg``, ``hyp.yaml``, ``opt.yaml``, ``data.yaml`` and ``environment.yaml`` when the run starts (a resumed run
keeps the ones it started with, :func:`update_settings`); :func:`open_run_folder` does all of it and returns the
built-in hooks that write there.

The order of the hooks matters: the evaluation (recorded in the trainer's state) comes before ``results.csv`` and
the checkpoints are written, and the lock comes first (it is taken before anything in the folder is touched).

One training at a time in a run folder: two ``--resume`` of one run (or a resume while the run still trains)
would write the same checkpoints and ``results.csv`` over each other, and the second would delete the first's
unfinished temp files as left by a kill. :class:`RunFolderLock` holds an exclusive ``flock`` on the folder itself
(no lock file to leave behind) from the moment the folder is opened until the run ends; the system releases it
when the process dies, even by ``SIGKILL``, so a killed run can always be resumed. Where ``fcntl`` does not exist
(Windows) there is no lock. A ``flock`` belongs to the open file, which a forked process shares: the loader's
worker processes would hold the lock too, and outlive a killed run by the seconds they take to notice (a resume
right after ``kill -9`` would be refused). So a forked process closes its copy of the descriptor at once
(``os.register_at_fork``); the lock stays with the process that took it. (The ``filelock`` package locks a file
it opens for writing, not a folder: it would add a lock file to every run folder, left there after the run.)
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import yaml

from yolo.data.darknet_data import is_darknet_data
from yolo.engine.config import Hyperparameters, TrainOptions
from yolo.engine.distributed import broadcast_object
from yolo.engine.hooks import (CheckpointHook, EvalHook, Guarded, HookBase, ProgressWriter, ResultsChartWriter,
                               ResultsCSVWriter, TensorBoardWriter)
from yolo.engine.hooks.checkpointing import RESUME_KEYS
from yolo.engine.rng import software_environment
from yolo.errors import ConfigError
from yolo.files.atomic import remove_stale_temp_files
from yolo.files.yaml_files import load_yaml
from yolo.progress import use_bars
from yolo.runs import increment_path, run_name

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None

logger = logging.getLogger(__name__)


def run_folder(options: TrainOptions, resume_path: Optional[Path], main: bool) -> Path:
    """The resumed run's folder, or a new ``project/NAME`` (``NAME2``, ... when taken; the main process picks
    it and tells the others)."""
    if resume_path is not None:
        return resume_path.parent
    run_dir = str(increment_path(Path(options.project) / run_name(options.name))) if main else None
    return Path(broadcast_object(run_dir))


def open_run_folder(run_dir: Path, resumed: bool, options: TrainOptions, hyp: Hyperparameters, cfg_text: str,
                    data, dataset: Optional[Dict[str, Any]], finished: bool = False) -> Tuple[List[HookBase], Any]:
    """Lock ``run_dir``, undo what a kill left there, write (or, resumed, update) the settings files; returns the
    hooks (lock, progress, evaluation, results.csv, chart, TensorBoard, checkpoints) and the TensorBoard
    ``SummaryWriter`` (None when off). A resumed run that has ``finished`` already trains nothing, so its records
    stay as they are (``--epochs 1`` must not rewrite a 3-epoch run's opt.yaml). The checkpoints record ``dataset``
    (:func:`yolo.engine.hooks.checkpointing.dataset_record`). Main process only. On failure the lock is released."""
    lock = RunFolderLock(run_dir)  # before anything in the folder is touched
    hooks: List[HookBase] = [lock]
    try:
        recover_run_folder(run_dir)
        if not resumed:  # a resumed run keeps the settings files it started with, but for its new run length
            write_settings(run_dir, cfg_text, hyp.to_dict(), options.to_dict(), data)
        elif not finished:
            update_settings(run_dir, options.to_dict(), hyp.to_dict())
        hooks += [Guarded(ProgressWriter(use_bars(options.progress)), "progress display"),
                  EvalHook(hyp.eval_interval), ResultsCSVWriter(run_dir / "results.csv", hyp.darknet_map)]
        if hyp.plots:
            chart = ResultsChartWriter(run_dir / "results.csv", run_dir / "results.png")
            hooks.append(Guarded(chart, "results chart (results.png)"))
        writer = None
        if hyp.tensorboard:
            tensorboard = TensorBoardWriter(run_dir, hyp.tb_images)
            writer = tensorboard.writer
            hooks.append(Guarded(tensorboard, "TensorBoard writer"))
        hooks.append(CheckpointHook(dataset))
    except BaseException:
        for hook in hooks:
            hook.close()
        raise
    return hooks, writer


# The descriptors holding a run folder's lock in this process, closed in every forked child.
_HELD = set()


def _close_in_child() -> None:
    for fd in list(_HELD):
        try:
            os.close(fd)  # the child's copy only: the parent's descriptor keeps the lock
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


class RunFolderLock(HookBase):
    """Lock ``run_dir`` for this process, or raise :class:`ConfigError` when another process holds it."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.fd = None
        if fcntl is None:
            return
        fd = os.open(self.run_dir, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"{self.run_dir}: another training is running in this run folder; wait for it to "
                              "end (or stop it) before resuming it") from None
        self.fd = fd
        _HELD.add(fd)

    def close(self) -> None:
        if self.fd is not None:
            _HELD.discard(self.fd)
            os.close(self.fd)  # closing the descriptor releases the lock
            self.fd = None


def options_record(options: Dict[str, Any]) -> Dict[str, Any]:
    """What ``opt.yaml`` holds: the options, ``hyp`` as given (a path, ``inline`` for a dict, null for none)."""
    given_hyp = options.get("hyp")
    recorded = "inline" if isinstance(given_hyp, dict) else None if given_hyp is None else str(given_hyp)
    return {k: v for k, v in options.items() if k != "hyp"} | {"hyp": recorded}


def write_settings(run_dir: Path, cfg_text: str, hyp: Dict[str, Any], options: Dict[str, Any], data) -> None:
    """The cfg, the resolved hyperparameters, the options (``options["hyp"]`` as given: a path, or a dict
    written as ``inline``), the dataset YAML and the software environment."""
    (run_dir / "cfg.cfg").write_text(cfg_text, encoding="utf-8")
    write_yaml(run_dir / "hyp.yaml", hyp)
    write_yaml(run_dir / "opt.yaml", options_record(options))
    source = getattr(data, "source", None)
    if source is not None and is_darknet_data(source):  # the same dataset as a YAML, its paths absolute
        (run_dir / "data.yaml").write_text(f"# from Darknet's {source}\n" + yaml.safe_dump(_plain(
            {"path": data.root, "train": data.train, "val": data.val, "names": data.names}), sort_keys=False),
            encoding="utf-8")
    elif source is not None and Path(source).is_file():
        (run_dir / "data.yaml").write_text(Path(source).read_text(encoding="utf-8"), encoding="utf-8")
    env = software_environment()
    write_yaml(run_dir / "environment.yaml", env)
    logger.info("environment: %s (identical losses need the same versions, thread count and seed)",
                ", ".join(f"{k} {v}" for k, v in env.items()))


def update_settings(run_dir: Path, options: Dict[str, Any], hyp: Dict[str, Any]) -> None:
    """A resumed run's ``opt.yaml`` and ``hyp.yaml``: the values it changed (:data:`RESUME_KEYS`) written over the
    ones it started with, the rest kept as they were. The two files are a record (the run resumes from its
    checkpoint): one that cannot be read is rewritten from the checkpoint's values, with a warning."""
    for name, values in (("opt.yaml", options_record(options)), ("hyp.yaml", hyp)):
        path = run_dir / name
        if not path.is_file():
            continue
        saved = read_record(path)
        if saved is None:
            write_yaml(path, values)
            logger.warning("%s: not a readable settings record: rewritten from the checkpoint", path)
            continue
        changed = {k: values[k] for k in RESUME_KEYS if k in saved and k in values and saved[k] != values[k]}
        if changed:
            write_yaml(path, {**saved, **changed})
            logger.info("%s: %s (resumed with new values)", path.name,
                        ", ".join(f"{k} {saved[k]} -> {v}" for k, v in changed.items()))


def read_record(path: Path) -> Optional[Dict[str, Any]]:
    """The mapping a settings file of the run folder holds; None when it is not one (damaged, not UTF-8, not a
    mapping). An empty file is an empty mapping."""
    try:
        saved = load_yaml(path)
    except (yaml.YAMLError, UnicodeDecodeError, ValueError):
        return None
    if saved is None:
        return {}
    return saved if isinstance(saved, dict) else None


def recover_run_folder(run_dir: Path) -> None:
    """Undo what a kill during a save left behind: its temp files. (A best score without its ``best.pt`` is
    the trainer's to drop when it resumes: :class:`yolo.engine.trainer.Trainer`.)"""
    stale = remove_stale_temp_files(run_dir)
    if stale:
        logger.warning("removed %d unfinished file(s) of an interrupted save: %s", len(stale),
                       ", ".join(p.name for p in stale))


def write_yaml(path: Path, data: Dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(_plain(data), sort_keys=False), encoding="utf-8")


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars, tuples and paths turned into what ``yaml.safe_dump`` writes."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


__all__ = ["RunFolderLock", "open_run_folder", "options_record", "read_record", "recover_run_folder",
           "run_folder", "update_settings", "write_settings", "write_yaml"]
