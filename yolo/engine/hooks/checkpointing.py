"""Checkpoints: ``best.pt`` then ``last.pt`` after every epoch, ``last.pt`` when a stop is requested mid-epoch
(after an epoch's last update or during its evaluation: ``epoch_step`` is then the epoch's update count, and a
resumed run evaluates the epoch first).

A training checkpoint holds what a resumed run needs to continue bit for bit: the training weights, the EMA
weights (saved as the model), optimizer, GradScaler, update counters, the position in the epoch with the
epoch's loss sums so far, the torch / numpy / Python RNG states (:mod:`yolo.engine.rng`) and the hooks' states
(``hooks``: :meth:`yolo.engine.hooks.base.HookBase.state_dict` by ``state_key``; ``best_fitness`` is also kept
at the top, where checkpoints written before the hooks had states hold it), and what the run's dataset was
(``dataset``: :func:`yolo.engine.dataset_record.dataset_record`; a resume refuses another).
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Dict, Optional

from yolo.engine.dataset_record import dataset_record
from yolo.engine.hooks.base import HookBase
from yolo.engine.rng import rng_state
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.models.preprocessing import training_preprocessing

logger = logging.getLogger(__name__)


class CheckpointHook(HookBase):
    """Saves after each epoch (``best.pt`` when ``trainer.is_best``) and at a requested stop."""

    def __init__(self):
        self.dataset: Optional[Dict[str, Any]] = None  # the run's dataset record, made at the first save

    def after_epoch(self, trainer) -> None:
        save(trainer, best=trainer.is_best, dataset=self._dataset(trainer))

    def after_interrupt(self, trainer) -> None:
        save(trainer, best=False, dataset=self._dataset(trainer))
        last = trainer.run_dir / "last.pt"
        # how to continue is said once, by the caller (tools/train.py names the command the user ran)
        pending = " (its evaluation is left to the resumed run)" if trainer.epoch_step == trainer.steps_per_epoch \
            else ""
        logger.warning("stopped at epoch %d, update %d/%d%s; saved %s", trainer.epoch + 1, trainer.epoch_step,
                       trainer.steps_per_epoch, pending, last)

    def _dataset(self, trainer) -> Optional[Dict[str, Any]]:
        if self.dataset is None and trainer.data is not None and trainer.train_set is not None:
            self.dataset = dataset_record(trainer.data, trainer.train_set, trainer.val_set)
        return self.dataset


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
            save_checkpoint(ckpt, trainer.run_dir / "best.pt")
        save_checkpoint(ckpt, trainer.run_dir / "last.pt")


def training_checkpoint(trainer, dataset: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The checkpoint dict: the evaluated model (EMA when on) with ``train`` holding the training state
    (``dataset``: the run's dataset record, when known)."""
    t = trainer
    train_state = {
        "model": {k: v.detach().cpu().contiguous() for k, v in t.model.state_dict().items()},  # NCHW on disk
        "optimizer": t.optimizer.state_dict(),
        "scaler": t.scaler.state_dict() if t.amp else None,
        "ema": t.ema.state_dict() if t.ema is not None else None,
        "epoch": t.epoch,
        "epoch_step": t.epoch_step,
        "global_step": t.global_step,
        "best_fitness": t.best_fitness,
        "metrics": t.last_metrics,
        "hooks": t.hooks_state(),
        "rng": rng_state(),
        # float64 (box, obj, cls, mini-batches) of the epoch so far; .cpu() syncs, once per save
        "epoch_sums": t.loss_sums.to("cpu", copy=True) if t.epoch_step else None,
        "options": t.options.to_dict() | {"hyp": None},
        "hyp": t.hyp.to_dict(),
        "dataset": dataset,
    }
    return model_checkpoint(t.eval_model(), names=t.data.names, train=train_state, epoch=t.epoch,
                            metrics=t.last_metrics, preprocessing=training_preprocessing(t.hyp.augment, t.img_size))


__all__ = ["CheckpointHook", "save", "training_checkpoint"]
