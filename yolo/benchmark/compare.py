"""Our detection pipeline against OpenCV DNN on the same cfg, weights, input size and threads.

Both run in one process, interleaved (:mod:`yolo.timing`), like with like: per-image latency at
batch 1 (pre-process + model + post-process), batch latency (reported as throughput, images/s) and model-only
latency. Figures are medians in milliseconds; ratios are ours / OpenCV (latency: below 1.0 means ours is
faster). :func:`cuda_figures` times fp32 and fp16 on a GPU.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional

import cv2
import numpy as np
import torch

from yolo.benchmark.opencv_dnn import OpenCVPipeline
from yolo.models.opencv_importer import opencv_lacks
from yolo.openmp_wait import openmp_wait_text
from yolo.timing import median_ms, time_interleaved
from yolo.inference.detector import Detector
from yolo.inference.preprocess import preprocess
from yolo.models.model import Darknet
from yolo.models.weights import randomize_weights
from yolo.ops.sizes import ImageSize

__all__ = ["synthetic_image", "random_weights_file", "cpu_figures", "cuda_figures", "table_header", "table_row"]


def synthetic_image(h: int = 576, w: int = 768, seed: int = 0) -> np.ndarray:
    """A smooth random BGR ``uint8`` image (a photo-like size), used when no image is given."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 32, w // 32, 3), dtype=np.uint8)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def random_weights_file(cfg: Path, folder: Path, seed: int = 0) -> Path:
    """Write ``folder/<cfg stem>-random.weights``: Darknet weights for ``cfg`` from
    :func:`yolo.models.weights.randomize_weights`."""
    model = randomize_weights(Darknet(cfg), seed)
    path = folder / (cfg.stem + "-random.weights")
    model.save_darknet_weights(path)
    return path


def table_header(batch: int) -> str:
    return (f"{'':<10}{'b=1 ms':>12}{'b=1 img/s':>12}{f'b={batch} ms':>14}{f'b={batch} img/s':>14}"
            f"{'model b=1 ms':>14}")


def table_row(name: str, lat1: float, lat_batch: float, model: float, batch: int) -> str:
    return (f"{name:<10}{lat1:>12.2f}{1e3 / lat1:>12.1f}{lat_batch:>14.1f}{batch * 1e3 / lat_batch:>14.1f}"
            f"{model:>14.2f}")


def _run(fn, x):
    with torch.inference_mode():
        fn(x)


def cpu_figures(cfg: Path, weights: Path, img_size: ImageSize, image: np.ndarray, batch: int, rounds: int, warmup: int,
                resize: str, conf_thres: float, iou_thres: float, opencv: bool = True, compile: bool = False,
                resample: Optional[str] = None) -> Dict[str, float]:
    """Time ours (and OpenCV's with ``opencv``) on the CPU and print the table; returns the figures
    (``ours_latency_ms``, ``ours_throughput``, ``ours_model_ms``, the same for ``opencv``, and the ratios)."""
    ours = Detector(cfg, weights, device="cpu", img_size=img_size, conf_thres=conf_thres, iou_thres=iou_thres,
                    resize=resize, resample=resample)
    missing = opencv_lacks(ours.model)
    if opencv and missing is not None:
        print(f"OpenCV DNN has no {missing} layer: timing ours only")
    ref = OpenCVPipeline(cfg, weights, img_size, conf_thres, iou_thres) if opencv and missing is None else None
    images_b = [image] * batch
    x1, _ = preprocess([image], img_size, resize, resample=ours.resample)
    tasks: Dict[str, Callable[[], object]] = {
        "ours_latency": lambda: ours([image]),
        "ours_batch": lambda: ours(images_b),
        "ours_model": lambda: _run(ours.net, x1),
    }
    if ref is not None:
        blob1 = ref.blob([image])
        tasks.update({
            "opencv_latency": lambda: ref([image]),
            "opencv_batch": lambda: ref(images_b),
            "opencv_model": lambda: ref.forward(blob1),
        })
    if compile:
        compiled = torch.compile(ours.net, dynamic=False)
        tasks["ours_compiled_model"] = lambda: _run(compiled, x1)

    # Interleave like with like: latency with latency, batch with batch, model with model.
    results: Dict[str, List[float]] = {}
    for group in ("latency", "batch", "model"):
        same = {k: v for k, v in tasks.items() if k.endswith(group)}
        n = rounds if group != "batch" else max(3, rounds // 4)
        results.update(time_interleaved(same, n, warmup if group != "batch" else 1))

    figures: Dict[str, float] = {}
    print(f"\nCPU ({torch.get_num_threads()} threads, {openmp_wait_text()}), median of rounds (pipeline = pre-process "
          "+ model + post-process):")
    print(table_header(batch))
    for who in ("ours", "opencv"):
        if f"{who}_latency" not in results:
            continue
        lat1, lat_b, mod = (median_ms(results[f"{who}_{k}"]) for k in ("latency", "batch", "model"))
        figures.update({f"{who}_latency_ms": lat1, f"{who}_throughput_b1": 1e3 / lat1,
                        f"{who}_throughput": batch * 1e3 / lat_b, f"{who}_model_ms": mod})
        print(table_row(who, lat1, lat_b, mod, batch))
    if "ours_compiled_model" in results:
        figures["ours_compiled_model_ms"] = median_ms(results["ours_compiled_model"])
        print(f"{'compiled':<10}{'':>52}{figures['ours_compiled_model_ms']:>14.2f}")
    if ref is not None:
        figures["latency_ratio"] = figures["ours_latency_ms"] / figures["opencv_latency_ms"]
        figures["throughput_ratio"] = figures["ours_throughput"] / figures["opencv_throughput"]
        figures["model_ratio"] = figures["ours_model_ms"] / figures["opencv_model_ms"]
        print(f"ratios ours/OpenCV: latency b=1 {figures['latency_ratio']:.3f}, model-only b=1 "
              f"{figures['model_ratio']:.3f} (<= 1.0: ours faster); throughput b={batch} "
              f"{figures['throughput_ratio']:.3f} (>= 1.0: ours faster)")
    return figures


def cuda_figures(cfg: Path, weights: Path, img_size: ImageSize, image: np.ndarray, batch: int, rounds: int, warmup: int,
                 resize: str, conf_thres: float, iou_thres: float, resample: Optional[str] = None
                 ) -> Dict[str, float]:
    """fp32 / fp16 latency (batch 1), throughput (batch ``batch``) and model-only latency on CUDA; prints
    the table and returns ``cuda_fp32_latency_ms``, ``cuda_fp32_throughput``, ``cuda_fp32_model_ms``, ... ."""
    out: Dict[str, float] = {}
    torch.backends.cudnn.benchmark = True
    print(f"\nCUDA ({torch.cuda.get_device_name()}), median of rounds:")
    print(table_header(batch))
    for half in (False, True):
        det = Detector(cfg, weights, device="cuda", img_size=img_size, conf_thres=conf_thres, iou_thres=iou_thres,
                       resize=resize, resample=resample, half=half)
        x1, _ = preprocess([image], img_size, resize, "cuda", det.dtype, det.resample)
        images_b = [image] * batch
        tasks = {"latency": lambda: det([image]), "batch": lambda: det(images_b),
                 "model": lambda: _run(det.net, x1)}
        res = {k: time_interleaved({k: v}, rounds, warmup, torch.cuda.synchronize)[k] for k, v in tasks.items()}
        name = "fp16" if half else "fp32"
        lat1, lat_b, mod = median_ms(res["latency"]), median_ms(res["batch"]), median_ms(res["model"])
        out.update({f"cuda_{name}_latency_ms": lat1, f"cuda_{name}_throughput": batch * 1e3 / lat_b,
                    f"cuda_{name}_model_ms": mod})
        print(table_row(name, lat1, lat_b, mod, batch))
    return out
