"""What a run folder holds besides checkpoints and logs: the exact settings, and recovery after a kill.

``runs/train/NAME`` receives ``cfg.cfg``, ``hyp.yaml``, ``opt.yaml``, ``data.yaml`` and ``environment.yaml``
when the run starts (a resumed run keeps the ones it started with).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import yaml

from yolo.data.darknet_data import is_darknet_data
from yolo.engine.rng import software_environment
from yolo.files.atomic import remove_stale_temp_files
from yolo.files.yaml_files import load_yaml

logger = logging.getLogger(__name__)


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


# What a resumed run may change (tools/train.py --resume ... --epochs N, --device, --workers, --tf32, --compile,
# --cache-images).
RESUME_KEYS = ("epochs", "device", "workers", "tf32", "compile", "cache_images")


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


__all__ = ["RESUME_KEYS", "options_record", "read_record", "recover_run_folder", "update_settings", "write_settings", "write_yaml"]
