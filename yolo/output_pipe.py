"""Output whose reader has gone: ``detect ... | head -1`` or ``train ... 2>&1 | head -2`` close the pipe after a
few lines, and every later write raises ``BrokenPipeError``.

A short tool then ends quietly, as a Unix tool ended by SIGPIPE does (:func:`yolo.cli.resource_errors.
exit_on_closed_pipe`). A training run goes on (hours of work are not lost because a reader stopped reading):
:func:`discard_output` sends what it still writes to ``/dev/null`` and :func:`output_closed` lets it say so in
its exit status at the end.
"""
from __future__ import annotations

import logging
import os
import sys

_closed = False


def discard_output() -> None:
    """From now on standard output and error go to ``/dev/null`` (writes and the flush at exit then succeed
    instead of raising again); :func:`output_closed` is True."""
    global _closed
    _closed = True
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):  # a stream without a descriptor (one a test put there)
            pass
    os.close(devnull)


def output_closed() -> bool:
    """Whether a write met a closed pipe (:func:`discard_output` was called)."""
    return _closed


class PipeSafeHandler(logging.StreamHandler):
    """A ``StreamHandler`` that, when its stream's reader has gone, discards the output from then on
    (:func:`discard_output`) instead of printing a "Logging error" traceback for every later record."""

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], BrokenPipeError):
            discard_output()
            return
        super().handleError(record)


__all__ = ["PipeSafeHandler", "discard_output", "output_closed"]
