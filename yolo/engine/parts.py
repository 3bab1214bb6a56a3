"""What a :class:`yolo.engine.trainer.Trainer` is given: the built parts of one training run.

:func:`yolo.engine.build.build_training` makes them from a cfg and a dataset YAML (``TrainOptions``); a test or a
script may make them by hand. Only the first group is required: a model, its optimizer, a learning-rate
schedule, a criterion, the batches and the run's plan (with ``hyp`` for the update's settings).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, List, Optional

import torch
import torch.nn as nn

from yolo.engine.config import Hyperparameters, TrainOptions
from yolo.engine.distributed import DistInfo
from yolo.engine.ema import ModelEMA
from yolo.engine.epoch_batches import Batches
from yolo.engine.hooks.base import HookBase
from yolo.engine.hooks.checkpointing import ResumeState
from yolo.engine.step_precision import StepPrecision
from yolo.ops.sizes import ImageSize


@dataclass
class RunPlan:
    """The run's length and shape: ``epochs`` of ``steps_per_epoch`` optimizer updates, each of ``accumulate``
    mini-batches (Darknet's subdivisions) of ``mini_batch`` images per process."""

    epochs: int
    steps_per_epoch: int
    accumulate: int = 1
    mini_batch: int = 1
    img_size: ImageSize = (0, 0)  # (height, width) the train images load at
    workers: int = 0  # data-loading processes (also the evaluation's)

    @property
    def total_steps(self) -> int:
        return self.epochs * self.steps_per_epoch


@dataclass
class TrainingParts:
    """One run's parts (see the module docstring). The four left None are filled when made: ``train_model`` and
    ``forward`` with ``model``, ``precision`` with float32 NCHW on ``device``, ``scaler`` with a disabled one."""

    model: nn.Module  # unwrapped (a Darknet for the built run)
    optimizer: torch.optim.Optimizer
    schedule: Callable[[int], float]  # update number (1-based) -> learning rate
    criterion: Callable  # (outputs, targets Float[M, 6], (h, w)) -> (loss per image, parts); YoloLoss
    batches: Batches  # (epoch, first update) -> that epoch's mini-batches from there
    plan: RunPlan
    hyp: Hyperparameters = field(default_factory=Hyperparameters)  # batch, max_grad_norm, evaluation settings
    options: TrainOptions = field(default_factory=TrainOptions)  # freeze, seed, progress; saved in checkpoints
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dist: DistInfo = field(default_factory=DistInfo)
    precision: Optional[StepPrecision] = None  # None: float32 NCHW, no autocast
    scaler: Optional[torch.amp.GradScaler] = None  # None: disabled (no AMP)
    ema: Optional[ModelEMA] = None
    train_model: Optional[nn.Module] = None  # the model, or its DDP wrapper
    forward: Optional[Callable] = None  # train_model, or it through torch.compile
    hooks: List[HookBase] = field(default_factory=list)  # in the order they run
    start: ResumeState = field(default_factory=ResumeState)  # where the run goes on from
    run_dir: Optional[Path] = None  # where the hooks write (None: nowhere)
    data: Any = None  # yolo.data.DataConfig: class names, val split (for evaluation and checkpoints)
    train_set: Any = None
    val_set: Any = None
    writer: Any = None  # the TensorBoard SummaryWriter the evaluation writes its curves to

    def __post_init__(self):
        # Resolved once, here, so that the step (yolo.engine.update_step) reads every part as it is.
        if self.train_model is None:
            self.train_model = self.model
        if self.forward is None:
            self.forward = self.train_model
        if self.precision is None:
            self.precision = StepPrecision(self.device.type, amp=False, channels_last=False, tf32=False,
                                           compile=False)
        if self.scaler is None:
            self.scaler = torch.amp.GradScaler("cuda", enabled=False)


__all__ = ["RunPlan", "TrainingParts"]
