"""Reproducibility: seeding, the RNG states a checkpoint carries, and the software that fixes the losses.

Data order and augmentation are functions of ``(seed, epoch, index)`` (:mod:`yolo.data.loader`); what else
draws random numbers (weight initialization, Darknet's multi-scale sizes, dropout) uses the global torch,
numpy and Python generators seeded here and saved in ``last.pt``, so a resumed run continues bit for bit.
"""
from __future__ import annotations

import platform
import random
from typing import Any, Dict

import cv2
import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's global generators (torch seeds every CUDA device too)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> Dict[str, Any]:
    """The torch, numpy and Python RNG states as plain types (loadable with ``weights_only=True``)."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {"key": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "python": {"version": int(py_state[0]), "state": list(py_state[1]),
                   "gauss": py_state[2]},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def software_environment() -> Dict[str, Any]:
    """What makes two runs with the same seed give identical losses, or not, on the CPU.

    Measured: runs that agree in all of these reproduce every mini-batch loss bit for bit. A different
    CPU thread count changes the float summation order (losses differ from the second update), and
    another OpenCV version decodes and resizes the images differently (losses differ from the first).
    """
    return {"python": platform.python_version(), "torch": str(torch.__version__),
            "opencv": cv2.__version__, "numpy": np.__version__, "cpu_threads": torch.get_num_threads()}


__all__ = ["rng_state", "seed_everything", "set_rng_state", "software_environment"]
