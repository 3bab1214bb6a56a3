"""The hook interface of :class:`yolo.engine.trainer.Trainer` (detectron2's ``HookBase``, with epochs).

The trainer's loop only trains (:meth:`Trainer.run_step`: forward, loss, backward, Darknet's update);
everything around it (progress lines, results.csv, TensorBoard, evaluation, checkpoints) is a hook. Each
method receives the trainer and reads its state (``epoch``, ``epoch_step``, ``global_step``, ``lr``,
``step_log``, ``loss_sums``, ``epoch_metrics``, ...). Hooks run in the order the trainer lists them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple


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


class HookBase:
    """No-op methods; a hook overrides the ones it needs."""

    def before_epoch(self, trainer) -> None:
        """Before the first update of an epoch (``trainer.epoch_step`` is where it starts on resume)."""

    def after_step(self, trainer) -> None:
        """After each optimizer update; ``trainer.step_log`` holds its numbers (on the CPU)."""

    def after_epoch_updates(self, trainer) -> None:
        """After an epoch's last update, before evaluation (``trainer.throughput`` is set)."""

    def after_epoch(self, trainer) -> None:
        """After an epoch, its losses summed over every process in ``trainer.loss_sums``."""

    def after_interrupt(self, trainer) -> None:
        """A stop was requested mid-epoch, at an update boundary: the run ends after this."""

    def close(self) -> None:
        """The run ended (normally or not): release files."""


__all__ = ["HookBase", "StepLog"]
