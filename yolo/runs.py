"""Run folders (``runs/train/exp``, ``exp2``, ...) that never overwrite an earlier run, and stay inside the folder
chosen for them (a ``--name`` is one folder name, not a path)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from yolo.errors import ConfigError, shown
from yolo.files.write_errors import writing


def run_name(name: str) -> str:
    """``name`` when it is one plain folder name; a :class:`yolo.errors.ConfigError` for a path (``a/b``,
    ``../elsewhere``), ``.``, ``..``, an empty name or one with control characters, which would put the run
    outside its parent folder or drive the terminal when echoed."""
    name = str(name)
    separators = [sep for sep in (os.sep, os.altsep, "/") if sep]
    if name in ("", ".", "..") or any(sep in name for sep in separators) or not name.isprintable():
        raise ConfigError(f"--name '{shown(name)}': a run name must be one folder name (no path separator, "
                          "not . or .., no control character); choose the parent folder with its own flag")
    return name


def increment_path(base: Path, mkdir: bool = True) -> Path:
    """A run folder that never overwrites an earlier run: ``runs/detect/exp``, then ``exp2``, ``exp3``, ...

    The first free name is taken after the highest existing number, so a deleted ``exp2`` is not reused
    while ``exp3`` exists. With ``mkdir`` the folder is created (atomically: a name another process took
    first is skipped).
    """
    base = Path(base)
    parent, stem = base.parent, base.name
    pattern = re.compile(rf"^{re.escape(stem)}(\d*)$")
    taken = [1 if m.group(1) == "" else int(m.group(1))
             for m in (pattern.match(p.name) for p in (parent.iterdir() if parent.is_dir() else [])) if m]
    number = max(taken, default=0) + 1
    while True:
        path = parent / (stem if number == 1 else f"{stem}{number}")
        if not mkdir:
            if not path.exists():
                return path
        else:
            with writing(path):  # a read-only or full disk: one OutputError naming the folder
                try:
                    path.mkdir(parents=True, exist_ok=False)
                    return path
                except FileExistsError:
                    pass
        number += 1


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` when it exists and holds nothing (a run stopped before it wrote anything)."""
    folder = Path(folder)
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
