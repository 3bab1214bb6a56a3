"""What a training checkpoint remembers of its dataset, so that a resumed run trains on the data it started with.

A run resumed after the dataset changed (class names reordered or renamed, images added or removed) would go on
silently with other classes or another data order, and its ``last.pt`` would carry names its run folder's
``data.yaml`` does not. The record is the class names and, per split, the count and a hash of the usable images'
paths (:func:`split_record`). Resume compares it with the dataset as it is now and refuses a change, saying what
changed.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from yolo.errors import ConfigError
from yolo.files.names import names_difference


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


__all__ = ["check_same_dataset", "dataset_record", "split_record"]
