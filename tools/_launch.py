"""Imported first by every ``tools/*.py`` script: makes the repository importable from a clone without
installing it, and lets OpenMP threads wait passively (spinning threads fight onnxruntime's and OpenCV's in
the benchmarks, and anything else on a busy machine). Both must happen before torch is imported; an explicit
``OMP_WAIT_POLICY`` wins."""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
