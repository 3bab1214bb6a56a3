"""What every runtime backend shares: the :class:`Backend` interface, the metadata an export records, and the
one-line errors for a file that is not a model of ours or whose runtime is not installed."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

import numpy as np
import torch

from yolo.errors import WeightsError

# The value of the ``format`` key every export of this package records (yolo.export.traced.metadata).
EXPORT_FORMAT = "yolo-darknet-export/1"

# runtime -> (the module that must be importable, the extra that installs it)
RUNTIME_EXTRAS = {"onnxruntime": ("onnxruntime", "export"), "openvino": ("openvino", "openvino"),
                  "torch.jit": ("torch", None)}


def install_hint(extra: str) -> str:
    """How to install the extra ``extra`` (``export``, ``openvino``)."""
    return f'pip install "yolo-darknet[{extra}]" (in a clone: pip install -e ".[{extra}]")'


def require_runtime(runtime: str, path: Path) -> None:
    """A one-line :class:`WeightsError` naming ``path`` and the extra to install when ``runtime`` is missing."""
    module, extra = RUNTIME_EXTRAS[runtime]
    if importlib.util.find_spec(module) is None:
        raise WeightsError(f"{path}: running this file needs {module}, which is not installed: {install_hint(extra)}")


class Backend:
    """One exported file, loaded in its own runtime, run like the PyTorch model it came from.

    ``backend(batch)`` takes the pre-processed input ``Float[N, 3, H, W]`` (RGB 0..1, any device and memory
    layout) and returns the eval output the PyTorch model returns for it: ``Float[N, boxes, 5 + C]`` (cx, cy,
    w, h in input pixels, objectness, class probabilities; see :class:`yolo.models.model.Darknet`), float32, on
    the batch's device. ``metadata`` holds the string key/value pairs the export recorded
    (:func:`yolo.export.traced.metadata`); ``runtime`` names what runs the file.
    """

    runtime = "?"

    def __init__(self, path: Path, metadata: Mapping[str, str]):
        self.path = Path(path)
        self.metadata: Dict[str, str] = dict(metadata)
        check_metadata(self.path, self.metadata)

    def run(self, batch: np.ndarray) -> np.ndarray:
        """The file's output for ``batch`` ``Float32[N, 3, H, W]`` (contiguous): ``Float[N, boxes, 5 + C]``."""
        raise NotImplementedError

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        x = batch.detach().to("cpu", torch.float32).contiguous().numpy()
        out = self.run(x)
        return torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32)).to(batch.device)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, runtime={self.runtime})"


def check_metadata(path: Path, meta: Mapping[str, str]) -> None:
    """A one-line :class:`WeightsError` unless ``meta`` is an export of this package whose output the tools can
    post-process: the eval rows, not detections already filtered by an NMS in the graph."""
    if meta.get("format") != EXPORT_FORMAT:
        raise WeightsError(f"{path}: no metadata of this package's exports (format {EXPORT_FORMAT}): only files "
                           "written by tools/export.py carry the cfg, class names and pre-processing needed to run it")
    if not meta.get("cfg"):
        raise WeightsError(f"{path}: its metadata holds no cfg text")
    if meta.get("nms", "none") != "none":
        raise WeightsError(f"{path}: exported with NMS in the graph (--nms): its outputs are final detections, which "
                           "cannot be re-thresholded here; export without --nms to detect or evaluate with it")


def recorded_size(path: Path, meta: Mapping[str, str]) -> Tuple[int, int]:
    """The input ``(height, width)`` the export recorded."""
    try:
        h, w = (int(v) for v in json.loads(meta["img_size"]))
    except (KeyError, ValueError, TypeError):
        raise WeightsError(f"{path}: malformed img_size in its metadata: {meta.get('img_size')!r}") from None
    return h, w


def recorded_names(path: Path, meta: Mapping[str, str]) -> Optional[list]:
    """The class names the export recorded (a JSON list), or None."""
    if "names" not in meta:
        return None
    try:
        names = json.loads(meta["names"])
    except ValueError:
        names = None
    if not isinstance(names, list):
        raise WeightsError(f"{path}: malformed class names in its metadata")
    return [str(n) for n in names]
