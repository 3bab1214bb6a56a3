"""A plain function as a hook: ``trainer.add_callback("after_step", fn)`` runs ``fn(trainer)`` after each update.

An event is the name of the hook method it runs in: ``before_train`` (:meth:`HookBase.before_train`, after the
parts are built and a resumed run's state loaded), ``after_step`` (:meth:`HookBase.after_step`, after each
optimizer update) and ``after_epoch`` (:meth:`HookBase.after_epoch`, after the epoch's evaluation and checkpoints
when the callback is added after the built-in hooks, as :meth:`yolo.engine.trainer.Trainer.add_callback` does).
The earlier names ``train_start``, ``step_end`` and ``epoch_end`` still work, with a ``DeprecationWarning``.
Callbacks run on every process; ``trainer.request_stop()`` in one ends the run at the next update boundary with a
checkpoint.
"""
from __future__ import annotations

import warnings
from typing import Callable

from yolo.engine.hooks.base import HookBase

EVENTS = ("before_train", "after_step", "after_epoch")
# The events' earlier names (before they were named after the hook methods) -> their names now.
RENAMED_EVENTS = {"train_start": "before_train", "step_end": "after_step", "epoch_end": "after_epoch"}


class CallbackHook(HookBase):
    """``fn(trainer)`` at ``event`` (one of :data:`EVENTS`; an earlier name of :data:`RENAMED_EVENTS` warns)."""

    def __init__(self, event: str, fn: Callable[..., None]):
        if event in RENAMED_EVENTS:
            warnings.warn(f"the training event {event!r} is now named {RENAMED_EVENTS[event]!r} (the hook method "
                          f"it runs in); {event!r} will stop working in a later version", DeprecationWarning,
                          stacklevel=3)
            event = RENAMED_EVENTS[event]
        if event not in EVENTS:
            raise ValueError(f"unknown training event {event!r}: one of {', '.join(EVENTS)}")
        self.event, self.fn = event, fn

    def before_train(self, trainer) -> None:
        if self.event == "before_train":
            self.fn(trainer)

    def after_step(self, trainer) -> None:
        if self.event == "after_step":
            self.fn(trainer)

    def after_epoch(self, trainer) -> None:
        if self.event == "after_epoch":
            self.fn(trainer)


__all__ = ["CallbackHook", "EVENTS", "RENAMED_EVENTS"]
