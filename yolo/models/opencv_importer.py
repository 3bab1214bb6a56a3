"""OpenCV DNN's own Darknet importer (``cv2.dnn.readNetFromDarknet``): which of our models it can read, and
reading a cfg and its weights with it. The export checks a written ``.weights`` with it
(:mod:`yolo.export.darknet`); the benchmark runs it as the reference pipeline (:mod:`yolo.benchmark.opencv_dnn`)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple, Union

import cv2

from yolo.files.opencv_paths import opencv_name
from yolo.models.heads import has_gaussian_heads
from yolo.models.layer_types.detection import DetectionLayer
from yolo.models.layer_types.upsample import Upsample

__all__ = ["load_opencv_darknet", "opencv_lacks"]

PathLike = Union[str, Path]


def opencv_lacks(model) -> Optional[str]:
    """The section of ``model`` that OpenCV's Darknet importer has no layer for (``[detection]`` of YOLOv1,
    ``[Gaussian_yolo]``, an ``[upsample]`` with a negative stride, which downsamples and makes OpenCV fail on an
    empty output), or None when OpenCV DNN can run it."""
    layers = getattr(model, "yolo_layers", [])
    if any(isinstance(h, DetectionLayer) for h in layers):
        return "[detection]"
    if has_gaussian_heads(layers):
        return "[Gaussian_yolo]"
    if any(isinstance(m, Upsample) and m.reverse for m in getattr(model, "module_list", [])):
        return "downsampling [upsample] (stride < 0)"
    return None


def load_opencv_darknet(cfg: PathLike, weights: PathLike) -> Tuple[cv2.dnn.Net, List[str]]:
    """``cv2.dnn.readNetFromDarknet(cfg, weights)`` on OpenCV's own CPU backend, and its output layer names."""
    with opencv_name(cfg) as cfg_name, opencv_name(weights) as weights_name:  # any name: yolo.files.opencv_paths
        net = cv2.dnn.readNetFromDarknet(cfg_name, weights_name)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net, list(net.getUnconnectedOutLayersNames())
