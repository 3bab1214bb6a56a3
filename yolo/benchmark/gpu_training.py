"""End-to-end training images/s through the project's trainer (:class:`yolo.engine.Trainer`): the loader's
workers decoding and augmenting, the step, the update, everything a user's run does but evaluation.

The run is one epoch over a training list long enough for ``warmup + updates`` updates (the report writes the
coco128 images into it as many times as needed), at one fixed input size (``multi_scale: false``), without
TensorBoard, plots or EMA. A ``step_end`` callback stamps the time after each update (synchronizing CUDA);
after the last timed update it asks the trainer to stop, so no evaluation runs. The figure is the images of
the updates after ``warmup`` over the time between their stamps.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import List, Optional

import torch

from yolo.engine.config import TrainOptions
from yolo.engine.trainer import Trainer

__all__ = ["train_throughput"]


def train_throughput(cfg: Path, weights: Optional[Path], data: Path, device: str, batch: int, subdivisions: int,
                     img_size: int, updates: int, warmup: int, workers: Optional[int], folder: Path) -> float:
    """Images/s of ``updates`` training updates after ``warmup + 1`` ones (batch ``batch`` in ``subdivisions``
    mini-batches, ``img_size`` square) on the Darknet ``.data`` file ``data``, whose list must hold
    ``(warmup + updates + 2) * batch`` images (the epoch is one update longer than the run, so that the
    stop request ends it before the end-of-epoch evaluation); the run folder goes under ``folder``."""
    hyp = {"subdivisions": subdivisions, "multi_scale": False, "max_steps_per_epoch": warmup + updates + 2,
           "tensorboard": False, "plots": False, "ema": False, "eval_interval": 1, "burn_in": 0}
    options = TrainOptions(cfg=str(cfg), data=str(data), weights=str(weights) if weights else None, hyp=hyp,
                           epochs=1, batch_size=batch, img_size=img_size, device=device, project=str(folder),
                           name=cfg.stem, workers=workers, progress=False)
    stamps: List[float] = []

    def stamp(t: Trainer) -> None:
        if t.device.type == "cuda":
            torch.cuda.synchronize(t.device)
        stamps.append(time.perf_counter())
        if len(stamps) == warmup + updates + 1:
            t.request_stop()  # at this update's end: no further update, no evaluation

    quiet = logging.getLogger("yolo")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the run's start and stop lines are not the report's
    try:
        trainer = Trainer.from_options(options)
        trainer.add_callback("step_end", stamp)
        trainer.fit()
    finally:
        quiet.setLevel(level)
    if len(stamps) < warmup + 2:
        raise RuntimeError(f"the trainer made {len(stamps)} updates, fewer than the {warmup + 2} the timing needs")
    timed = stamps[warmup:]
    return batch * (len(timed) - 1) / (timed[-1] - timed[0])
