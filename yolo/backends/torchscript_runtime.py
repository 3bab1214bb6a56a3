"""A TorchScript export run by ``torch.jit.load`` on the CPU."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import torch

from yolo.backends.base import Backend
from yolo.errors import WeightsError


class TorchScriptBackend(Backend):
    """``path`` (a ``.torchscript`` file of :func:`yolo.export.torchscript.export_torchscript`, its metadata in
    the extra file ``meta.json``) loaded with ``torch.jit.load``. A float16 file gets its input as float16."""

    runtime = "torch.jit"

    def __init__(self, path: Path):
        extra = {"meta.json": ""}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra).eval()
        except Exception as exc:  # torch raises RuntimeError/ValueError for a file that is not TorchScript
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise WeightsError(f"{path}: not a TorchScript model torch.jit can load ({first})") from None
        try:
            meta = json.loads(extra["meta.json"] or "{}")
        except ValueError:
            raise WeightsError(f"{path}: its meta.json is not JSON") from None
        params = list(self.module.parameters())
        self.dtype = torch.float16 if params and params[0].dtype == torch.float16 else torch.float32
        super().__init__(path, meta if isinstance(meta, dict) else {})

    def run(self, batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return self.module(torch.from_numpy(batch).to(self.dtype)).float().numpy()
