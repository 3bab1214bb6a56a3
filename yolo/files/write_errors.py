"""Why a write failed, in words: every file the package writes reports a full disk, a read-only file system or
a missing permission as one :class:`yolo.errors.OutputError` naming the path, never as a success.

``torch.save`` and ``cv2.imwrite`` do not say why they failed (a ``RuntimeError`` about a position in a zip
archive, or ``False``), so the file system is asked (:func:`disk_problem`) while the failed file still holds
its blocks.
"""
from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Union

from yolo.errors import OutputError
from yolo.files.paths import file_kind

PathLike = Union[str, "os.PathLike[str]"]

# Less free space than this after a failed write with no reason given is taken as a full disk.
NEARLY_FULL_BYTES = 1 << 20

_REASONS = {
    errno.ENOSPC: "the disk is full: free some space",
    errno.EDQUOT: "the disk quota is used up: free some space",
    errno.EROFS: "the file system is read-only: choose a writable folder",
    errno.EACCES: "permission denied: choose a folder you can write to",
    errno.EPERM: "permission denied: choose a folder you can write to",
}


def _existing_folder(path: Path) -> Optional[Path]:
    """``path`` or its nearest existing parent (a folder that is to be created is not there yet)."""
    for folder in (path, *path.parents):
        if folder.exists():
            return folder
    return None


def disk_problem(path: PathLike) -> Optional[str]:
    """What stops writes at ``path`` (a file or folder, existing or to be created): a read-only file system
    or a full disk (less than :data:`NEARLY_FULL_BYTES` free), in words; None when neither."""
    folder = _existing_folder(Path(os.path.abspath(path)))
    try:
        stats = os.statvfs(folder) if folder is not None else None
    except OSError:
        return None
    if stats is None:
        return None
    if stats.f_flag & os.ST_RDONLY:
        return _REASONS[errno.EROFS]
    if getattr(stats, "f_blocks", None) == 0:  # /proc, /sys: no blocks at all, so "full" says nothing
        return None
    if stats.f_bavail * stats.f_frsize < NEARLY_FULL_BYTES:
        return f"the disk is full ({stats.f_bavail * stats.f_frsize:,} bytes free): free some space"
    return None


def output_error(path: PathLike, exc: Optional[BaseException] = None) -> Optional[OutputError]:
    """The :class:`OutputError` for a failed write of ``path`` (``exc``: what the writer raised, or None when
    it only returned a failure), or None when the cause is not the file system (a bug to raise as it is)."""
    code = getattr(exc, "errno", None)
    reason = _REASONS.get(code) if code is not None else None
    if reason is None and isinstance(exc, OSError) and exc.strerror:  # the OS said why: not for want of space
        reason = exc.strerror[0].lower() + exc.strerror[1:]
    if reason is None:  # no reason given (torch.save's RuntimeError, cv2.imwrite's False): ask the file system
        reason = disk_problem(path)
    if reason is None and exc is not None:
        return None
    error = OutputError(f"{path}: cannot write: {reason or 'the writer reported a failure'}")
    error.path = str(path)  # (not OSError's filename and errno: they would change the message)
    return error


@contextmanager
def writing(path: PathLike) -> Iterator[None]:
    """Turn a failed write of ``path`` in the ``with`` block into an :class:`OutputError` (others pass)."""
    try:
        yield
    except OutputError:
        raise
    except (OSError, RuntimeError) as exc:
        error = output_error(path, exc)
        if error is None:
            raise
        raise error from None


def as_output_error(exc: OSError) -> Optional[OutputError]:
    """``exc`` as an :class:`OutputError` when it is a failed write (a full disk, a read-only file system)
    that names its file; None for anything else (a missing permission may be a read)."""
    if isinstance(exc, OutputError):
        return exc
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) and exc.filename:
        return output_error(exc.filename, exc)
    return None


def not_a_file_error(path: PathLike, mode: int) -> OutputError:
    """The :class:`OutputError` for an output ``path`` that is there and is not a regular file (``mode``: its
    ``st_mode``): writing it would replace a device, a FIFO or a folder with a file."""
    error = OutputError(f"{path}: cannot write: it is {file_kind(mode)}, not a regular file; give the path of a file (new, or "
                        "one to replace)")
    error.path = str(path)
    return error


def check_written(ok: bool, path: PathLike) -> None:
    """Raise the :class:`OutputError` for ``path`` when a writer that returns a flag (``cv2.imwrite``) failed."""
    if not ok:
        raise output_error(path)


__all__ = ["as_output_error", "check_written", "disk_problem", "not_a_file_error", "output_error", "writing"]
