"""OpenCV DNN's own Darknet importer (``cv2.dnn.readNetFromDarknet``): which of our models it can read, and
reading a cfg and its weights with it. The export checks a written ``.weights`` with it
(:mod:`yolo.export.darknet`); the benchmark runs it as the reference pipeline (:mod:`yolo.benchmark.opencv_dnn`)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple, Union

import cv2

from yolo.models.heads import has_gaussian_heads
from yolo.models.layer_types.detection import DetectionLayer

__all__ = ["load_opencv_darknet", "opencv_lacks"]

PathLike = Union[str, Path]


def opencv_lacks(model) -> Optional[str]:
    """The head section of ``model`` that OpenCV's Darknet importer has no layer for (``[detection]`` of
    YOLOv1, ``[Gaussian_yolo]``), or None when OpenCV DNN can run it."""
    layers = getattr(model, "yolo_layers", [])
    if any(isinstance(h, DetectionLayer) for h in layers):
        return "[detection]"
    if has_gaussian_heads(layers):
        return "[Gaussian_yolo]"
    return None


def load_opencv_darknet(cfg: PathLike, weights: PathLike) -> Tuple[cv2.dnn.Net, List[str]]:
    """``cv2.dnn.readNetFromDarknet(cfg, weights)`` on OpenCV's own CPU backend, and its output layer names."""
    net = cv2.dnn.readNetFromDarknet(str(cfg), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net, list(net.getUnconnectedOutLayersNames())
