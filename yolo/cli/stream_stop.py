"""A signal during video or camera detection ends it cleanly: Ctrl-C (SIGINT), SIGTERM (``timeout``, ``docker
stop``) or SIGHUP (a closed ssh session) stop the stream after the frame in progress, so that its video is
finished (playable) and ``results.json`` holds every frame done; a second Ctrl-C aborts at once."""
from __future__ import annotations

import signal
import threading
from typing import Dict, Optional

from yolo.cli.args import signal_exit_status
from yolo.data.worker_signals import STOP_SIGNALS


class StreamStop:
    """A context that turns :data:`~yolo.data.worker_signals.STOP_SIGNALS` into a request (``stop()`` is then
    True; ``signal_name`` names the signal), restored on exit. Outside the main thread it does nothing."""

    def __init__(self):
        self.signal_name: Optional[str] = None
        self._previous: Optional[Dict[int, object]] = None

    def __call__(self) -> bool:
        return self.signal_name is not None

    def __enter__(self) -> "StreamStop":
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in (self._previous or {}).items():
            signal.signal(sig, old)
        self._previous = None

    def _handle(self, signum, frame) -> None:
        if self.signal_name is not None:
            if signum == signal.SIGINT:  # a second Ctrl-C: abort now
                raise KeyboardInterrupt
            return
        self.signal_name = signal.Signals(signum).name

    @property
    def exit_status(self) -> int:
        """128 + the signal's number (as a shell reports a process killed by it); 0 when none came."""
        return signal_exit_status(self.signal_name) or 0


__all__ = ["StreamStop"]
