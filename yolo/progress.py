"""When to draw progress bars.

A bar redraws itself with ``\\r`` several times a second. On a terminal that is one line that moves; in a
log file, a CI log or under ``nohup`` every redraw stays, thousands of them. So bars are drawn only when
the stream they go to is a terminal; elsewhere the tools print one line per epoch, evaluation or file.
"""
from __future__ import annotations

import sys
from typing import Optional, TextIO


def use_bars(requested: bool = True, stream: Optional[TextIO] = None) -> bool:
    """True when bars are ``requested`` (no ``--no-progress``) and ``stream`` (default stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(requested) and callable(isatty) and bool(isatty())
    except ValueError:  # a closed stream
        return False
