"""Atomic writes: every file the package writes goes through :func:`atomic_path`.

The data is written to ``.NAME.PID.tmp`` beside the target and renamed onto it, so a reader (or a run resumed
after a kill) sees either the old file or the new one, never half of one. A process killed during a write leaves
its temp file behind; :func:`remove_stale_temp_files` deletes those of dead writers.

Only a regular file, a symbolic link or a new path is replaced (:func:`check_replaceable`): a device such as
``/dev/null``, a FIFO, a socket or a folder at the path is refused (a rename would put a regular file in its place).
A symbolic link at the path is replaced by the file, its target left alone: a link planted where the package
writes (a dataset's label cache pointing at ``~/.bashrc``) never leads a write elsewhere. A path the user names as
an output (``--output``, ``--write``) is written through its link instead: the tool passes it through
:func:`output_target` first, which also refuses a device or a FIFO before any work is done.
"""
from __future__ import annotations

import hashlib
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Union

from yolo.files.write_errors import not_a_file_error, writing

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


def check_replaceable(path: PathLike) -> None:
    """An :class:`yolo.errors.OutputError` naming ``path`` when what is there (the link itself, not followed) is
    neither a regular file nor a symbolic link: a device such as ``/dev/null``, a FIFO, a socket, a folder."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # not there (a new path) or not reachable (the write then says why)
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise not_a_file_error(path, mode)


def output_target(path: PathLike) -> Path:
    """The file to write for an output path the user named: ``path`` itself, or where a symbolic link at ``path``
    leads (links followed to the end), so that the link stays and leads to the new file. An
    :class:`yolo.errors.OutputError` naming ``path`` when what is there is not a regular file (a device such as
    ``/dev/null``, a FIFO, a socket, a folder): the write would replace it with one, or hang on a FIFO."""
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = target.stat().st_mode
    except OSError:  # not there (a new path) or not reachable (the write then says why)
        return target
    if not stat.S_ISREG(mode):
        raise not_a_file_error(path, mode)
    return target


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` in one rename.

    The parent folder is created. On an exception the temporary file is deleted and ``path`` is untouched; a
    write that failed for want of space or permission is an :class:`yolo.errors.OutputError` naming ``path``,
    and so is a ``path`` that is there and is neither a regular file nor a link (:func:`check_replaceable`)::

        with atomic_path("runs/exp/last.pt") as tmp:
            torch.save(ckpt, tmp)
    """
    path = Path(path)
    check_replaceable(path)
    with writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with writing(path):  # a full disk or a read-only folder: one OutputError naming the path
            yield tmp
            check_replaceable(path)  # again: a FIFO made meanwhile is not replaced either
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
