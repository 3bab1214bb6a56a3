"""Where a detection batch's time goes: the milliseconds of each stage of the :class:`~yolo.inference.detector.Detector`
pipeline on one batch, measured as synchronized stages (the device is synchronized after each stage, so a stage's
time is its own work, not what it queued).

Stages, per batch of decoded BGR ``uint8`` images:

- ``upload``: the ``uint8`` batch copied to the device (:func:`yolo.inference.device_preprocess.upload_uint8`),
  timed on its own; only where the Detector pre-processes on the device (CUDA), None elsewhere;
- ``preprocess``: :meth:`Detector.preprocess` (resize and conversion to the network input; on the device its
  upload is included);
- ``model``: :meth:`Detector.forward` (the network, a CUDA graph replay where one is captured);
- ``postprocess``: :meth:`Detector.postprocess` (thresholds and NMS for the batch, one copy of the boxes to the
  host, boxes mapped back to the images);
- ``total``: the three stages of one round together (``upload`` is part of ``preprocess``, not added).

Each figure is the median over rounds, after warm-up rounds. The synchronizations cost a little, so ``total`` may
exceed one unsynchronized call of the Detector. Used by ``tools/benchmark.py`` and ``tools/gpu_report.py``.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from yolo.inference.device_preprocess import upload_uint8
from yolo.inference.detector import Detector

__all__ = ["STAGES", "StageTimes", "detection_stages", "format_stages", "stage_figures"]

STAGES = ("upload", "preprocess", "model", "postprocess")


@dataclass
class StageTimes:
    """Median milliseconds per batch of ``batch`` images for each stage (``upload``: None where there is none)."""

    batch: int
    upload: Optional[float]
    preprocess: float
    model: float
    postprocess: float
    total: float

    def as_dict(self) -> Dict[str, Optional[float]]:
        return {"upload": self.upload, "preprocess": self.preprocess, "model": self.model,
                "postprocess": self.postprocess, "total": self.total}


def _synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _same_size_groups(images: Sequence[np.ndarray]) -> List[List[np.ndarray]]:
    """``images`` grouped by shape, as the Detector uploads them (one ``UInt8[n, H, W, 3]`` per size)."""
    groups: Dict[tuple, List[np.ndarray]] = {}
    for image in images:
        groups.setdefault(image.shape, []).append(image)
    return list(groups.values())


def detection_stages(detector: Detector, images: Sequence[np.ndarray], rounds: int, warmup: int = 1) -> StageTimes:
    """Time the stages of ``detector`` on the batch ``images`` (decoded BGR ``uint8``): ``warmup`` untimed rounds,
    then ``rounds`` timed ones (at least 1); see the module docstring."""
    sync = _synchronizer(detector.device)
    shapes = [im.shape[:2] for im in images]
    times: Dict[str, List[float]] = {name: [] for name in STAGES + ("total",)}
    upload = detector.device_preprocess and detector.device.type != "cpu"
    for i in range(warmup + max(1, rounds)):
        stamps = []
        with torch.inference_mode():
            sync()
            if upload:
                t0 = time.perf_counter()
                upload_uint8(_same_size_groups(images), detector.device, detector.staging)
                sync()
                stamps.append(("upload", time.perf_counter() - t0))
            t0 = time.perf_counter()
            batch, infos = detector.preprocess(images)
            sync()
            t1 = time.perf_counter()
            predictions = detector.forward(batch)
            sync()
            t2 = time.perf_counter()
            detector.postprocess(predictions, infos, shapes)
            sync()
            t3 = time.perf_counter()
        if i < warmup:
            continue
        stamps += [("preprocess", t1 - t0), ("model", t2 - t1), ("postprocess", t3 - t2), ("total", t3 - t0)]
        for name, seconds in stamps:
            times[name].append(seconds)
    ms = {name: statistics.median(t) * 1e3 if t else None for name, t in times.items()}
    return StageTimes(len(images), ms["upload"], ms["preprocess"], ms["model"], ms["postprocess"], ms["total"])


def format_stages(label: str, stages: StageTimes) -> str:
    """One line: ``<label> batch B: upload 0.41 ms, pre-processing 1.2 ms, model 3.4 ms, post-processing 0.9 ms,
    total 5.5 ms per batch``."""
    parts = [f"{name} {value:.3g} ms" for name, value in (
        ("upload", stages.upload), ("pre-processing", stages.preprocess), ("model", stages.model),
        ("post-processing", stages.postprocess), ("total", stages.total)) if value is not None]
    return f"{label} batch {stages.batch}: {', '.join(parts)} per batch"


def stage_figures(cfg, weights, img_size, image: np.ndarray, batch: int, rounds: int, warmup: int, resize: str,
                  conf_thres: float, iou_thres: float, device: str = "cpu", half: bool = False,
                  resample: Optional[str] = None) -> Dict[str, float]:
    """The stages of ``tools/benchmark.py``'s pipeline on ``device`` (fp16 with ``half``) at batch 1 and at
    ``batch`` (``image`` repeated): prints one line per batch and returns
    ``stages_<device>_<fp32|fp16>_b<N>_<stage>_ms`` (no ``upload`` key where there is no upload)."""
    detector = Detector(cfg, weights, device=device, img_size=img_size, conf_thres=conf_thres, iou_thres=iou_thres,
                        resize=resize, resample=resample, half=half)
    precision = "fp16" if detector.half else "fp32"
    out: Dict[str, float] = {}
    for n in sorted({1, batch}):
        stages = detection_stages(detector, [image] * n, rounds, warmup)
        print(format_stages(f"stages {detector.device.type} {precision},", stages))
        prefix = f"stages_{detector.device.type}_{precision}_b{n}"
        out.update({f"{prefix}_{name}_ms": value for name, value in stages.as_dict().items() if value is not None})
    return out
