"""``tools/export.py --format openvino --int8``: a float32 IR, checked; NNCF's INT8 IR of it, calibrated on the
dataset's images; both scored on the dataset's val split as ``tools/eval.py`` scores them."""
from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch

from yolo.backends.exported_model import ExportedModel
from yolo.backends.openvino_runtime import OpenVinoBackend
from yolo.errors import ExportError
from yolo.export.accuracy import dataset_map
from yolo.export.compare import max_difference
from yolo.export.onnx import DEFAULT_OPSET
from yolo.export.openvino import export_openvino, verify_openvino, weights_path
from yolo.export.quantize import calibration_batches, quantize_openvino
from yolo.models.preprocessing import default_resize

logger = logging.getLogger(__name__)


@dataclass
class Int8Export:
    """What :func:`export_int8` wrote and measured."""

    files: List[Path]  # the INT8 IR: NAME.xml, NAME.bin
    calibration_images: int
    fp32_difference: Optional[float]  # the float32 IR's largest difference to the PyTorch model (None: unchecked)
    int8_difference: float  # the INT8 IR's largest difference to the PyTorch model (information: INT8 moves it)
    fp32_map: Dict[str, float]  # dataset_map of the float32 IR
    int8_map: Dict[str, float]  # dataset_map of the INT8 IR


def export_int8(model, output: Union[str, Path], inputs: Sequence[torch.Tensor], data: Union[str, Path],
                calib_images: int = 300, names: Optional[Sequence[str]] = None, dynamic: bool = False,
                opset: int = DEFAULT_OPSET, verify: bool = True) -> Int8Export:
    """Write ``model`` as an INT8 OpenVINO IR at ``output`` (``NAME.xml`` + ``NAME.bin``).

    The float32 IR (:func:`yolo.export.openvino.export_openvino` at the size of ``inputs[0]``) is written to a
    temporary folder beside ``output`` and, with ``verify``, checked against ``model`` on ``inputs``. NNCF quantizes
    it on ``calib_images`` train images of ``data`` (:func:`yolo.export.quantize.calibration_batches`, the model's
    resize). Both IRs are then scored on ``data``'s val split (:func:`yolo.export.accuracy.dataset_map`); the
    float32 one is removed. A non-finite INT8 output raises :class:`ExportError` and leaves nothing behind.
    """
    output = Path(output)
    size = tuple(int(v) for v in inputs[0].shape[-2:])
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=".fp32-") as tmp:
        fp32 = export_openvino(model, Path(tmp) / "fp32.xml", size, dynamic=dynamic, names=names,
                               example=inputs[0], opset=opset)
        fp32_difference = verify_openvino(fp32, model, inputs) if verify else None
        batches = calibration_batches(data, size, default_resize(model), calib_images)
        logger.info("calibrating on %d images of %s", len(batches), data)
        quantize_openvino(model, fp32, output, batches)
        files = [output, weights_path(output)]
        try:
            int8_model = ExportedModel(OpenVinoBackend(output))
            with torch.no_grad():
                worst = max(max_difference(int8_model(x), model.eval()(x), tuple(x.shape[-2:])) for x in inputs)
            if not math.isfinite(worst):
                raise ExportError(f"{output}: the INT8 IR gives non-finite outputs")
            fp32_map = dataset_map(ExportedModel(OpenVinoBackend(fp32)), data)
            int8_map = dataset_map(int8_model, data)
        except BaseException:
            for p in files:
                p.unlink(missing_ok=True)
            raise
    return Int8Export(files, len(batches), fp32_difference, worst, fp32_map, int8_map)
