"""The installed ``yolo-NAME`` commands, and the help of ``tools/NAME.py``: ``--help`` is answered from the tool's
parser module (:mod:`yolo.cli.flags`, which loads neither torch nor OpenCV) before the tool's own module, which
imports torch, is loaded: help in a fraction of a second instead of the seconds those imports take.

``setup.py`` points each ``yolo-NAME`` console script at the function of that name here; ``tools/_launch.py``
calls :func:`answer_help` for ``tools/NAME.py``. Importing this module imports :mod:`yolo.cli` first, which sets
the OpenMP wait policy before torch loads.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Callable, Sequence

COMMANDS = ("anchors", "benchmark", "convert", "convert_dataset", "demo", "detect", "eval", "export", "train",
            "tune")


def answer_help(tool: str, argv: Sequence[str]) -> None:
    """With ``-h``/``--help`` in ``argv``, print the help of ``tool`` from ``yolo.cli.flags.<tool>`` and exit (or
    exit with a one-line error for a bad flag before it). Returns when there is no help to give: no such flag
    (or ``--help`` after ``--``: a value, not a flag), or a tool without a parser module."""
    if {"-h", "--help"} & set(argv) and importlib.util.find_spec(f"yolo.cli.flags.{tool}") is not None:
        importlib.import_module(f"yolo.cli.flags.{tool}").parse_args(list(argv))


def command(tool: str) -> Callable[[], None]:
    """The console script ``yolo-<tool>``: help at once, else ``yolo.cli.<tool>.cli()``."""
    def run() -> None:
        answer_help(tool, sys.argv[1:])
        importlib.import_module(f"yolo.cli.{tool}").cli()
    run.__name__ = run.__qualname__ = tool
    run.__doc__ = f"``yolo-{tool.replace('_', '-')}``: :func:`yolo.cli.{tool}.cli`, with ``--help`` answered first."
    return run


anchors = command("anchors")
benchmark = command("benchmark")
convert = command("convert")
convert_dataset = command("convert_dataset")
demo = command("demo")
detect = command("detect")
eval = command("eval")  # noqa: A001  (the yolo-eval command; the builtin is not used here)
export = command("export")
train = command("train")
tune = command("tune")

__all__ = ["COMMANDS", "answer_help", "command", *COMMANDS]
