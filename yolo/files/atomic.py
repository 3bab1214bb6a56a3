"""Atomic writes: every file the package writes goes through :func:`atomic_path`.

The data is written to ``.NAME.PID.tmp`` beside the target and renamed onto it, so a reader (or a run resumed
after a kill) sees either the old file or the new one, never half of one. A process killed during a write leaves
its temp file behind; :func:`remove_stale_temp_files` deletes those of dead writers.
"""
from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Union

from yolo.files.write_errors import writing

PathLike = Union[str, "os.PathLike[str]"]


NAME_MAX = 255  # bytes in one file name (Linux, macOS and Windows file systems)


def temp_path(path: PathLike) -> Path:
    """Where ``path`` is written before the rename: ``.NAME.PID.tmp`` in the same folder. A legal name too long to
    take the 6 to 16 extra characters is cut and given a hash of the whole name (``.NAME-START~HASH.PID.tmp``), so
    writing it never fails with "File name too long" on a temporary name the user never gave."""
    path = Path(path)
    suffix = f".{os.getpid()}.tmp"
    name = path.name
    if len(f".{name}{suffix}".encode("utf-8", "surrogateescape")) > NAME_MAX:
        digest = hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        room = NAME_MAX - len(f".~{digest}{suffix}")
        start = name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
        name = f"{start}~{digest}"
    return path.with_name(f".{name}{suffix}")


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` in one rename.

    The parent folder is created. On an exception the temporary file is deleted and ``path`` is untouched; a
    write that failed for want of space or permission is an :class:`yolo.errors.OutputError` naming ``path``::

        with atomic_path("runs/exp/last.pt") as tmp:
            torch.save(ckpt, tmp)
    """
    path = Path(path)
    with writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with writing(path):  # a full disk or a read-only folder: one OutputError naming the path
            yield tmp
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes_atomic(path: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def remove_stale_temp_files(folder: PathLike) -> List[Path]:
    """Delete the ``.NAME.PID.tmp`` files that a process killed during a write left in ``folder``.

    Only names of that form whose PID is not this process's are removed; returns the removed paths.
    """
    removed = []
    for tmp in Path(folder).glob(".*.*.tmp"):
        pid = tmp.name[:-len(".tmp")].rsplit(".", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and tmp.is_file():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed
