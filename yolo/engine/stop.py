"""Stopping a run cleanly: ``Ctrl-C`` (SIGINT), SIGTERM or :meth:`yolo.engine.trainer.Trainer.request_stop` ask
for a stop; the trainer ends the current update, saves ``last.pt`` there and returns. A second signal aborts at
once (``KeyboardInterrupt``)."""
from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Dict, Optional

logger = logging.getLogger(__name__)


class StopRequest:
    """Whether a stop was asked for, and the signal handlers that ask (installed from the building of the parts
    to the end of the run, on the main thread only)."""

    def __init__(self, announce: Optional[bool] = None):
        self.requested = False
        # only the main process says it (torchrun's RANK; the parts may not be built yet)
        self.announce = int(os.environ.get("RANK", "0")) == 0 if announce is None else announce
        self._previous: Optional[Dict[int, object]] = None

    def install(self) -> None:
        if self._previous is not None or threading.current_thread() is not threading.main_thread():
            return
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore(self) -> None:
        if self._previous:
            for sig, old in self._previous.items():
                signal.signal(sig, old)
        self._previous = None

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.announce:
            logger.warning("\n%s received: stopping after the current update and saving last.pt "
                           "(press Ctrl-C again to abort without saving)", signal.Signals(signum).name)


__all__ = ["StopRequest"]
