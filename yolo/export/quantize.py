"""INT8 after training: an OpenVINO IR quantized by NNCF (``nncf.quantize``, OpenVINO's own quantizer), calibrated
on real images pre-processed exactly as the Detector feeds the model.

The graph is shaped for it: the convolutions and what joins them (routes, upsampling, pooling) run in INT8; the heads'
decode (sigmoid, exp, grid and anchor arithmetic, the concatenation of the heads' rows) is left out of quantization
(NNCF's ignored scope), so the boxes and probabilities are computed in float32 from the INT8 network's head maps.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Sequence, Union

import numpy as np

from yolo.backends.openvino_runtime import read_metadata
from yolo.data import build_dataset, load_data_config
from yolo.errors import DataError, ExportError
from yolo.export.onnx import OUTPUT_NAME
from yolo.export.openvino import save_ir
from yolo.files.images import load_image
from yolo.inference.preprocess import preprocess
from yolo.ops.sizes import ImageSize

logger = logging.getLogger(__name__)


def calibration_batches(data: Union[str, Path], img_size: ImageSize, resize: str, count: int,
                        split: str = "train") -> List[np.ndarray]:
    """Up to ``count`` images of ``split`` of the dataset ``data``, each as the network input ``Float32[1, 3, H, W]``
    the Detector makes of it (:func:`yolo.inference.preprocess.preprocess` at ``img_size`` with ``resize``), spread
    evenly over the split."""
    config = load_data_config(data, training=split == "train")
    records = build_dataset(config, split, img_size=img_size, augment=False).records
    if not records:
        raise DataError(f"{data}: the {split} split has no images to calibrate on")
    picks = np.linspace(0, len(records) - 1, min(count, len(records))).round().astype(int)
    batches = []
    for i in sorted(set(picks.tolist())):
        batch, _ = preprocess([load_image(records[i].path)], img_size, resize)
        batches.append(batch.contiguous().numpy())
    return batches


def decode_scope(model) -> "object":
    """NNCF's ignored scope for ``model``'s heads' decode: every node the ONNX export names after a head layer
    (``/module_list.N/...``) and the final concatenation of their rows."""
    import nncf  # optional dependency (the openvino extra)

    heads = [str(i) for i, is_head in enumerate(model._is_head) if is_head]
    patterns = [rf".*/module_list\.({'|'.join(heads)})/.*"] if heads else []
    return nncf.IgnoredScope(patterns=patterns, names=[OUTPUT_NAME], validate=False)


def quantize_openvino(model, fp32_xml: Union[str, Path], int8_xml: Union[str, Path],
                      batches: Sequence[np.ndarray]) -> Path:
    """Quantize the float32 IR ``fp32_xml`` of ``model`` (a :class:`yolo.models.model.Darknet`) with NNCF on the
    calibration inputs ``batches`` (:func:`calibration_batches`) and write the INT8 IR to ``int8_xml`` with the
    same metadata (plus ``int8: true``). Returns ``int8_xml``."""
    import nncf  # optional dependency (the openvino extra)
    import openvino as ov  # optional dependency (the openvino extra)

    fp32 = ov.Core().read_model(str(fp32_xml))
    meta = read_metadata(fp32)
    nncf_logger = logging.getLogger("nncf")
    level = nncf_logger.level
    nncf_logger.setLevel(logging.WARNING if logger.isEnabledFor(logging.DEBUG) else logging.ERROR)
    try:
        int8 = nncf.quantize(fp32, nncf.Dataset(list(batches)), subset_size=len(batches),
                             preset=nncf.QuantizationPreset.MIXED, fast_bias_correction=True,
                             ignored_scope=decode_scope(model))
    except Exception as exc:
        raise ExportError(f"{int8_xml}: NNCF quantization failed: {str(exc).strip().splitlines()[0][:300]}") from exc
    finally:
        nncf_logger.setLevel(level)
    save_ir(int8, Path(int8_xml), {**meta, "int8": "true", "calibration_images": str(len(batches))})
    return Path(int8_xml)
