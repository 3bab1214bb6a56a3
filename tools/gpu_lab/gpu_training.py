"""End-to-end training images/s through the project's trainer (:class:`yolo.engine.Trainer`): the loader's
workers decoding and augmenting, the step, the update, everything a user's run does but evaluation.

The run is the first of two epochs, ``warmup + updates + 1`` updates long, over a training list long enough
for it (the report writes the coco128 images into it as many times as needed), at one fixed input size
(``multi_scale: false``), without TensorBoard, plots or EMA. A ``step_end`` callback stamps the time after each
update (synchronizing CUDA); an ``epoch_end`` callback asks the trainer to stop after the first epoch, whose
``results.csv`` row is written by then (evaluation comes only every ``eval_interval`` epochs and after the last,
so none runs). The figure is the images of the updates after ``warmup`` over the time between their stamps.

Where the time goes comes from the trainer's own timers, the ``results.csv`` columns ``time_data_s`` (waiting for
data), ``time_step_s`` (forward, loss, backward, optimizer) and ``time_other_s`` (the rest), seconds over the epoch,
and ``workers`` (the loader's processes): per update in milliseconds over all the epoch's updates (warm-up
included), and absent when the trainer does not write them. With an allotment the epoch ends early when time
runs out (at least ``warmup + 2`` updates): then there is no ``results.csv`` row and no split.
"""
from __future__ import annotations

import csv
import logging
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch

from gpu_lab.gpu_schedule import Allotment, ReportStopped
from yolo.engine.config import TrainOptions
from yolo.engine.trainer import Trainer

__all__ = ["train_throughput", "time_split"]

# results.csv columns of the trainer's timers (seconds in the epoch) -> the report's keys (ms per update)
TIMERS = {"time_data_s": "train_data_ms", "time_step_s": "train_step_ms", "time_other_s": "train_other_ms"}


def time_split(results_csv: Path, updates: int) -> Dict[str, float]:
    """Per update, from the last row of a run's ``results.csv``: ``train_data_ms``, ``train_step_ms``,
    ``train_other_ms`` (the epoch's seconds of each timer over its ``updates`` updates) and ``train_workers``;
    each only where its column is there and holds a number."""
    if not results_csv.is_file() or updates <= 0:
        return {}
    with open(results_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}
    out: Dict[str, float] = {}
    for column, key in list(TIMERS.items()) + [("workers", "train_workers")]:
        try:
            value = float(rows[-1].get(column) or "")
        except ValueError:
            continue
        out[key] = value if column == "workers" else value * 1e3 / updates
    return out


def train_throughput(cfg: Path, weights: Optional[Path], data: Path, device: str, batch: int, subdivisions: int,
                     img_size: int, updates: int, warmup: int, workers: Optional[int], folder: Path,
                     allotment: Optional[Allotment] = None) -> Dict[str, float]:
    """``train_img_s``: images/s of ``updates`` training updates after ``warmup + 1`` ones (batch ``batch`` in
    ``subdivisions`` mini-batches, ``img_size`` square) on the Darknet ``.data`` file ``data``, whose list must hold
    ``(warmup + updates + 1) * batch`` images; with the time split (:func:`time_split`) where the trainer wrote
    it, and ``train_workers``. The run folder goes under ``folder``. :class:`ReportStopped` when a signal stopped
    the trainer."""
    steps = warmup + updates + 1
    hyp = {"subdivisions": subdivisions, "multi_scale": False, "max_steps_per_epoch": steps,
           "tensorboard": False, "plots": False, "ema": False, "eval_interval": 1_000_000, "burn_in": 0}
    options = TrainOptions(cfg=str(cfg), data=str(data), weights=str(weights) if weights else None, hyp=hyp,
                           epochs=2, batch_size=batch, img_size=img_size, device=device, project=str(folder),
                           name=cfg.stem, workers=workers, progress=False)
    stamps: List[float] = []
    asked = []  # our own stop requests: any other is a signal's

    def stamp(t: Trainer) -> None:
        if t.parts.device.type == "cuda":
            torch.cuda.synchronize(t.parts.device)
        stamps.append(time.perf_counter())
        if allotment is not None and len(stamps) >= warmup + 2 and len(stamps) < steps:
            per_update = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
            if allotment.left() < per_update:  # out of time: this update ends the run
                allotment.saved += (steps - len(stamps)) * per_update
                asked.append("time")
                t.request_stop()

    def epoch_end(t: Trainer) -> None:
        asked.append("epoch")
        t.request_stop()  # the first epoch is the run: no second one, no evaluation

    quiet = logging.getLogger("yolo")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the run's start and stop lines are not the report's
    try:
        trainer = Trainer.from_options(options)
        trainer.add_callback("after_step", stamp)
        trainer.add_callback("after_epoch", epoch_end)
        result = trainer.fit()
    finally:
        quiet.setLevel(level)
    stop = trainer.stop_request  # the trainer's signal handlers stop it cleanly and record the signal
    if stop.signal_name is not None or (stop.requested and not asked):
        raise ReportStopped(stop.signal_name or "a stop request")
    if len(stamps) < warmup + 2:
        raise RuntimeError(f"the trainer made {len(stamps)} updates, fewer than the {warmup + 2} the timing needs")
    timed = stamps[warmup:]
    out = {"train_img_s": batch * (len(timed) - 1) / (timed[-1] - timed[0]),
           "train_workers": float(trainer.parts.plan.workers)}
    if "epoch" in asked and result.run_dir is not None:
        out.update(time_split(Path(result.run_dir) / "results.csv", len(stamps)))
    return out
