"""Exported files run as models: ONNX (onnxruntime), TorchScript (``torch.jit``) and OpenVINO IR (OpenVINO).

:func:`load_runnable` is what the Detector, ``tools/eval.py`` and ``tools/benchmark.py`` load weights with: a Darknet
``.weights`` (with its cfg) or a ``.pt`` checkpoint gives the PyTorch model (:func:`yolo.models.model.load_model`);
an exported file gives an :class:`~yolo.backends.exported_model.ExportedModel`, which returns the same eval output
from the file's own runtime, so pre- and post-processing are the PyTorch model's.

Modules: :mod:`~yolo.backends.base` (the :class:`Backend` interface, metadata checks, missing-runtime errors), one
per runtime (:mod:`~yolo.backends.onnx_runtime`, :mod:`~yolo.backends.torchscript_runtime`,
:mod:`~yolo.backends.openvino_runtime`), :mod:`~yolo.backends.exported_model`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

import torch

from yolo.backends.base import Backend, install_hint
from yolo.backends.exported_model import ExportedModel
from yolo.backends.onnx_runtime import OnnxRuntimeBackend
from yolo.backends.openvino_runtime import OpenVinoBackend
from yolo.backends.torchscript_runtime import TorchScriptBackend
from yolo.models.model import load_model

PathLike = Union[str, Path]

# suffix -> (what the file is, the backend that runs it)
EXPORT_SUFFIXES = {".onnx": ("an ONNX export", OnnxRuntimeBackend),
                   ".torchscript": ("a TorchScript export", TorchScriptBackend),
                   ".xml": ("an OpenVINO IR", OpenVinoBackend)}


def is_export(weights: Optional[PathLike]) -> bool:
    """Whether ``weights`` names an exported file (by its suffix) rather than Darknet weights or a checkpoint."""
    return weights is not None and Path(weights).suffix.lower() in EXPORT_SUFFIXES


def open_backend(path: PathLike, threads: Optional[int] = None) -> Backend:
    """The :class:`Backend` for the exported file ``path`` (``threads``: the runtime's threads, default
    ``torch.get_num_threads()``, so that a tool's ``--threads`` holds for every runtime alike)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: weights not found")
    _, backend = EXPORT_SUFFIXES[path.suffix.lower()]
    if backend is TorchScriptBackend:
        return backend(path)
    return backend(path, threads or torch.get_num_threads())


def load_runnable(cfg: Optional[PathLike], weights: Optional[PathLike],
                  device: Union[str, torch.device, None] = None, threads: Optional[int] = None):
    """The model ``weights`` gives: an :class:`ExportedModel` for an exported file (it carries its cfg, so
    ``cfg`` must be None; it runs on the CPU whatever ``device``), else :func:`load_model`'s Darknet on ``device``."""
    if not is_export(weights):
        return load_model(cfg, weights, device=device)
    if cfg is not None:
        what, _ = EXPORT_SUFFIXES[Path(weights).suffix.lower()]
        raise ValueError(f"{weights}: {what} carries its own cfg: give it without a cfg")
    return ExportedModel(open_backend(weights, threads))


__all__ = ["Backend", "ExportedModel", "EXPORT_SUFFIXES", "install_hint", "is_export", "load_runnable",
           "open_backend"]
