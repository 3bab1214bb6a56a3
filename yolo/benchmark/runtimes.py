"""One model in every installed runtime, side by side: PyTorch (as the Detector runs it), onnxruntime on its ONNX
export, OpenVINO on its float32 IR and on NNCF's INT8 IR (``tools/benchmark.py --runtimes``).

All of them run in this process at the same thread count, interleaved round by round (:mod:`yolo.timing`), so that
load from other work hits each alike; figures are medians. Per runtime: model latency at batch 1 (ms), throughput at
a larger batch (images/s), the largest difference of its output to the PyTorch model's
(:func:`yolo.export.compare.max_difference`: boxes relative to the input, probabilities absolutely) and, with a
dataset, its mAP50 on the val split as ``tools/eval.py`` computes it.
"""
from __future__ import annotations

import copy
import importlib.util
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from yolo.backends import ExportedModel, load_runnable, open_backend
from yolo.benchmark.compare import synthetic_image
from yolo.export.accuracy import dataset_map
from yolo.export.compare import max_difference
from yolo.export.onnx import export_onnx
from yolo.export.openvino import export_openvino
from yolo.export.quantize import calibration_batches, quantize_openvino
from yolo.export.samples import sample_input
from yolo.files.images import load_image
from yolo.inference.prepare import prepare_for_inference
from yolo.inference.preprocess import preprocess
from yolo.models.preprocessing import default_resize, model_input_choice
from yolo.ops.sizes import ImageSize, size_text
from yolo.openmp_wait import openmp_wait_text
from yolo.timing import median_ms, time_interleaved

logger = logging.getLogger(__name__)

RUNTIMES = ("pytorch", "onnxruntime", "openvino", "openvino-int8")
NEEDS = {"onnxruntime": ("onnx", "onnxruntime"), "openvino": ("onnx", "openvino"),
         "openvino-int8": ("onnx", "openvino", "nncf")}  # the packages each runtime's row needs


def installed_runtimes(asked: Optional[Sequence[str]] = None) -> List[str]:
    """``asked`` (default :data:`RUNTIMES`) less those whose packages are not installed (logged)."""
    kept = []
    for name in asked or RUNTIMES:
        missing = [p for p in NEEDS.get(name, ()) if importlib.util.find_spec(p) is None]
        if missing:
            logger.warning("%s: skipped (%s not installed)", name, ", ".join(missing))
        else:
            kept.append(name)
    return kept


@dataclass
class RuntimeRow:
    """One runtime's figures."""

    name: str
    latency_ms: float  # batch 1, median
    throughput: float  # images/s at the larger batch, median
    max_difference: Optional[float]  # to the PyTorch model; None without one
    map50: Optional[float] = None


def build_models(model, runtimes: Sequence[str], folder: Path, img_size: ImageSize, threads: int,
                 data: Optional[Path] = None, calib_images: int = 64) -> Dict[str, torch.nn.Module]:
    """Runtime name -> a model ``Float[N, 3, H, W] -> Float[N, boxes, 5 + C]`` for each of ``runtimes``: PyTorch
    (``model`` itself, eval mode) and :class:`ExportedModel`\\ s of the files exported into ``folder``. INT8 is
    calibrated on ``calib_images`` train images of ``data``, or without it on drawn shapes scenes."""
    models: Dict[str, torch.nn.Module] = {}
    if "pytorch" in runtimes:
        models["pytorch"] = model.eval()
    if "onnxruntime" in runtimes:
        path = export_onnx(model, folder / "model.onnx", img_size)
        models["onnxruntime"] = ExportedModel(open_backend(path, threads))
    if "openvino" in runtimes or "openvino-int8" in runtimes:
        fp32 = export_openvino(model, folder / "model.xml", img_size)
        if "openvino" in runtimes:
            models["openvino"] = ExportedModel(open_backend(fp32, threads))
        if "openvino-int8" in runtimes:
            if data is not None:
                batches = calibration_batches(data, img_size, default_resize(model), calib_images)
            else:
                batches = [sample_input(img_size, 1, seed=i).numpy() for i in range(min(calib_images, 16))]
            int8 = quantize_openvino(model, fp32, folder / "model-int8.xml", batches)
            models["openvino-int8"] = ExportedModel(open_backend(int8, threads))
    return models


def _call(net: Callable, x: torch.Tensor) -> Callable[[], object]:
    def run():
        with torch.inference_mode():
            return net(x)
    return run


def runtime_figures(model, image: np.ndarray, img_size: ImageSize, threads: int, batch: int = 8, rounds: int = 20,
                    warmup: int = 3, repeats: int = 3, runtimes: Optional[Sequence[str]] = None,
                    data: Optional[Path] = None, calib_images: int = 64) -> List[RuntimeRow]:
    """The table's rows for ``model`` (a :class:`yolo.models.model.Darknet`) in each installed runtime of
    ``runtimes`` (:func:`build_models`, exported into a temporary folder), measured by :func:`measure`."""
    torch.set_num_threads(threads)
    names = installed_runtimes(runtimes)
    with tempfile.TemporaryDirectory() as tmp:
        models = build_models(model, names, Path(tmp), img_size, threads, data, calib_images)
        return measure(models, image, img_size, batch, rounds, warmup, repeats, data)


def measure(models: Dict[str, torch.nn.Module], image: np.ndarray, img_size: ImageSize, batch: int = 8,
            rounds: int = 20, warmup: int = 3, repeats: int = 3, data: Optional[Path] = None) -> List[RuntimeRow]:
    """Time ``models`` (runtime name -> model) on ``image`` (BGR ``uint8``, pre-processed as the Detector does):
    ``repeats`` times ``rounds`` interleaved rounds at batch 1 and a quarter as many at ``batch``, the median of
    all. The ``pytorch`` model, when there is one, runs as the Detector runs it
    (:func:`yolo.inference.prepare.prepare_for_inference`) and is the reference of the differences."""
    some = next(iter(models.values()))
    resize = default_resize(some)
    x1, _ = preprocess([image], img_size, resize)
    xb, _ = preprocess([image] * batch, img_size, resize)
    x1, xb = x1.contiguous(), xb.contiguous()
    single, batched = {}, {}
    for name, m in models.items():
        if name == "pytorch":
            net = prepare_for_inference(copy.deepcopy(m).cpu().float().eval(), "cpu", example_hw=img_size)
            single[name] = _call(net, x1.contiguous(memory_format=torch.channels_last))
            batched[name] = _call(net, xb.contiguous(memory_format=torch.channels_last))
        else:
            single[name], batched[name] = _call(m, x1), _call(m, xb)
    lat: Dict[str, List[float]] = {n: [] for n in models}
    big: Dict[str, List[float]] = {n: [] for n in models}
    for _ in range(repeats):
        for name, seconds in time_interleaved(single, rounds, warmup).items():
            lat[name] += seconds
        for name, seconds in time_interleaved(batched, max(3, rounds // 4), 1).items():
            big[name] += seconds
    reference = None
    if "pytorch" in models:
        with torch.inference_mode():
            reference = models["pytorch"].eval()(x1)
    rows = []
    for name, m in models.items():
        diff = None
        if reference is not None:
            with torch.inference_mode():
                diff = max_difference(m(x1), reference, img_size)
        rows.append(RuntimeRow(name, median_ms(lat[name]), batch * 1e3 / median_ms(big[name]), diff))
    if data is not None:
        for row in rows:
            row.map50 = dataset_map(models[row.name], data)["mAP50"]
    return rows


def weights_figures(cfg: Optional[Path], weights: Path, img_size: Optional[ImageSize], image: Optional[Path],
                    threads: int, batch: int = 8, rounds: int = 20, warmup: int = 3, data: Optional[Path] = None,
                    runtimes: Optional[Sequence[str]] = None, calib_images: int = 64) -> List[RuntimeRow]:
    """What ``tools/benchmark.py --runtimes`` measures (and prints the settings of): the model of ``cfg`` and
    ``weights`` in every installed runtime of ``runtimes`` (:func:`runtime_figures`), or an exported ``weights`` file
    alone in its own runtime; on ``image`` (default: :func:`yolo.benchmark.compare.synthetic_image`)."""
    torch.set_num_threads(threads)
    model = load_runnable(cfg, weights, device="cpu", threads=threads)
    size, size_from = model_input_choice(model, img_size, "--img-size")
    picture = load_image(image) if image is not None else synthetic_image()
    print(f"{Path(weights).name} at {size_text(size)} ({size_from}), {threads} threads, batch 1 and {batch}, "
          f"{repeats_note(rounds)}; torch {torch.__version__}, {openmp_wait_text()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    common = dict(batch=batch, rounds=rounds, warmup=warmup, data=data)
    if isinstance(model, ExportedModel):
        return measure({model.backend.runtime: model}, picture, size, **common)
    return runtime_figures(model, picture, size, threads, runtimes=runtimes, calib_images=calib_images, **common)


def repeats_note(rounds: int, repeats: int = 3) -> str:
    return f"medians of {repeats} x {rounds} interleaved rounds (batch: {repeats} x {max(3, rounds // 4)})"


def runtime_table(rows: Sequence[RuntimeRow], batch: int) -> str:
    """The rows as the table ``tools/benchmark.py --runtimes`` prints (ratios to the PyTorch row when there is
    one)."""
    base = next((r for r in rows if r.name == "pytorch"), None)
    lines = [f"{'runtime':<15}{'b=1 ms':>9}{'vs torch':>10}{f'b={batch} img/s':>14}{'max diff':>11}{'mAP50':>8}"]
    for r in rows:
        ratio = f"{r.latency_ms / base.latency_ms:.2f}" if base is not None else "-"
        diff = f"{r.max_difference:.2g}" if r.max_difference is not None else "-"
        map50 = f"{r.map50:.4f}" if r.map50 is not None else "-"
        lines.append(f"{r.name:<15}{r.latency_ms:>9.2f}{ratio:>10}{r.throughput:>14.1f}{diff:>11}{map50:>8}")
    return "\n".join(lines)
