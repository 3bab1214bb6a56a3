"""When to draw progress bars.

A bar redraws itself with ``\\r`` several times a second. On a terminal that is one line that moves; in a
log file, a CI log or under ``nohup`` every redraw stays, thousands of them. So bars are drawn only when
the stream they go to is a terminal; elsewhere the tools print one line per epoch, evaluation or file, and
while a long epoch or evaluation runs, a :class:`ProgressLines` line every :data:`LINE_SECONDS` seconds.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Callable, Optional, TextIO

# Seconds between two progress lines of one loop when no bar is drawn.
LINE_SECONDS = 30.0


def use_bars(requested: bool = True, stream: Optional[TextIO] = None) -> bool:
    """True when bars are ``requested`` (no ``--no-progress``) and ``stream`` (default stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(requested) and callable(isatty) and bool(isatty())
    except ValueError:  # a closed stream
        return False


class ProgressLines:
    """Progress without a bar: a log line (``what: 120/500 (24%), 31 s, about 98 s left``) at most every
    :data:`LINE_SECONDS` seconds, so that a log file shows a long epoch or evaluation moving; nothing from loops
    that end sooner. ``enabled=False`` (a bar is drawn) makes it silent.

    Args:
        what: names the loop (``epoch 3/60``, ``eval val``). total: steps in the loop (None: unknown).
        done: steps already done when it starts (a resumed epoch).
    """

    def __init__(self, what: str, total: Optional[int], enabled: bool, log: Optional[logging.Logger] = None,
                 done: int = 0, clock: Callable[[], float] = time.monotonic):
        self.what, self.total, self.enabled = what, total, enabled
        self.log = log or logging.getLogger(__name__)
        self.clock = clock
        self.start = self.last = clock()
        self.first = done

    def update(self, done: int, extra: str = "") -> None:
        """``done`` steps are done; log a line when :data:`LINE_SECONDS` have passed since the last one."""
        if not self.enabled:
            return
        now = self.clock()
        if now - self.last < LINE_SECONDS:
            return
        self.last = now
        elapsed = now - self.start
        text = f"{self.what}: {done}"
        if self.total:
            text += f"/{self.total} ({100.0 * done / self.total:.0f}%)"
        text += f", {elapsed:.0f} s"
        if self.total and done > self.first:
            text += f", about {elapsed / (done - self.first) * (self.total - done):.0f} s left"
        self.log.info("%s%s", text, f"; {extra}" if extra else "")
