"""Loader worker processes leave the stop signals to the main process.

``timeout``, Slurm, systemd, ``docker stop`` and Kubernetes send SIGTERM to the whole process group, an ssh
session that closes sends SIGHUP, and Ctrl-C sends SIGINT to the group: the loader's worker processes receive
them too. A worker that died of one makes PyTorch raise ``DataLoader worker (pid N) is killed by signal``
wherever the main process happens to be (in the backward, in the evaluation, in the save of the checkpoint),
and the run is lost. So the workers ignore these signals (:func:`ignore_stop_signals`, from their
``worker_init_fn``) and only the main process reacts (:mod:`yolo.engine.stop`): it finishes what it is doing,
saves and shuts the workers down.

A worker cannot ignore a signal before its ``worker_init_fn`` runs, so the main process starts its workers with
the stop signals blocked (:func:`stop_signals_blocked`, :class:`QuietStart`): a forked worker inherits the
blocked mask, ignores the signals, then unblocks them (one that arrived meanwhile is dropped); the main process
unblocks them once the workers are started and receives what arrived meanwhile.

Since they ignore SIGTERM, workers still running when the main process exits are ended by
:func:`end_loader_workers` (an exit handler), which multiprocessing's own handler would otherwise wait for forever.
"""
from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.util  # its exit handler is registered before ours, which therefore runs first
import signal
import threading
import time
from typing import Iterable, Iterator

# What asks a run to stop: Ctrl-C, the group's SIGTERM, a closed terminal.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_CAN_BLOCK = hasattr(signal, "pthread_sigmask")  # not on Windows (no process groups to worry about there)


def ignore_stop_signals() -> None:
    """In a loader worker: ignore :data:`STOP_SIGNALS` (the main process decides when the run stops and shuts
    the workers down), then unblock them (they were blocked while the worker started)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if _CAN_BLOCK:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextlib.contextmanager
def stop_signals_blocked():
    """Hold :data:`STOP_SIGNALS` back in the main thread while the block runs (processes forked in it inherit
    the blocked mask); they are delivered when it ends. Elsewhere than the main thread, or without
    ``pthread_sigmask``, nothing is held back."""
    if not _CAN_BLOCK or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class QuietStart:
    """``loader`` (a ``DataLoader`` whose ``worker_init_fn`` calls :func:`ignore_stop_signals`) whose iteration
    starts its worker processes with the stop signals blocked; ``len()`` is the loader's."""

    def __init__(self, loader: Iterable):
        self.loader = loader

    def __iter__(self) -> Iterator:
        with stop_signals_blocked():
            return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)


def is_worker_death(exc: BaseException) -> bool:
    """Whether ``exc`` is PyTorch's report of a loader worker that died (a kill, the OOM killer): ``DataLoader
    worker (pid N) is killed by signal: ...`` or ``... exited unexpectedly``."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("DataLoader worker")


@atexit.register
def end_loader_workers(grace_s: float = 2.0) -> None:
    """At the exit of the main process: end the daemonic child processes still running (data loader workers).
    multiprocessing's own exit handler sends them SIGTERM, which loader workers ignore, then waits for them
    forever: that is what happens when an exception (a val image that cannot be read, raised in a worker) ends a
    tool while its traceback still holds the loader that owns them. They would be ended at exit anyway: SIGTERM
    first, as multiprocessing does, and SIGKILL for those still there after ``grace_s`` seconds."""
    children = [child for child in multiprocessing.active_children() if child.daemon]
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace_s
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(10)


__all__ = ["QuietStart", "STOP_SIGNALS", "end_loader_workers", "ignore_stop_signals", "is_worker_death",
           "stop_signals_blocked"]
