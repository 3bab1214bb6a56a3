"""Stopping a run cleanly: Ctrl-C (SIGINT), SIGTERM (``timeout``, Slurm, systemd, ``docker stop``, Kubernetes),
SIGHUP (a closed terminal or ssh session) or :meth:`yolo.engine.trainer.Trainer.request_stop` ask for a stop; the
trainer ends the current update (or drops the evaluation in progress), saves ``last.pt`` there and returns. A
second Ctrl-C aborts at once (``KeyboardInterrupt``), but never in the middle of a save (:meth:`deferred`); a
repeated SIGTERM or SIGHUP (the group's and torchrun's, say) changes nothing.

The loader's worker processes ignore these signals (:mod:`yolo.data.worker_signals`): only the main process
decides. A worker that dies nonetheless (``kill -9``, the OOM killer) asks for a stop too, with one line naming
it, instead of PyTorch's ``RuntimeError`` raised wherever the main process happened to be.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from typing import Callable, Dict, Optional

from torch.utils.data._utils import signal_handling as torch_worker_signals

from yolo.data.worker_signals import STOP_SIGNALS, is_worker_death

logger = logging.getLogger(__name__)


class StopRequest:
    """Whether a stop was asked for and by what, and the signal handlers that ask (installed from the building
    of the parts to the end of the run, on the main thread only).

    ``signal_name`` is the first of these signals received (``"SIGTERM"``, ...; None: none was), also when it
    came after a stop asked otherwise; ``worker_failure`` the line saying which loader worker died (None: none
    did)."""

    def __init__(self, announce: Optional[bool] = None):
        self.requested = False
        self.signal_name: Optional[str] = None
        self.worker_failure: Optional[str] = None
        # only the main process says it (torchrun's RANK; the parts may not be built yet)
        self.announce = int(os.environ.get("RANK", "0")) == 0 if announce is None else announce
        self._previous: Optional[Dict[int, object]] = None
        self._torch_child_handler: Optional[Callable] = None
        self._saving = False  # inside deferred(): a second Ctrl-C waits for its end
        self._abort_after_save = False

    def install(self) -> None:
        if self._previous is not None or threading.current_thread() is not threading.main_thread():
            return
        self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        if hasattr(signal, "SIGCHLD"):
            # PyTorch's report of dead loader workers (it raises in whatever the main process is doing), set now
            # rather than by the first loader, so that it is wrapped by _child_exited from the start.
            torch_worker_signals._set_SIGCHLD_handler()
            handler = signal.getsignal(signal.SIGCHLD)
            if callable(handler):
                self._torch_child_handler = handler
                self._previous[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, self._child_exited)

    def restore(self) -> None:
        if self._previous:
            for sig, old in self._previous.items():
                signal.signal(sig, old)
        self._previous = None
        self._torch_child_handler = None

    def ask(self, reason: str) -> None:
        """Ask for a stop (once); ``reason`` is said when this process announces."""
        if self.requested:
            return
        self.requested = True
        if self.announce:
            logger.warning("\n%s: stopping after the current update and saving last.pt (press Ctrl-C again to "
                           "abort without saving)", reason)

    def worker_died(self, message: str) -> None:
        """A loader worker died (PyTorch's ``message`` names its pid and signal): stop, saving what completed."""
        if self.worker_failure is None:
            self.worker_failure = (f"a data loader worker died ({' '.join(message.split()).rstrip('.')}; "
                                   "out of memory?)")
            self.ask(self.worker_failure)

    @contextlib.contextmanager
    def deferred(self):
        """A block a second Ctrl-C must not cut (a checkpoint save): the abort waits for its end."""
        self._saving = True
        try:
            yield
        finally:
            self._saving = False
        if self._abort_after_save:
            raise KeyboardInterrupt

    def _handle(self, signum, frame) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
        if self.requested:
            if signum == signal.SIGINT:  # a second Ctrl-C: abort now (after a save in progress)
                if self._saving:
                    self._abort_after_save = True
                    return
                raise KeyboardInterrupt
            return  # a repeated SIGTERM or SIGHUP: the stop is under way
        self.ask(f"{self.signal_name} received")

    def _child_exited(self, signum, frame) -> None:
        try:
            self._torch_child_handler(signum, frame)
        except RuntimeError as exc:
            if not is_worker_death(exc):
                raise
            self.worker_died(str(exc))


__all__ = ["StopRequest"]
