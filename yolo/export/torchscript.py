"""TorchScript: write a model as a traced TorchScript file and check it through ``torch.jit.load``."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional, Sequence, Union

import torch

from yolo.export.compare import Reference, check_each_input
from yolo.export.samples import sample_input
from yolo.export.traced import inference_copy, metadata, quiet_tracing, writing_export
from yolo.models.preprocessing import model_input_size
from yolo.ops.sizes import SizeLike

logger = logging.getLogger(__name__)


def export_torchscript(model, path: Union[str, Path], img_size: Optional[SizeLike] = None,
                       half: bool = False, names: Optional[Sequence[str]] = None,
                       example: Optional[torch.Tensor] = None) -> Path:
    """Write ``model`` as a traced TorchScript file (``torch.jit.load`` reads it) and return its path.

    The traced module takes Float[N, 3, H, W] (float16 with ``half``) and returns the eval output
    Float[N, boxes, 5 + C] (float32; heads decode in float32). Any batch works, and so do other sizes
    that are multiples of the stride (the grids follow the traced sizes). The metadata of
    :func:`yolo.export.onnx.export_onnx` is stored as the extra file ``meta.json``.
    """
    path = Path(path)
    size = model_input_size(model, img_size, "img_size")
    net = inference_copy(model, half=half)
    x = example if example is not None else sample_input(size, 1, channels=model.input_channels)
    x = x.to(torch.float16 if half else torch.float32)
    with writing_export(path, "TorchScript") as tmp, quiet_tracing(), torch.no_grad():
        traced = torch.jit.trace(net, (x,), check_trace=False)
        extra = {"meta.json": json.dumps(metadata(model, size, half, names))}
        torch.jit.save(traced, str(tmp), _extra_files=extra)
    logger.debug("wrote %s (TorchScript, %.1f MB)", path, path.stat().st_size / 1e6)
    return path


def verify_torchscript(path: Union[str, Path], model, inputs: Sequence[torch.Tensor],
                       tol: Optional[float] = None) -> float:
    """``torch.jit.load`` the file, run it on each input and compare with ``model``'s eval output
    (float16 files: with ``model`` run in float16); returns the largest difference (over ``tol``,
    default :data:`TOLERANCE` or :data:`HALF_TOLERANCE`, raises :class:`ExportError`)."""
    with quiet_tracing():
        loaded = torch.jit.load(str(path), map_location="cpu").eval()
    reference = Reference(model, half=any(p.dtype == torch.float16 for p in loaded.parameters()))

    def compare(x: torch.Tensor):
        ref = reference(x)
        with torch.no_grad():
            out = loaded(x.to(reference.dtype))
        return reference.compare(out, ref, x)

    return check_each_input(f"{Path(path).name} in torch.jit", inputs, reference.tol if tol is None else tol,
                            compare)
