"""Imported first by every ``tools/*.py`` script: makes the repository importable from a clone without
installing it, and answers ``--help`` from the tool's parser module (:mod:`yolo.cli.flags`), which loads
neither torch nor OpenCV: help in a fraction of a second instead of the seconds those imports take
(:func:`yolo.cli.launch.answer_help`, which the installed ``yolo-NAME`` commands call too). It imports
:mod:`yolo.cli` before anything loads torch: that sets the OpenMP wait policy."""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from yolo.cli.launch import answer_help  # noqa: E402  (imports yolo.cli first: the OpenMP wait policy)

# prints the help and exits (or a one-line error for a bad flag before it); returns when "--help" was not a flag
# after all (a value after "--"), and the tool then parses as usual
answer_help(Path(sys.argv[0]).stem, sys.argv[1:])
