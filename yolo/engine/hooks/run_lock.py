"""One training at a time in a run folder: two ``--resume`` of one run (or a resume while the run still trains)
would write the same checkpoints and ``results.csv`` over each other, and the second would delete the first's
unfinished temp files as left by a kill.

:class:`RunFolderLock` holds an exclusive ``flock`` on the folder itself (no lock file to leave behind) from the
moment the folder is opened until the run ends; the system releases it when the process dies, even by
``SIGKILL``, so a killed run can always be resumed. Where ``fcntl`` does not exist (Windows) there is no lock.

A ``flock`` belongs to the open file, which a forked process shares: the loader's worker processes would hold
the lock too, and outlive a killed run by the seconds they take to notice (a resume right after ``kill -9`` would
be refused). So a forked process closes its copy of the descriptor at once (``os.register_at_fork``); the lock
stays with the process that took it.
"""
from __future__ import annotations

import os
from pathlib import Path

from yolo.engine.hooks.base import HookBase
from yolo.errors import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None


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


__all__ = ["RunFolderLock"]
