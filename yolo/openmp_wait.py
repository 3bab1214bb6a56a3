"""How idle CPU threads wait: the OpenMP wait policy for torch's kernels, set before torch loads.

torch's CPU kernels (oneDNN's convolutions and plain torch ops alike) run on GNU OpenMP, bundled with torch. After
each parallel region GNU OpenMP's threads busy-wait for the next one (``GOMP_SPINCOUNT`` iterations, 300000 by
default; for ever with ``OMP_WAIT_POLICY=ACTIVE``; not at all with ``PASSIVE``). On idle cores that spin saves
the wake-up between a model's many small regions; on cores shared with other processes a spinning thread takes
the time its sibling needs to reach the next barrier, and each image costs several times more (yolov3-tiny beside
two CPU-bound processes on 2 cores: docs/usage.md, "CPU speed on a busy machine").

:func:`set_openmp_defaults` sets this package's choice (:data:`DEFAULTS`) as an environment default: a value the
user set wins, and it only works before torch's first import, because OpenMP reads it once, when torch loads.
``import yolo`` calls it when torch is not imported yet, and so does every tool; in a process that imported torch
first, OpenMP keeps its own defaults (the user may set the variables in the shell instead). It imports no torch.
"""
from __future__ import annotations

import os
import sys
from typing import Dict

__all__ = ["DEFAULTS", "set_openmp_defaults", "openmp_wait_text", "idle_threads_sleep"]

# Sleep at once (PASSIVE): the measured choice on 2 cores, see docs/usage.md "CPU speed on a busy machine".
DEFAULTS: Dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE"}


def set_openmp_defaults() -> bool:
    """Set :data:`DEFAULTS` where the environment does not set them already; only while torch is not imported
    (afterwards OpenMP would never read them). Returns whether they were set (False: torch was loaded first)."""
    if "torch" in sys.modules:
        return False
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    return True


def openmp_wait_text() -> str:
    """The wait settings this process's OpenMP read (for a benchmark's header), e.g. ``OMP_WAIT_POLICY=PASSIVE``."""
    names = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    given = [f"{n}={os.environ[n]}" for n in names if n in os.environ]
    return ", ".join(given) or "OpenMP's default wait (spin, then sleep)"


def idle_threads_sleep() -> bool:
    """Whether this process asks idle threads to sleep rather than spin (``OMP_WAIT_POLICY=PASSIVE``): the other
    runtimes' thread pools follow it (onnxruntime's ``allow_spinning``), so that one setting holds for all."""
    return os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"
