"""The GPU report (``tools/gpu_report.py``): ours and Darknet's GPU build on the same images, in one table.

For each model (yolov3-tiny with its weights when the assets have them, yolov3 with random weights), on the
coco128 images at one input size:

- ours (:mod:`gpu_lab.gpu_measure`, :mod:`gpu_lab.gpu_training`): end-to-end training images/s
  through the trainer (with its time split and loader workers), the training step alone in fp32 and AMP, the
  Detector pipeline and the model alone at batch 1 and at the training batch, fp32 and fp16, and the milliseconds
  of each detection stage per batch;
- Darknet (:mod:`gpu_lab.darknet_gpu`): its GPU build made here for this GPU, ``detector test``
  (network ms at batch 1) and ``detector train`` (images/s) on the same images, with the same batch and
  subdivisions.

Each measurement is one :class:`~gpu_lab.gpu_schedule.Measurement`, run by the schedule within the
report's budget (:mod:`gpu_lab.gpu_schedule`: progress lines, each figure streamed as it comes, rounds
shortened or the least important measurements left out, a clean stop on Ctrl-C/SIGTERM). Darknet's build runs in
the background meanwhile (:class:`~gpu_lab.darknet_gpu.BackgroundBuild`); Darknet's timings and our
end-to-end training wait for it.

What cannot run is named and skipped (:mod:`gpu_lab.gpu_environment`); its cells read "not measured".
The table (:mod:`gpu_lab.report_table`), then where the time goes (the detection stages per batch, the
training time split per update), are followed by notes: the machine, the settings, what was skipped, left out or
stopped, and why.
"""
from __future__ import annotations

import math
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch

from gpu_lab import darknet_gpu
from gpu_lab.gpu_environment import DARKNET, OURS_DETECT, OURS_TRAIN, Environment, probe
from gpu_lab.gpu_measure import detection_figures, load_images, step_throughput, training_batch
from gpu_lab.gpu_schedule import (Allotment, Budget, Measurement, ReportStopped, RowStream, ScheduleResult,
                                         run_schedule, stop_on_signals)
from gpu_lab.report_table import markdown_table, time_tables
from yolo.models.cfg import parse_cfg
from yolo.models.model import Darknet
from yolo.models.weights import randomize_weights

try:
    from gpu_lab.gpu_training import train_throughput
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
    budget: float = 240.0  # seconds for the whole report (gpu_schedule plans to it)
    started: Optional[float] = None  # the time.monotonic() the budget counts from (None: when measuring starts)


@dataclass
class Report:
    table: str
    figures: Figures
    environment: Environment
    notes: List[str] = field(default_factory=list)

    stopped: Optional[str] = None  # the signal that stopped the measuring (the table holds what was measured)

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


# Expected seconds of each measurement at full length on a 16-core H100/H200 at 416, batch 64 (yolov3-tiny,
# yolov3): the budget's first plan; what the first measurements cost corrects the rest (gpu_schedule).
ESTIMATES = {"detection": (8.0, 15.0), "step": (4.0, 8.0), "train": (20.0, 30.0), "darknet_detect": (10.0, 10.0),
             "darknet_train": (15.0, 25.0)}


def _estimate(kind: str, model: str) -> float:
    return ESTIMATES[kind][0 if model == "yolov3-tiny" else 1]


@dataclass
class _Model:
    """One model of the report: its cfg, weights (``real``: the assets' own), and training subdivisions."""

    name: str
    cfg: Path
    weights: Path
    real: bool
    subdivisions: int


def _suffixed(figures: Optional[Dict[str, float]], suffix: str) -> Dict[str, float]:
    return {f"{k}_{suffix}": v for k, v in (figures or {}).items()}


DETECTION_KEYS = ("pipeline_b1_ms", "model_b1_ms", "pipeline_img_s", "model_img_s") + tuple(
    f"stage_{tag}_{stage}_ms" for tag in ("b1", "b") for stage in ("upload", "preprocess", "model", "postprocess",
                                                                   "total"))
TRAIN_KEYS = ("train_img_s", "train_data_ms", "train_step_ms", "train_other_ms", "train_workers")


def _ours(s: ReportSettings, env: Environment, m: _Model, data: Path, work: Path) -> List[Measurement]:
    """Our measurements of one model, most important first."""
    out: List[Measurement] = []
    paths = env.assets.images[:s.images]
    cuda = env.device == "cuda"
    update_s: Dict[str, float] = {}  # seconds of one update of the step alone, once measured

    def train(a: Allotment) -> Dict[str, float]:
        updates = s.updates
        if "step" in update_s:  # the epoch fitted to the allotment, with 40% of it left to the trainer's start
            updates = max(2, min(s.updates, int(a.left() * 0.6 / update_s["step"]) - s.warmup - 1))
            a.saved += (s.updates - updates) * update_s["step"]
        return train_throughput(m.cfg, m.weights if m.real else None, data, env.device, s.batch, m.subdivisions,
                                s.img_size, updates, s.warmup, s.workers, work / "ours-train", a)
    if OURS_DETECT not in env.skipped:
        images = load_images(paths)
        batch: Dict[str, Tuple[torch.Tensor, torch.Tensor]] = {}

        def the_batch() -> Tuple[torch.Tensor, torch.Tensor]:  # made once, by the first step measured
            if not batch:
                batch["xt"] = training_batch([paths[i % len(paths)] for i in range(s.batch)], s.img_size)
            return batch["xt"]

        def detection(half: bool) -> Callable[[Allotment], Dict[str, float]]:
            return lambda a: _suffixed(detection_figures(m.cfg, m.weights, images, env.device, half, s.img_size,
                                                         s.batch, s.rounds, s.warmup, a), "fp16" if half else "fp32")

        def step(key: str, amp: bool, channels_last: bool) -> Callable[[Allotment], Dict[str, float]]:
            def run(a: Allotment) -> Dict[str, float]:
                img_s = step_throughput(m.cfg, m.weights if m.real else None, *the_batch(), env.device,
                                        m.subdivisions, amp, s.updates, s.warmup, channels_last, a)
                update_s.setdefault("step", s.batch / img_s)  # the first one: the trainer's precision
                return {key: img_s}
            return run

        out.append(Measurement(f"{m.name} detection fp32 (batch 1 and {s.batch}, and its stages)", m.name,
                               tuple(f"{k}_fp32" for k in DETECTION_KEYS), detection(False),
                               _estimate("detection", m.name), importance=1))
        first_step = ("step_amp_img_s", True, False) if cuda else ("step_fp32_img_s", False, False)
        out.append(Measurement(f"{m.name} training step {'AMP' if cuda else 'fp32'}", m.name, (first_step[0],),
                               step(*first_step), _estimate("step", m.name), importance=2))
    if OURS_TRAIN not in env.skipped:
        out.append(Measurement(f"{m.name} training end to end (the trainer, batch {s.batch})", m.name, TRAIN_KEYS,
                               train, _estimate("train", m.name), importance=1))
    if OURS_DETECT not in env.skipped and cuda:
        out.append(Measurement(f"{m.name} detection fp16 (batch 1 and {s.batch}, and its stages)", m.name,
                               tuple(f"{k}_fp16" for k in DETECTION_KEYS), detection(True),
                               _estimate("detection", m.name), importance=2))
        out.append(Measurement(f"{m.name} training step fp32", m.name, ("step_fp32_img_s",),
                               step("step_fp32_img_s", False, False), _estimate("step", m.name), importance=3))
        out.append(Measurement(f"{m.name} training step AMP channels_last", m.name, ("step_amp_cl_img_s",),
                               step("step_amp_cl_img_s", True, True), _estimate("step", m.name), importance=3))
    return out


def _darknet(s: ReportSettings, env: Environment, build: darknet_gpu.BackgroundBuild, m: _Model, data: Path,
             work: Path, run_env: Dict[str, str]) -> List[Measurement]:
    """Darknet's measurements of one model: they start once its build is done."""
    images = env.assets.images[:s.images]

    def detect(a: Allotment) -> Dict[str, float]:
        return {"darknet_detect_ms": darknet_gpu.darknet_detect_ms(
            build.result(), data, m.cfg, m.weights, images[:max(s.rounds, s.warmup + 1)], s.img_size,
            work / f"dn-test-{m.name}", run_env, s.warmup, timeout=max(a.left(), 5.0))}

    def train(a: Allotment) -> Dict[str, float]:
        got = darknet_gpu.darknet_train_throughput(build.result(), data, m.cfg, m.weights if m.real else None,
                                                   s.batch, m.subdivisions, s.img_size, s.updates, s.warmup,
                                                   work / f"dn-train-{m.name}", run_env, timeout=max(a.left(), 5.0))
        return {"darknet_train_img_s": got["steady"], "darknet_train_command_img_s": got["command"]}

    return [Measurement(f"{m.name} Darknet detector test (batch 1)", m.name, ("darknet_detect_ms",), detect,
                        _estimate("darknet_detect", m.name), importance=1, ready=build.done),
            Measurement(f"{m.name} Darknet detector train (batch {s.batch})", m.name,
                        ("darknet_train_img_s", "darknet_train_command_img_s"), train,
                        _estimate("darknet_train", m.name), importance=1, ready=build.done)]


def _attempt_into(notes: List[str]) -> Callable[[str, Callable[[], Dict[str, float]]], Optional[Dict[str, float]]]:
    return lambda what, fn: _attempt(notes, what, fn)


def _measurements(s: ReportSettings, env: Environment, work: Path, notes: List[str]
                  ) -> Tuple[List[Measurement], Optional[darknet_gpu.BackgroundBuild]]:
    """What the report measures here, in order, and Darknet's build started in the background (None without it)."""
    if OURS_DETECT in env.skipped:  # the assets are not there
        return [], None
    need = (s.warmup + s.updates + 2) * s.batch  # the trainer's epoch (gpu_lab.gpu_training), and one more
    images = env.assets.images[:s.images]
    data = darknet_gpu.write_darknet_data(work / "data", images, env.assets.names, repeat=math.ceil(need / len(images)))
    models, ours = [], []
    for model in s.models:
        cfg, real = env.assets.cfgs[model], env.assets.weights.get(model) is not None
        weights = env.assets.weights[model] if real else _random_weights(cfg, work)
        m = _Model(model, cfg, weights, real, s.subdivisions or subdivisions_of(cfg))
        models.append(m)
        workers = "the trainer's default" if s.workers is None else s.workers
        notes.append(f"{model}: {'its' if real else 'random'} weights, {s.img_size}x{s.img_size}, batch {s.batch}, "
                     f"subdivisions {m.subdivisions}, {len(images)} coco128 images, loader workers: {workers}")
        ours += _ours(s, env, m, data, work)
    if DARKNET in env.skipped:
        return ours, None
    libs = darknet_gpu.find_cuda_libraries(env.nvcc, env.cudnn_dirs)
    build = darknet_gpu.BackgroundBuild(s.darknet_src, s.build_dir or work / "darknet-gpu", libs, env.capability)
    run_env = darknet_gpu.run_environment(libs)
    theirs = [d for m in models for d in _darknet(s, env, build, m, data, work, run_env)]
    for m in ours:
        if m.keys == TRAIN_KEYS:  # the loader's workers need the CPU cores the compilers hold: after the build
            m.ready = build.done
    return theirs + ours, build  # Darknet's first: each starts as soon as the build is done


def run_report(s: ReportSettings, work: Optional[Path] = None, stream: Optional[RowStream] = None) -> Report:
    """Measure what this machine can (see the module docstring) within ``s.budget`` seconds, each figure shown on
    ``stream`` as it comes and the tables and notes at the end (:meth:`RowStream.end`); ``work``: a folder for the
    generated files (default: a temporary one). Ctrl-C or SIGTERM ends the measuring: the report then holds what
    was measured (``Report.stopped`` names the signal)."""
    stream = stream or RowStream()
    # a reserve for the tables, the clean-up and Python's exit (a few seconds with PyTorch loaded)
    budget = Budget(s.budget, start=s.started, reserve=min(5.0, 0.15 * s.budget))
    env = probe(s.assets, s.darknet_src, s.device, s.models)
    if TRAINER_IMPORT_ERROR and OURS_TRAIN not in env.skipped:
        env.skipped[OURS_TRAIN] = TRAINER_IMPORT_ERROR
    if not s.darknet:
        env.skipped[DARKNET] = "not asked for (--no-darknet)"
    notes: List[str] = [f"machine: {env.describe()}; ours on {env.device}"]
    stream.begin(f"GPU report: each figure as it is measured (budget {s.budget:.0f} s)")
    build: Optional[darknet_gpu.BackgroundBuild] = None
    with stop_on_signals() as signals, tempfile.TemporaryDirectory(prefix="gpu-report-") as tmp:
        work = work or Path(tmp)
        try:
            measurements, build = _measurements(s, env, work, notes)
            result = run_schedule(measurements, budget, stream, _attempt_into(notes))
        except ReportStopped as stop:  # while planning, before the first measurement
            result = ScheduleResult(figures={}, stopped=stop.why,
                                    notes=[f"stopped by {stop.why} after {budget.spent():.0f} s, before any figure"])
        finally:
            signals.disarm()  # from here on a signal waits until the tables are written
            if build is not None and not build.done():
                build.cancel()  # make and its compilers stop with the report
        report = _report(s, env, build, budget, result, notes)
        report.stopped = report.stopped or signals.received
        stream.end(report.markdown())
    return report


def _report(s: ReportSettings, env: Environment, build: Optional[darknet_gpu.BackgroundBuild], budget: Budget,
            result: ScheduleResult, notes: List[str]) -> Report:
    """The tables and notes of what ``result`` holds."""
    if build is not None and build.reused:
        notes.append(f"Darknet's GPU build: reused from {s.build_dir} (the same sources and flags)")
    elif build is not None and build.seconds is not None:
        notes.append(f"Darknet's GPU build: {build.seconds:.0f} s in the background "
                     f"({darknet_gpu.arch_flag(env.capability)})")
    figures: Figures = {m: dict(result.figures.get(m, {})) for m in s.models}
    notes += result.notes
    notes += [f"skipped {part}: {why}" for part, why in env.skipped.items()]
    notes.append(f"the whole report took {budget.spent():.0f} s of its {s.budget:.0f} s budget")
    notes.append("ratios are speed ratios (above 1: ours faster). Darknet's detection figure is its network time "
                 "(`detector test`, batch 1, median after the warm-up images), its training figure images/s over "
                 "each update's data wait and update (the whole command's in parentheses). Ours: the pipeline is "
                 "pre-process + model + post-process on decoded images; end to end is the trainer with its loader. "
                 "Stages: synchronized, per batch (upload is part of pre-processing); training per update from the "
                 "trainer's timers in results.csv (warm-up updates included)")
    targeted = env.device == "cuda" and (s.img_size, s.batch) == (416, 64)
    if env.device == "cpu":
        notes.append("fp16 and AMP run on CUDA only; the targets are for a GPU at 416 with batch 64")
    elif not targeted:
        notes.append("the targets are for 416 with batch 64: not compared at these settings")
    if env.device == "cuda":
        torch.cuda.empty_cache()
    precisions = ("fp32", "fp16") if env.device == "cuda" else ("fp32",)
    table = markdown_table(figures, s.models, s.batch, targeted, result.missing) + "\n\nWhere the time goes:\n\n" + \
        time_tables(figures, s.models, s.batch, precisions, result.missing)
    return Report(table, figures, env, notes, stopped=result.stopped)
