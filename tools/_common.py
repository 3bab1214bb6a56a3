"""Helpers shared by the command-line tools."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from yolo.runs import increment_path  # noqa: F401  (re-exported for the tools)


def setup_logging(verbose: bool = False) -> None:
    """Plain ``logging`` to stderr: INFO by default, DEBUG with ``verbose``."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(message)s", stream=sys.stderr)


def fail(message: str, code: int = 2) -> "NoReturn":  # noqa: F821
    """Print a one-line error to stderr and exit with a non-zero status."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)
