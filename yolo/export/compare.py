"""How an exported file's output is compared with the PyTorch model's: the measure, the tolerance, and the
check every ``verify_*`` function runs on each input.

The difference is measured as in the OpenCV parity tests: boxes relative to the input size (and to
``max(1, |reference|)``), objectness and class probabilities absolutely. So a tolerance of ``1e-4`` means
at most 0.04 px at 416 and 1e-4 in any probability.
"""
from __future__ import annotations

import copy
import logging
import math
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from yolo.errors import ExportError
from yolo.export.traced import inference_copy
from yolo.ops.sizes import ImageSize

logger = logging.getLogger(__name__)

TOLERANCE = 1e-4  # float32 export vs the PyTorch model (see the module docstring for the measure)
HALF_TOLERANCE = 1e-2  # float16 export vs the PyTorch model run in float16

ArrayLike = Union[np.ndarray, torch.Tensor]
Noise = Optional[Callable[[], float]]  # the model's own float32 rounding on an input, computed only when needed


def as_float32_numpy(x: ArrayLike) -> np.ndarray:
    """A float32 NumPy copy of a tensor (any device) or array."""
    return x.detach().float().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float32)


def max_difference(ours: ArrayLike, ref: ArrayLike, input_hw: Optional[ImageSize] = None) -> float:
    """Largest difference of an exported output ``ours`` to the PyTorch output ``ref``.

    For eval outputs ``[N, boxes, 5 + C]`` (``input_hw`` given): boxes divided by the input size, then
    ``|a - b| / max(1, |b|)``; objectness and class probabilities ``|a - b|``. Any other output
    (a classifier): ``|a - b| / max(1, |b|)``. Shapes must match.
    """
    a, b = as_float32_numpy(ours), as_float32_numpy(ref)
    if a.shape != b.shape:
        raise ExportError(f"output shape {a.shape} differs from the PyTorch model's {b.shape}")
    if a.size == 0:
        return 0.0
    if input_hw is None or a.ndim != 3 or a.shape[-1] < 6:
        return float((np.abs(a - b) / np.maximum(1.0, np.abs(b))).max())
    h, w = input_hw
    scale = np.array([w, h, w, h], dtype=np.float32)
    box = np.abs(a[..., :4] - b[..., :4]) / scale / np.maximum(1.0, np.abs(b[..., :4]) / scale)
    rest = np.abs(a[..., 4:] - b[..., 4:])
    return float(max(box.max(), rest.max()))


def detections_difference(ours: Sequence[Dict[str, torch.Tensor]], ref: Sequence[Dict[str, torch.Tensor]],
                          input_hw: ImageSize) -> float:
    """Largest difference between two detection lists (boxes relative to the input size, scores
    absolutely); ``inf`` when the number of detections or any label differs."""
    h, w = input_hw
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    worst = 0.0
    for a, b in zip(ours, ref):
        if len(a["scores"]) != len(b["scores"]) or not torch.equal(a["labels"].cpu(), b["labels"].cpu()):
            return math.inf
        if len(a["scores"]):
            worst = max(worst, ((a["boxes"].float().cpu() - b["boxes"].float().cpu()).abs() / scale).max().item(),
                        (a["scores"].float().cpu() - b["scores"].float().cpu()).abs().max().item())
    return worst


def check_difference(name: str, diff: float, tol: float, noise: Noise = None) -> float:
    """Raise :class:`ExportError` when ``diff`` is over ``tol``; returns ``diff``.

    ``noise`` gives the model's own float32 rounding on this input (its difference to a float64 run).
    Deep networks, random weights above all, amplify rounding past 1e-4 on w/h; a file whose
    difference stays within three times that noise is as exact as the PyTorch model itself.
    """
    if diff > tol and noise is not None:
        own = noise()
        logger.info("%s: difference %.3g is over %g; the model's own float32 rounding here is %.3g",
                    name, diff, tol, own)
        tol = max(tol, 3.0 * own)
    if not diff <= tol:  # also catches NaN
        raise ExportError(f"{name}: largest difference to the PyTorch model {diff:.3g} is over the tolerance {tol:.3g}")
    logger.info("%s: largest difference to the PyTorch model %.3g (tolerance %.3g)", name, diff, tol)
    return diff


def check_each_input(file_and_runtime: str, inputs: Sequence[torch.Tensor], tol: float,
                     compare: Callable[[torch.Tensor], Tuple[float, Noise]]) -> float:
    """The loop of every verifier: ``compare(x)`` runs the file and the reference on the input
    ``Float[N, C, H, W]`` and gives their difference and the float32 noise; each difference is checked
    against ``tol`` (see :func:`check_difference`). Returns the largest."""
    worst = 0.0
    for x in inputs:
        diff, noise = compare(x)
        check_difference(f"{file_and_runtime}, input {tuple(x.shape)}", diff, tol, noise)
        worst = max(worst, diff)
    return worst


def float32_noise(model, x: torch.Tensor, out32: torch.Tensor,
                  layout: Optional[Callable[[object, torch.Tensor], ArrayLike]] = None) -> float:
    """Difference between ``model``'s float32 output ``out32`` on ``x`` and a float64 run of a copy
    (both passed through ``layout(model, output)`` when given, else compared as eval outputs)."""
    exact = copy.deepcopy(model).cpu().double().eval()
    with torch.no_grad():
        out64 = exact(x.cpu().double())
    if layout is not None:
        return max_difference(layout(model, out32), layout(exact, out64.float()), (1, 1))
    return max_difference(out32, out64, tuple(x.shape[-2:]) if model.yolo_layers else None)


class Reference:
    """The PyTorch output an exported ONNX or TorchScript file must reproduce: ``model``'s eval output,
    or for a float16 file the same model run in float16 (as exported: BN folded, float32 heads), since
    float16 itself moves probabilities by up to ~2e-2 from the float32 model on real inputs."""

    def __init__(self, model, half: bool):
        self.model = model.eval()
        self.half = half
        self.net = inference_copy(model, half=True) if half else self.model
        self.dtype = torch.float16 if half else torch.float32
        self.tol = HALF_TOLERANCE if half else TOLERANCE
        self.detects = bool(model.yolo_layers)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The reference output (float32, CPU) for the input ``x`` ``Float[N, C, H, W]``."""
        device = next(self.net.parameters()).device
        with torch.no_grad():
            return self.net(x.to(device, self.dtype)).float().cpu()

    def input_hw(self, x: torch.Tensor) -> Optional[ImageSize]:
        """What :func:`max_difference` needs to compare eval outputs for ``x`` (``None``: a classifier)."""
        return tuple(x.shape[-2:]) if self.detects else None

    def compare(self, out: ArrayLike, ref: torch.Tensor, x: torch.Tensor) -> Tuple[float, Noise]:
        """The difference of a file's output ``out`` to ``ref = self(x)``, and the float32 noise for
        :func:`check_difference` (none for a float16 file, whose gap to the float32 model is logged)."""
        diff = max_difference(out, ref, self.input_hw(x))
        if self.half:
            device = next(self.model.parameters()).device
            with torch.no_grad():
                full = self.model(x.to(device, torch.float32)).cpu()
            gap = max_difference(out, full, self.input_hw(x))
            logger.info("  float16 file vs the float32 model: largest difference %.3g (information only)", gap)
            return diff, None
        return diff, lambda: float32_noise(self.model, x, ref)
