"""The reference detection pipeline: OpenCV DNN's own Darknet importer, ``blobFromImages`` (stretch, RGB
0..1), a score threshold and OpenCV's per-class NMS, all on the CPU."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import cv2
import numpy as np

from yolo.models.opencv_importer import load_opencv_darknet

__all__ = ["OpenCVPipeline"]


class OpenCVPipeline:
    """The reference: ``cv2.dnn`` Darknet importer + ``blobFromImage`` + threshold + per-class NMS.

    ``pipeline(images)`` takes BGR ``uint8`` images and returns one dict per image: ``boxes_xywh``
    ``Float32[K, 4]`` (``xywh``: top-left corner and size, original-image pixels), ``scores`` ``Float32[K]``,
    ``labels`` ``Int64[K]``.
    """

    def __init__(self, cfg: Path, weights: Path, img_size: Tuple[int, int], conf_thres: float, iou_thres: float):
        self.net, self.outputs = load_opencv_darknet(cfg, weights)
        self.h, self.w = img_size
        self.conf, self.iou = conf_thres, iou_thres

    def blob(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """``Float32[N, 3, h, w]`` RGB 0..1, each image stretched to the input size."""
        return cv2.dnn.blobFromImages(list(images), 1 / 255.0, (self.w, self.h), swapRB=True, crop=False)

    def forward(self, blob: np.ndarray) -> List[np.ndarray]:
        """The raw output of every ``[yolo]`` layer."""
        self.net.setInput(blob)
        return self.net.forward(self.outputs)

    def detections(self, outs: List[np.ndarray], shapes) -> List[Dict[str, np.ndarray]]:
        """Rows ``[cx, cy, w, h (relative), obj, obj * p...]`` -> boxes in original pixels after NMS."""
        n = len(shapes)
        rows = np.concatenate([o.reshape(n, -1, o.shape[-1]) for o in outs], 1)
        results = []
        for r, (h, w) in zip(rows, shapes):
            scores_all = r[:, 5:]
            labels = scores_all.argmax(1)
            scores = scores_all[np.arange(len(r)), labels]
            keep = scores > self.conf
            r, labels, scores = r[keep], labels[keep], scores[keep]
            xywh = np.stack([(r[:, 0] - r[:, 2] / 2) * w, (r[:, 1] - r[:, 3] / 2) * h, r[:, 2] * w, r[:, 3] * h], 1)
            idx = cv2.dnn.NMSBoxesBatched(xywh.tolist(), scores.tolist(), labels.tolist(), self.conf, self.iou) \
                if len(r) else []
            idx = np.asarray(idx, dtype=np.int64).reshape(-1)
            results.append({"boxes_xywh": xywh[idx], "scores": scores[idx], "labels": labels[idx]})
        return results

    def __call__(self, images: Sequence[np.ndarray]):
        return self.detections(self.forward(self.blob(images)), [im.shape[:2] for im in images])
