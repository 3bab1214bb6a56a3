"""The type check of a path given from Python (a setting, a ``load_model`` argument), and what kind of file a
path is when it is not a regular file: one message everywhere."""
from __future__ import annotations

import os
import stat
from typing import Any, Optional

__all__ = ["check_path", "file_kind", "special_file"]

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a ``st_mode`` that is not a regular file's is, in words (``a FIFO (named pipe)``)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def special_file(path: Any) -> Optional[str]:
    """``"it is a FIFO (named pipe), not a regular file"`` (or a device, a socket, a folder) when ``path`` is
    there (links followed) and is not a regular file; None otherwise. An input read whole must be a regular file:
    a FIFO would block the read until a writer comes, ``/dev/zero`` would never end."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) else f"it is {file_kind(mode)}, not a regular file"


def check_path(name: str, value: Any, optional: bool = True) -> None:
    """A file or folder argument ``name``: a ``str`` or an ``os.PathLike`` (``None`` too where ``optional``);
    anything else is a ``TypeError`` naming it."""
    if value is None and optional:
        return
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type(value).__name__} {value!r}")
