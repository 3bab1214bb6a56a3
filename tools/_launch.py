"""Imported first by every ``tools/*.py`` script: makes the repository importable from a clone without
installing it, and answers ``--help`` from the tool's parser module (:mod:`yolo.cli.flags`), which loads
neither torch nor OpenCV: help in a fraction of a second instead of the seconds those imports take. It imports
:mod:`yolo.cli` before anything loads torch: that sets the OpenMP wait policy (for the installed ``yolo-NAME``
commands too, which import it first as well)."""
import importlib
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
import yolo.cli  # noqa: E402,F401  (the OpenMP wait policy, before any tool imports torch)

_TOOL = Path(sys.argv[0]).stem
if {"-h", "--help"} & set(sys.argv[1:]) and importlib.util.find_spec(f"yolo.cli.flags.{_TOOL}") is not None:
    # prints the help and exits (or a one-line error for a bad flag before it); returns only when "--help"
    # was not a flag after all (a value after "--"), and the tool then parses as usual
    importlib.import_module(f"yolo.cli.flags.{_TOOL}").parse_args(sys.argv[1:])
