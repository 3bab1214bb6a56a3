"""The GPU report (``tools/gpu_report.py``): ours and Darknet's GPU build on the same images, in one table.

For each model (yolov3-tiny with its weights when the assets have them, yolov3 with random weights), on the
coco128 images at one input size:

- ours (:mod:`yolo.benchmark.gpu_measure`, :mod:`yolo.benchmark.gpu_training`): end-to-end training images/s
  through the trainer, the training step alone in fp32 and AMP, the Detector pipeline and the model alone at
  batch 1 and at the training batch, fp32 and fp16;
- Darknet (:mod:`yolo.benchmark.darknet_gpu`): its GPU build made here for this GPU, ``detector test``
  (network ms at batch 1) and ``detector train`` (images/s) on the same images, with the same batch and
  subdivisions.

What cannot run is named and skipped (:mod:`yolo.benchmark.gpu_environment`); its cells read "not measured".
The table (:mod:`yolo.benchmark.report_table`) is followed by notes: the machine, the settings, what was
skipped and why.
"""
from __future__ import annotations

import math
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch

from yolo.benchmark import darknet_gpu
from yolo.benchmark.gpu_environment import DARKNET, OURS_DETECT, OURS_TRAIN, Environment, probe
from yolo.benchmark.gpu_measure import detection_figures, load_images, step_throughput, training_batch
from yolo.benchmark.report_table import markdown_table
from yolo.models.cfg import parse_cfg
from yolo.models.model import Darknet
from yolo.models.weights import randomize_weights

try:
    from yolo.benchmark.gpu_training import train_throughput
    TRAINER_IMPORT_ERROR: Optional[str] = None
except ImportError as _exc:  # optional dependency: the trainer imports PyYAML, pycocotools, tqdm, TensorBoard
    train_throughput = None
    TRAINER_IMPORT_ERROR = f"the trainer cannot be imported ({_exc})"

__all__ = ["ReportSettings", "Report", "run_report", "subdivisions_of"]

Figures = Dict[str, Dict[str, float]]


@dataclass
class ReportSettings:
    assets: Path
    darknet_src: Path
    device: str = "auto"  # "auto": CUDA, and nothing to measure without it; "cpu": ours on the CPU
    models: Tuple[str, ...] = ("yolov3-tiny", "yolov3")
    img_size: int = 416
    batch: int = 64
    subdivisions: Optional[int] = None  # None: the cfg's training value (with batch > 1 in its [net]), else 2
    updates: int = 10  # timed training updates (ours and Darknet's)
    warmup: int = 3  # untimed updates / rounds first
    rounds: int = 20  # timed detection rounds at batch 1 (a quarter of it at the large batch)
    images: int = 128  # coco128 images used (at most)
    workers: Optional[int] = None  # our loader's processes (None: the trainer's default)
    darknet: bool = True
    build_dir: Optional[Path] = None  # keep Darknet's build here (default: a temporary folder)


@dataclass
class Report:
    table: str
    figures: Figures
    environment: Environment
    notes: List[str] = field(default_factory=list)

    def markdown(self) -> str:
        return self.table + "\n\n" + "\n".join(f"- {n}" for n in self.notes) + "\n"


def subdivisions_of(cfg: Path, default: int = 2) -> int:
    """The cfg's ``subdivisions`` when its ``[net]`` is set for training (``batch`` > 1), else ``default``."""
    net = parse_cfg(cfg)[0]
    return net.get_int("subdivisions", 1) if net.get_int("batch", 1) > 1 else default


def _random_weights(cfg: Path, folder: Path) -> Path:
    path = folder / f"{cfg.stem}-random.weights"
    randomize_weights(Darknet(cfg), seed=0).save_darknet_weights(path)
    return path


def _attempt(notes: List[str], what: str, fn: Callable[[], object]) -> Optional[object]:
    """``fn()``, or None with a note naming ``what`` failed and why (one measurement never stops the report)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001  the report goes on; the note says what broke
        last = traceback.extract_tb(exc.__traceback__)[-1]
        notes.append(f"{what} failed: {type(exc).__name__}: {exc} ({Path(last.filename).name}:{last.lineno})")
        return None


def _ours(s: ReportSettings, env: Environment, model: str, cfg: Path, weights: Path, real: bool, data: Path,
          work: Path, subdivisions: int, got: Dict[str, float], notes: List[str]) -> None:
    paths = env.assets.images[:s.images]
    if OURS_DETECT not in env.skipped:
        images = load_images(paths)
        for half in (False, True):
            if half and env.device != "cuda":
                continue
            name = "fp16" if half else "fp32"
            fig = _attempt(notes, f"{model} detection {name}", lambda: detection_figures(
                cfg, weights, images, env.device, half, s.img_size, s.batch, s.rounds, s.warmup))
            for key, value in (fig or {}).items():
                got[f"{key}_{name}"] = value
        batch_paths = [paths[i % len(paths)] for i in range(s.batch)]
        x, t = training_batch(batch_paths, s.img_size)
        for amp, channels_last, key in ((False, False, "step_fp32_img_s"), (True, False, "step_amp_img_s"),
                                        (True, True, "step_amp_cl_img_s")):
            if amp and env.device != "cuda":
                continue
            value = _attempt(notes, f"{model} step {key}", lambda: step_throughput(
                cfg, weights if real else None, x, t, env.device, subdivisions, amp, s.updates, s.warmup,
                channels_last))
            if value is not None:
                got[key] = value
    if OURS_TRAIN not in env.skipped:
        value = _attempt(notes, f"{model} end-to-end training", lambda: train_throughput(
            cfg, weights if real else None, data, env.device, s.batch, subdivisions, s.img_size, s.updates,
            s.warmup, s.workers, work / "ours-train"))
        if value is not None:
            got["train_img_s"] = value


def _darknet(s: ReportSettings, env: Environment, work: Path, runs: List[Tuple[str, Path, Path, bool, int]],
             data: Path, figures: Figures, notes: List[str]) -> None:
    libs = darknet_gpu.find_cuda_libraries(env.nvcc, env.cudnn_dirs)
    build = s.build_dir or work / "darknet-gpu"
    start = time.perf_counter()
    darknet = _attempt(notes, "Darknet's GPU build", lambda: darknet_gpu.build_darknet_gpu(
        s.darknet_src, build, libs, env.capability))
    if darknet is None:
        return
    notes.append(f"Darknet's GPU build: {darknet} ({time.perf_counter() - start:.0f} s, "
                 f"{darknet_gpu.arch_flag(env.capability)})")
    run_env = darknet_gpu.run_environment(libs)
    images = env.assets.images[:s.images]
    for model, cfg, weights, real, subdivisions in runs:
        got = figures[model]
        ms = _attempt(notes, f"Darknet detector test {model}", lambda: darknet_gpu.darknet_detect_ms(
            darknet, data, cfg, weights, images[:max(s.rounds, s.warmup + 1)], s.img_size, work / f"dn-test-{model}",
            run_env, s.warmup))
        if ms is not None:
            got["darknet_detect_ms"] = ms
        train = _attempt(notes, f"Darknet detector train {model}", lambda: darknet_gpu.darknet_train_throughput(
            darknet, data, cfg, weights if real else None, s.batch, subdivisions, s.img_size, s.updates, s.warmup,
            work / f"dn-train-{model}", run_env))
        if train is not None:
            got["darknet_train_img_s"], got["darknet_train_command_img_s"] = train["steady"], train["command"]


def run_report(s: ReportSettings, work: Optional[Path] = None) -> Report:
    """Measure what this machine can (see the module docstring); ``work``: a folder for the generated files
    (default: a temporary one)."""
    env = probe(s.assets, s.darknet_src, s.device, s.models)
    if TRAINER_IMPORT_ERROR and OURS_TRAIN not in env.skipped:
        env.skipped[OURS_TRAIN] = TRAINER_IMPORT_ERROR
    if not s.darknet:
        env.skipped[DARKNET] = "not asked for (--no-darknet)"
    figures: Figures = {m: {} for m in s.models}
    notes: List[str] = [f"machine: {env.describe()}; ours on {env.device}"]
    with tempfile.TemporaryDirectory(prefix="gpu-report-") as tmp:
        work = work or Path(tmp)
        runs = []
        if OURS_DETECT not in env.skipped:  # the assets are there
            need = (s.warmup + s.updates + 2) * s.batch  # the trainer's epoch (yolo.benchmark.gpu_training)
            images = env.assets.images[:s.images]
            data = darknet_gpu.write_darknet_data(work / "data", images, env.assets.names,
                                                  repeat=math.ceil(need / len(images)))
            for model in s.models:
                cfg, real = env.assets.cfgs[model], env.assets.weights.get(model) is not None
                weights = env.assets.weights[model] if real else _random_weights(cfg, work)
                subdivisions = s.subdivisions or subdivisions_of(cfg)
                workers = "the trainer's default" if s.workers is None else s.workers
                notes.append(f"{model}: {'its' if real else 'random'} weights, {s.img_size}x{s.img_size}, batch "
                             f"{s.batch}, subdivisions {subdivisions}, {len(images)} coco128 images, loader "
                             f"workers: {workers}")
                runs.append((model, cfg, weights, real, subdivisions))
                _ours(s, env, model, cfg, weights, real, data, work, subdivisions, figures[model], notes)
        if DARKNET not in env.skipped:
            _darknet(s, env, work, runs, data, figures, notes)
    notes += [f"skipped {part}: {why}" for part, why in env.skipped.items()]
    notes.append("ratios are speed ratios (above 1: ours faster). Darknet's detection figure is its network time "
                 "(`detector test`, batch 1, median after the warm-up images), its training figure images/s over "
                 "each update's data wait and update (the whole command's in parentheses). Ours: the pipeline is "
                 "pre-process + model + post-process on decoded images; end to end is the trainer with its loader")
    targeted = env.device == "cuda" and (s.img_size, s.batch) == (416, 64)
    if env.device == "cpu":
        notes.append("fp16 and AMP run on CUDA only; the targets are for a GPU at 416 with batch 64")
    elif not targeted:
        notes.append("the targets are for 416 with batch 64: not compared at these settings")
    if env.device == "cuda":
        torch.cuda.empty_cache()
    return Report(markdown_table(figures, s.models, s.batch, targeted), figures, env, notes)
