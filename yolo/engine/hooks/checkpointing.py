"""Checkpoints: ``best.pt`` then ``last.pt`` after every epoch, ``last.pt`` when a stop is requested mid-epoch
(after an epoch's last update or during its evaluation: ``epoch_step`` is then the epoch's update count, and a
resumed run evaluates the epoch first).

A training checkpoint holds what a resumed run needs to continue bit for bit: the training weights, the EMA
weights (saved as the model), optimizer, GradScaler, update counters, the position in the epoch with the
epoch's loss sums so far, the best fitness and the last evaluation's metrics (the saved part of
:class:`yolo.engine.train_state.TrainState`), the torch / numpy / Python RNG states (:mod:`yolo.engine.rng`) and
the hooks' states (``hooks``: :meth:`yolo.engine.hooks.base.HookBase.state_dict` by ``state_key``),
and what the run's dataset was (``dataset``: :func:`yolo.engine.dataset_record.dataset_record`, made once when
the run is built; a resume refuses another).
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Dict, Optional

from yolo.engine.hooks.base import HookBase
from yolo.engine.rng import rng_state
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.models.preprocessing import training_preprocessing

logger = logging.getLogger(__name__)


class CheckpointHook(HookBase):
    """Saves after each epoch (``best.pt`` when ``trainer.state.is_best``) and at a requested stop, with
    ``dataset``, the run's dataset record, in each checkpoint (None: none)."""

    def __init__(self, dataset: Optional[Dict[str, Any]] = None):
        self.dataset = dataset

    def after_epoch(self, trainer) -> None:
        save(trainer, best=trainer.state.is_best, dataset=self.dataset)

    def after_interrupt(self, trainer) -> None:
        save(trainer, best=False, dataset=self.dataset)
        last = trainer.parts.run_dir / "last.pt"
        state, steps = trainer.state, trainer.parts.plan.steps_per_epoch
        # how to continue is said once, by the caller (tools/train.py names the command the user ran)
        pending = " (its evaluation is left to the resumed run)" if state.epoch_step == steps else ""
        logger.warning("stopped at epoch %d, update %d/%d%s; saved %s", state.epoch + 1, state.epoch_step, steps,
                       pending, last)


def save(trainer, best: bool, dataset: Optional[Dict[str, Any]] = None) -> None:
    """Write ``best.pt`` (when ``best``) and then ``last.pt``, each atomically.

    The order makes a kill at any point recoverable: ``last.pt`` records the best score, so it must
    never reach the disk before the ``best.pt`` holding that score. A kill between the two leaves the
    previous ``last.pt``; resuming from it repeats the epoch and writes both again. A second Ctrl-C waits for the
    end of the saves (:meth:`yolo.engine.stop.StopRequest.deferred`).
    """
    stop = getattr(trainer, "stop_request", None)
    with stop.deferred() if stop is not None else contextlib.nullcontext():
        ckpt = training_checkpoint(trainer, dataset)
        if best:
            save_checkpoint(ckpt, trainer.parts.run_dir / "best.pt")
        save_checkpoint(ckpt, trainer.parts.run_dir / "last.pt")


def training_checkpoint(trainer, dataset: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The checkpoint dict: the evaluated model (EMA when on) with ``train`` holding the training state
    (``dataset``: the run's dataset record, when known)."""
    t, state, step = trainer.parts, trainer.state, trainer.step_runner
    train_state = {
        "model": {k: v.detach().cpu().contiguous() for k, v in step.model.state_dict().items()},  # NCHW on disk
        "optimizer": step.optimizer.state_dict(),
        "scaler": step.scaler.state_dict() if step.amp else None,
        "ema": step.ema.state_dict() if step.ema is not None else None,
        "epoch": state.epoch,
        "epoch_step": state.epoch_step,
        "global_step": state.global_step,
        "best_fitness": state.best_fitness,
        "metrics": state.metrics,
        "hooks": trainer.hooks_state(),
        "rng": rng_state(),
        # float64 (box, obj, cls, mini-batches) of the epoch so far; .cpu() syncs, once per save
        "epoch_sums": step.loss_sums.to("cpu", copy=True) if state.epoch_step else None,
        "options": t.options.to_dict() | {"hyp": None},
        "hyp": t.hyp.to_dict(),
        "dataset": dataset,
    }
    preprocessing = training_preprocessing(t.hyp.augment, tuple(t.plan.img_size))
    return model_checkpoint(step.eval_model(), names=t.data.names, train=train_state, epoch=state.epoch,
                            metrics=state.metrics, preprocessing=preprocessing)


__all__ = ["CheckpointHook", "save", "training_checkpoint"]
