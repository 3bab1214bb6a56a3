"""Darknet: write a model as ``.weights`` (and its ``.cfg``) and check the pair with our loader and OpenCV DNN,
an independent implementation of Darknet's forward pass."""
from __future__ import annotations

import copy
import logging
import re
import tempfile
from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
import torch.nn as nn

from yolo.models.opencv_importer import load_opencv_darknet
from yolo.errors import ExportError
from yolo.export.compare import TOLERANCE, check_each_input, float32_noise, max_difference
from yolo.export.heads import opencv_columns, opencv_layout, opencv_reads
from yolo.files.atomic import write_text_atomic
from yolo.models.model import Darknet
from yolo.models.weights import layer_tensors, load_darknet_weights, save_darknet_weights

logger = logging.getLogger(__name__)

OPENCV_BN_EPS = 1e-6  # OpenCV's Darknet importer normalizes BatchNorm with sqrt(var + 1e-6)


def export_darknet(model, weights_path: Union[str, Path], cfg_path: Union[str, Path, None] = None,
                   input_size: Optional[Tuple[int, int]] = None) -> Tuple[Path, Optional[Path]]:
    """Write ``model`` (e.g. trained, loaded from a ``.pt``) as Darknet ``.weights``, and with
    ``cfg_path`` its cfg text too, so the pair loads in Darknet and OpenCV. Returns both paths.

    ``input_size`` ``(h, w)``: the cfg's ``[net]`` height and width are written as this size, the one the export
    was made and checked at (Darknet runs at its cfg's size). The model must not be fused (Darknet stores
    BatchNorm separately).
    """
    weights_path = Path(weights_path)
    save_darknet_weights(model, weights_path)
    if cfg_path is not None:
        if not model.cfg_text.strip():
            raise ExportError(f"{cfg_path}: the model carries no cfg text to write")
        text = model.cfg_text if model.cfg_text.endswith("\n") else model.cfg_text + "\n"
        if input_size is not None:
            text = cfg_at_size(text, input_size)
        cfg_path = write_text_atomic(cfg_path, text)
    logger.debug("wrote %s (Darknet weights, %.1f MB)", weights_path, weights_path.stat().st_size / 1e6)
    return weights_path, cfg_path


def cfg_at_size(cfg_text: str, size: Tuple[int, int]) -> str:
    """``cfg_text`` with its ``[net]`` (or ``[network]``) ``height`` and ``width`` set to ``size`` = ``(h, w)``;
    the other lines (comments included) as they are."""
    lines = cfg_text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"^\s*\[(net|network)\]", line)), None)
    if start is None:
        raise ExportError("the cfg has no [net] section to write the input size in")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^\s*\[", lines[i])), len(lines))
    wanted = {"height": size[0], "width": size[1]}
    for i in range(start + 1, end):
        key = re.match(r"^\s*(height|width)\s*=", lines[i])
        if key:
            lines[i] = f"{key.group(1)}={wanted.pop(key.group(1))}\n"
    inserted = [f"{key}={value}\n" for key, value in wanted.items()]  # a [net] that relied on the defaults
    return "".join(lines[:start + 1] + inserted + lines[start + 1:])


def opencv_darknet_net(cfg_path: Union[str, Path], weights_path: Union[str, Path]):
    """The pair loaded in OpenCV DNN (``cv2.dnn.readNetFromDarknet``), set to run on its own CPU backend."""
    if not hasattr(cv2, "dnn") or not hasattr(cv2.dnn, "readNetFromDarknet"):
        raise ExportError(f"OpenCV {cv2.__version__} has no Darknet importer: cannot run {weights_path} "
                          "(skip the check to export anyway)")
    return load_opencv_darknet(cfg_path, weights_path)[0]


def _cfg_for_raw_opencv_output(cfg_text: str) -> str:
    """The cfg with ``thresh=0`` and ``nms_threshold=0`` in every head: OpenCV then returns every
    decoded box instead of zeroing class scores under ``thresh`` (0.2 by default)."""
    text = re.sub(r"^\s*(thresh|nms_threshold)\s*=.*$", "", cfg_text, flags=re.M)
    return re.sub(r"^\s*\[(yolo|region)\]", r"[\1]\nthresh=0\nnms_threshold=0", text, flags=re.M)


def _check_reads_back(weights_path: Path, cfg_path: Path, model) -> None:
    """Our loader reads the file into a fresh model; every tensor must equal ``model``'s bit for bit."""
    fresh = Darknet(cfg_path)
    load_darknet_weights(fresh, weights_path)
    for (index, ours), (_, back) in zip(layer_tensors(model), layer_tensors(fresh)):
        for a, b in zip(ours, back):
            if not torch.equal(a.detach().cpu().float(), b):
                raise ExportError(f"{weights_path}: layer {index} reads back different from the model")
    logger.info("%s reads back bit-exact with our loader", weights_path.name)


def verify_darknet(weights_path: Union[str, Path], cfg_path: Union[str, Path], model,
                   inputs: Sequence[torch.Tensor], tol: float = TOLERANCE, opencv: bool = True) -> float:
    """Check a written ``.weights``/``.cfg`` pair two ways and return the largest OpenCV difference.

    1. Our loader reads the file back into a fresh model: every tensor must equal ``model``'s bit for bit.
    2. OpenCV DNN (``cv2.dnn.readNetFromDarknet``) runs the pair on each input; its output must equal
       ``model``'s eval output in OpenCV's layout within ``tol``. OpenCV normalizes BatchNorm with
       eps 1e-6, so the comparison uses a copy of ``model`` with that epsilon. For ``[region]`` heads
       only boxes and objectness are compared (OpenCV applies its own NMS to their class scores).
       OpenCV has no ``[detection]`` (YOLOv1) layer: such a model is checked by step 1 only (returns 0).
    """
    weights_path, cfg_path = Path(weights_path), Path(cfg_path)
    _check_reads_back(weights_path, cfg_path, model)
    if not opencv or not opencv_reads(model):
        return 0.0
    reference = copy.deepcopy(model).cpu().float().eval()
    for m in reference.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eps = OPENCV_BN_EPS
    columns = opencv_columns(reference)
    with tempfile.TemporaryDirectory() as tmp:
        cfg_raw = Path(tmp) / cfg_path.name  # a scratch copy, not a written result
        cfg_raw.write_text(_cfg_for_raw_opencv_output(cfg_path.read_text(encoding="utf-8")), encoding="utf-8")
        net = opencv_darknet_net(cfg_raw, weights_path)

    def compare(x: torch.Tensor):
        x = x.float().contiguous()
        hw = tuple(x.shape[-2:])
        net.setInput(x.numpy())
        with torch.no_grad():
            out32 = reference(x)
        if reference.yolo_layers:
            def layout(net_model, out):  # OpenCV's row order, boxes relative to the input
                return opencv_layout(net_model, out, hw)[..., :columns]

            outs = net.forward(net.getUnconnectedOutLayersNames())
            ref = np.concatenate([o.reshape(x.shape[0], -1, o.shape[-1]) for o in outs], 1)[..., :columns]
            diff = max_difference(layout(reference, out32), ref, (1, 1))
        else:
            layout = None
            diff = max_difference(out32.reshape(x.shape[0], -1), net.forward().reshape(x.shape[0], -1))
        return diff, lambda: float32_noise(reference, x, out32, layout)

    return check_each_input(f"{weights_path.name} in OpenCV DNN", inputs, tol, compare)
