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
:func:`end_leftover_workers` (an exit handler), which multiprocessing's own handler would otherwise wait for forever.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util  # its exit function first, so that ours (registered after it) runs before it
import signal
import threading
from atexit import register as at_exit  # (not named register: that is the layer-type decorator)
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


def end_leftover_workers() -> None:
    """Kill (SIGKILL) the daemonic child processes still alive (PyTorch's loader workers are), and wait for them.

    Registered to run when the interpreter exits: a tool that ends with an error in the middle of a loop over a
    loader (a worker out of memory, a bad image) leaves its workers waiting for work, and ``multiprocessing``'s
    own exit function would stop them with SIGTERM, which they ignore, then wait for them forever. That function
    ends every daemonic child anyway (a daemonic process cannot outlive its parent); this one only does it
    firmly, before it."""
    leftover = [p for p in multiprocessing.active_children() if p.daemon and p.is_alive()]
    if leftover and hasattr(signal, "SIGCHLD") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # PyTorch's handler would report these deaths as errors
    for process in leftover:
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


at_exit(end_leftover_workers)


def original_message(exc: BaseException) -> str:
    """The message of the exception a loader worker raised, without PyTorch's wrapping: PyTorch re-raises it in
    the main process as ``Caught DataError in DataLoader worker process 0.`` followed by the worker's whole
    traceback, whose last lines are the original ``yolo.errors.DataError: <file>: <problem>``. Any other
    exception: its message as it is. (A :class:`yolo.errors.DataError` keeps its whole text in ``problem``; its
    message is cut at :data:`yolo.errors.MAX_MESSAGE` characters, before the file name.)"""
    problem = getattr(exc, "problem", None)
    text = problem if isinstance(problem, str) and problem.startswith("Caught ") else str(exc)
    if not text.startswith("Caught ") or "Original Traceback" not in text:
        return text
    lines = text.rstrip().splitlines()
    last_frame = max((i for i, line in enumerate(lines) if line.startswith(" ")), default=len(lines) - 1)
    message = "\n".join(lines[last_frame + 1:]) or lines[-1]
    name, sep, rest = message.partition(": ")
    return rest if sep and name.replace(".", "").replace("_", "").isalnum() else message


def is_worker_death(exc: BaseException) -> bool:
    """Whether ``exc`` is PyTorch's report of a loader worker that died (a kill, the OOM killer): ``DataLoader
    worker (pid N) is killed by signal: ...`` or ``... exited unexpectedly``."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("DataLoader worker")


__all__ = ["QuietStart", "STOP_SIGNALS", "end_leftover_workers", "ignore_stop_signals", "is_worker_death",
           "original_message", "stop_signals_blocked"]
