"""Where a training run is and what it has measured: :class:`TrainState`, owned by the trainer
(:class:`yolo.engine.trainer.Trainer`), advanced by it and by the step runner (:mod:`yolo.engine.update_step`),
read by the hooks (:mod:`yolo.engine.hooks`).

The first group of fields is what a checkpoint saves and a resumed run starts from
(:mod:`yolo.engine.hooks.checkpointing`, :class:`yolo.engine.hooks.checkpointing.ResumeState`); the rest describes the update
and the epoch just done, for the hooks that report them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from yolo.engine.epoch_times import EpochTimeSplit


def fitness(metrics: Dict[str, Any]) -> float:
    """The number ``best.pt`` maximizes: ``0.1 * mAP50 + 0.9 * mAP50_95``."""
    return 0.1 * max(float(metrics.get("mAP50", 0.0)), 0.0) + 0.9 * max(float(metrics.get("mAP50_95", 0.0)), 0.0)


@dataclass
class StepLog:
    """The numbers of one optimizer update, on the CPU (fetched by the update's one CPU-GPU sync).

    ``box``, ``obj``, ``cls`` and ``loss`` are per image, of the update's last mini-batch; the ``mean_*``
    are the running means over the epoch's mini-batches so far (this process's).
    """

    box: float
    obj: float
    cls: float
    loss: float
    mean_box: float
    mean_obj: float
    mean_cls: float
    size_hw: Tuple[int, int]  # input size of the update's mini-batches
    num_targets: int  # the loss's target assignments in the last mini-batch


@dataclass
class TrainState:
    """The run's counters and results (see the module docstring)."""

    # Saved in checkpoints, resumed.
    epoch: int = 0  # the epoch in progress (0-based); after it ends, the number of epochs done
    epoch_step: int = 0  # optimizer updates done in the epoch
    global_step: int = 0  # optimizer updates done in the run
    best_fitness: float = -1.0  # the best evaluation's fitness so far (-1: none yet)
    metrics: Dict[str, Any] = field(default_factory=dict)  # the last evaluation's numbers (scalars only)
    # The last update: its learning rate and its numbers (None until an update ran in this process).
    lr: float = 0.0
    step_log: Optional[StepLog] = None
    # The epoch just done.
    epoch_losses: Dict[str, float] = field(default_factory=dict)  # box_loss, obj_loss, cls_loss, loss (all processes)
    epoch_metrics: Dict[str, Any] = field(default_factory=dict)  # its evaluation ({} when not evaluated)
    is_best: bool = False  # its evaluation is the best so far: best.pt is written
    epoch_start: float = 0.0  # time.perf_counter() at its first update
    epoch_split: EpochTimeSplit = field(default_factory=lambda: EpochTimeSplit(0.0, 0.0, 0.0, 0.0))
    epoch_images: int = 0  # images its updates trained on (all processes)
    throughput: float = 0.0  # of its updates, images per second (all processes)

    def record_evaluation(self, metrics: Dict[str, Any]) -> None:
        """The epoch's evaluation (``{}``: not evaluated): ``epoch_metrics``, ``is_best``, ``best_fitness`` and,
        when evaluated, ``metrics`` (its scalars, saved in checkpoints)."""
        self.epoch_metrics = metrics
        self.is_best = bool(metrics) and fitness(metrics) > self.best_fitness
        if self.is_best:
            self.best_fitness = fitness(metrics)
        if metrics:
            self.metrics = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}


__all__ = ["StepLog", "TrainState", "fitness"]
