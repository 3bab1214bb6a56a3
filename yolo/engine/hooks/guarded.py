"""Reporting hooks (progress lines, TensorBoard, sample drawings) never end a run.

:class:`Guarded` wraps one: an exception in it is logged as one warning (its first failure; later ones at
debug level) and the training goes on. A stop request (``KeyboardInterrupt``) still
passes through. Hooks the run's state depends on (evaluation, ``results.csv``, checkpoints) are not wrapped:
their failure must stop the run.
"""
from __future__ import annotations

import logging
from typing import Any, Dict

from yolo.engine.hooks.base import HookBase
from yolo.output_pipe import discard_output

logger = logging.getLogger(__name__)


class Guarded(HookBase):
    """``hook`` with every failure turned into a warning; ``what`` names it in that warning."""

    def __init__(self, hook: HookBase, what: str):
        self.hook, self.what = hook, what
        self.warned = False

    def _call(self, method: str, *args) -> None:
        try:
            getattr(self.hook, method)(*args)
        except BrokenPipeError:  # the reader of the output has gone (``| head``): the rest is discarded
            discard_output()
        except Exception as exc:  # any failure of a report, never of the training itself
            trainer = args[0] if args else None
            where = f" in epoch {trainer.state.epoch + 1}" if trainer is not None else ""
            level = logging.DEBUG if self.warned else logging.WARNING
            self.warned = True
            message = " ".join(str(exc).split())[:300]
            logger.log(level, "the %s failed%s (%s: %s); the training goes on without it", self.what,
                       where, type(exc).__name__, message)

    def before_train(self, trainer) -> None:
        self._call("before_train", trainer)

    def before_epoch(self, trainer) -> None:
        self._call("before_epoch", trainer)

    def after_step(self, trainer) -> None:
        self._call("after_step", trainer)

    def after_epoch_updates(self, trainer) -> None:
        self._call("after_epoch_updates", trainer)

    def after_epoch(self, trainer) -> None:
        self._call("after_epoch", trainer)

    def after_interrupt(self, trainer) -> None:
        self._call("after_interrupt", trainer)

    def close(self) -> None:
        self._call("close")

    # The state is the wrapped hook's, under its name; saving and restoring it are not guarded (a resume must
    # not go on without it).
    def state_dict(self) -> Dict[str, Any]:
        return self.hook.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.hook.load_state_dict(state)

    @property
    def state_key(self) -> str:
        return self.hook.state_key


__all__ = ["Guarded"]
