"""A plain function as a hook: ``trainer.add_callback("step_end", fn)`` runs ``fn(trainer)`` after each update.

The events and the hook method each one is: ``train_start`` (:meth:`HookBase.before_train`, after the parts are
built and a resumed run's state loaded), ``step_end`` (:meth:`HookBase.after_step`, after each optimizer update)
and ``epoch_end`` (:meth:`HookBase.after_epoch`, after the epoch's evaluation and checkpoints when the callback
is added after the built-in hooks, as :meth:`yolo.engine.trainer.Trainer.add_callback` does). Callbacks run on
every process; ``trainer.request_stop()`` in one ends the run at the next update boundary with a checkpoint.
"""
from __future__ import annotations

from typing import Callable

from yolo.engine.hooks.base import HookBase

EVENTS = ("train_start", "step_end", "epoch_end")


class CallbackHook(HookBase):
    """``fn(trainer)`` at ``event`` (one of :data:`EVENTS`)."""

    def __init__(self, event: str, fn: Callable[..., None]):
        if event not in EVENTS:
            raise ValueError(f"unknown training event {event!r}: one of {', '.join(EVENTS)}")
        self.event, self.fn = event, fn

    def before_train(self, trainer) -> None:
        if self.event == "train_start":
            self.fn(trainer)

    def after_step(self, trainer) -> None:
        if self.event == "step_end":
            self.fn(trainer)

    def after_epoch(self, trainer) -> None:
        if self.event == "epoch_end":
            self.fn(trainer)


__all__ = ["CallbackHook", "EVENTS"]
