"""The hook interface of :class:`yolo.engine.trainer.Trainer` (detectron2's ``HookBase``, with epochs).

The trainer's loop only trains (:class:`yolo.engine.update_step.StepRunner`: forward, loss, backward, Darknet's
update);
everything around it (progress lines, results.csv, TensorBoard, evaluation, checkpoints, a user's function
through :class:`yolo.engine.hooks.callbacks.CallbackHook`) is a hook. Each method receives the trainer and reads
``trainer.state`` (:class:`yolo.engine.train_state.TrainState`: ``epoch``, ``epoch_step``, ``global_step``,
``lr``, ``step_log``, ``epoch_losses``, ``epoch_metrics``, ...) and ``trainer.parts.plan`` (the run's length and
shape); a hook is handed what else it needs when it is made (the evaluation hook its ``evaluate`` function).
Hooks write nothing into the trainer but the evaluation hook, which records its result in ``trainer.state``;
they run in the order of ``trainer.hooks``.

A hook that holds state a resumed run needs (a count of its own, say) returns it from :meth:`state_dict`;
the checkpoint keeps it under ``train["hooks"][hook.state_key]`` and a resumed trainer hands it back to
:meth:`load_state_dict` before :meth:`before_train`.
"""
from __future__ import annotations

from typing import Any, Dict

from yolo.engine.train_state import StepLog


class HookBase:
    """No-op methods; a hook overrides the ones it needs."""

    def before_train(self, trainer) -> None:
        """Once, before the first update (the parts are built, a resumed run's state is loaded)."""

    def before_epoch(self, trainer) -> None:
        """Before the first update of an epoch (``trainer.state.epoch_step`` is where it starts on resume)."""

    def after_step(self, trainer) -> None:
        """After each optimizer update; ``trainer.state.step_log`` holds its numbers (on the CPU)."""

    def after_epoch_updates(self, trainer) -> None:
        """After an epoch's last update, before evaluation (``trainer.state.throughput`` is set)."""

    def after_epoch(self, trainer) -> None:
        """After an epoch (``trainer.state.epoch`` counts it), its mean losses over every process in
        ``trainer.state.epoch_losses``."""

    def after_interrupt(self, trainer) -> None:
        """The run stops here: after an update, after the epoch's updates with its evaluation dropped, or at the
        last completed update when a loader worker died; ``last.pt`` is written by the checkpoint hook."""

    def close(self) -> None:
        """The run ended (normally or not): release files."""

    def state_dict(self) -> Dict[str, Any]:
        """What a resumed run needs to go on as this hook would have (plain values; empty: nothing)."""
        return {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Take back what :meth:`state_dict` returned (on resume, before :meth:`before_train`)."""

    @property
    def state_key(self) -> str:
        """The name its state is saved under in a checkpoint: the class name."""
        return type(self).__name__


__all__ = ["HookBase", "StepLog"]
