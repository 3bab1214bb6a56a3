"""Model-only latency of an exported ONNX file next to PyTorch and OpenCV DNN, timed in one process.

The round-robin timing loop here is the one of ``tools/benchmark.py`` (rotate the order each round so
that machine load hits every runtime alike); it stays this small so that it can be replaced by the
shared timing helper.
"""
from __future__ import annotations

import copy
import os
import statistics
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

import cv2
import torch

from yolo.export.compare import ArrayLike
from yolo.timing import time_interleaved
from yolo.export.darknet import export_darknet, opencv_darknet_net
from yolo.export.heads import opencv_reads
from yolo.export.onnx import onnxruntime_session, session_feed
from yolo.inference.prepare import prepare_for_inference
from yolo.ops.sizes import size_text

PathLike = Union[str, Path]


def _milliseconds(seconds: List[float]) -> Dict[str, float]:
    return {"median_ms": statistics.median(seconds) * 1e3, "min_ms": min(seconds) * 1e3}


def onnxruntime_latency(path: PathLike, inputs: ArrayLike, runs: int = 20, warmup: int = 3,
                        threads: Optional[int] = None) -> Dict[str, float]:
    """Time one onnxruntime CPU session on ``inputs`` (Float[N, 3, H, W]).

    Returns ``{"median_ms", "min_ms", "mean_ms", "runs", "threads"}`` (per call, the whole batch).
    """
    session = onnxruntime_session(path, threads)
    feed = session_feed(session, inputs)
    seconds = time_interleaved({"onnxruntime": lambda: session.run(None, feed)}, runs, warmup)["onnxruntime"]
    return {**_milliseconds(seconds), "mean_ms": statistics.fmean(seconds) * 1e3, "runs": runs,
            "threads": threads or session.get_session_options().intra_op_num_threads}


def compare_latency(model, onnx_path: PathLike, inputs: torch.Tensor, runs: int = 20, warmup: int = 3,
                    threads: int = 2, darknet: Optional[Tuple[PathLike, PathLike]] = None,
                    ) -> Dict[str, Dict[str, float]]:
    """Model-only latency in one process, interleaved round by round so that machine load
    hits every runtime alike: onnxruntime on ``onnx_path``; PyTorch on ``model`` in eval mode
    (``torch eval``) and as the Detector runs it (``torch prepared``: BN folded, channels-last, CPU
    kernels); and OpenCV DNN on ``darknet = (cfg, weights)`` when given. Every runtime uses ``threads``.

    Returns runtime name -> ``{"median_ms", "min_ms"}`` (the minimum is the steadier figure on a
    machine shared with other work).
    """
    torch_threads, cv2_threads = torch.get_num_threads(), cv2.getNumThreads()
    torch.set_num_threads(threads)
    cv2.setNumThreads(threads)
    try:
        tasks = _runtimes(model, onnx_path, inputs, threads, darknet)
        return {name: _milliseconds(t) for name, t in time_interleaved(tasks, runs, warmup).items()}
    finally:
        torch.set_num_threads(torch_threads)
        cv2.setNumThreads(cv2_threads)


def compare_latency_with_darknet_pair(model, onnx_path: PathLike, inputs: torch.Tensor, weights: Path,
                                      cfg: Optional[Path], runs: int = 20,
                                      threads: int = 2) -> Dict[str, Dict[str, float]]:
    """:func:`compare_latency` with OpenCV DNN on ``model``'s Darknet pair: ``weights`` and ``cfg`` when
    ``weights`` is a Darknet ``.weights`` file, else (a checkpoint) a temporary pair written from ``model``."""
    with tempfile.TemporaryDirectory() as tmp:
        if not opencv_reads(model):
            return compare_latency(model, onnx_path, inputs, runs=runs, threads=threads, darknet=None)
        if weights.suffix != ".weights":
            weights, cfg = export_darknet(model, Path(tmp) / "model.weights", Path(tmp) / "model.cfg")
        return compare_latency(model, onnx_path, inputs, runs=runs, threads=threads, darknet=(cfg, weights))


def _runtimes(model, onnx_path: PathLike, inputs: torch.Tensor, threads: int,
              darknet: Optional[Tuple[PathLike, PathLike]]) -> Dict[str, Callable[[], object]]:
    """One call of each runtime on ``inputs``, by name, ready to time."""
    x = inputs.float().contiguous()
    session = onnxruntime_session(onnx_path, threads, spinning=False)
    feed = session_feed(session, x)
    plain = copy.deepcopy(model).cpu().float().eval()
    prepared = prepare_for_inference(plain, "cpu", example_hw=tuple(x.shape[-2:]))
    x_cl = x.contiguous(memory_format=torch.channels_last)

    def run_torch(net, inp):
        with torch.inference_mode():
            net(inp)

    tasks: Dict[str, Callable[[], object]] = {
        "onnxruntime": lambda: session.run(None, feed),
        "torch eval": lambda: run_torch(plain, x),
        "torch prepared": lambda: run_torch(prepared, x_cl),
    }
    if darknet is not None:
        cfg, weights = darknet
        net = opencv_darknet_net(cfg, weights)
        names = net.getUnconnectedOutLayersNames()
        blob = x.numpy()

        def run_opencv():
            net.setInput(blob)
            return net.forward(names)

        tasks["opencv dnn"] = run_opencv
    return tasks


def latency_report(latency: Dict[str, Dict[str, float]], img_size: Tuple[int, int], threads: int, runs: int) -> str:
    """:func:`compare_latency`'s result as the lines ``tools/export.py --benchmark`` prints."""
    lines = [f"model-only latency, batch 1, {size_text(img_size)}, {threads} threads, {runs} interleaved "
             f"rounds (torch {torch.__version__}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}):"]
    lines += [f"  {name:<15} median {ms['median_ms']:8.2f} ms   min {ms['min_ms']:8.2f} ms"
              for name, ms in latency.items()]
    return "\n".join(lines)
