"""What the tools' parsers share beyond :mod:`yolo.cli.args`: hidden aliases for renamed flags."""
from __future__ import annotations

import argparse

from yolo.cli.args import ToolParser


def hidden_alias(parser: ToolParser, old: str, dest: str, **kwargs) -> None:
    """Accept ``old``, a flag's former spelling, as the flag that stores into ``dest``, without listing it in
    ``--help``. ``kwargs`` are the flag's own (``type``, ``nargs``, ...); it has no default of its own, so the
    new flag's default stands."""
    parser.add_argument(old, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)
