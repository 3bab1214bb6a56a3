"""The per-update work of training: :class:`StepRunner`.

:meth:`StepRunner.run` is one mini-batch (forward, loss, backward) and, at an update's last mini-batch, the
update's one CPU-GPU sync (:meth:`StepRunner._fetch_update`) and Darknet's update
(:meth:`StepRunner._optimizer_step`). It is made from the run's :class:`yolo.engine.parts.TrainingParts` and reads
the parts it uses there (model, optimizer, schedule, criterion, scaler, EMA, ...: one copy of each, the trainer's
``trainer.parts``), keeping only the step's own values (the epoch's loss sums, the update's losses); it advances
the run's :class:`yolo.engine.train_state.TrainState` (``global_step``, ``lr``, ``step_log``); the trainer
(:class:`yolo.engine.trainer.Trainer`) gives it the batches and runs the hooks.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Optional, Tuple

import torch
import torch.distributed
import torch.nn as nn

from yolo.engine.optimizer import clip_weights, hold_gradients, holds_gradients
from yolo.engine.parts import TrainingParts
from yolo.engine.schedule import set_lr
from yolo.engine.stop import StopRequest
from yolo.engine.train_state import StepLog, TrainState
from yolo.errors import NonFiniteLossError


class StepRunner:
    """Forward, loss, backward, accumulation over ``plan.accumulate`` mini-batches and the optimizer (and
    GradScaler) step of the run ``parts`` (:class:`yolo.engine.parts.TrainingParts`) describes.

    It reads what it uses from ``parts`` at each step: ``model`` (unwrapped), ``train_model`` (the module it runs:
    its DDP wrapper or the model), ``forward`` (how it is called: ``train_model`` through ``torch.compile`` or
    ``train_model``), ``criterion``, ``optimizer``, ``schedule``, ``scaler``, ``ema``, ``precision``, ``device``,
    ``dist``, ``hyp.max_grad_norm``; ``plan.steps_per_epoch`` and ``plan.epochs`` place a mini-batch in the run
    (Darknet's ``[region]`` counts the images seen) and name it in errors, with the ``last.pt`` of ``run_dir``.
    It advances ``state`` (``global_step``, ``lr``, ``step_log``) and reads ``stop`` at each update under DDP,
    so that every process stops at the same one.

    Holds only the step's own values, on the device: ``loss_sums`` (Float64[4]: box, obj, cls, mini-batches of
    the epoch so far, this process's), ``update_losses`` (Float64[accumulate, 4]: loss, box, obj, cls of the
    update's mini-batches), ``sums_at_update`` (``loss_sums`` at the last update; None when ``accumulate`` is 1)
    and the gradients held for layers Darknet does not update yet; and the two flags the update's fetch brings.
    """

    def __init__(self, parts: TrainingParts, state: TrainState, stop: StopRequest):
        self.parts, self.state, self.stop = parts, state, stop
        accumulate, device = parts.plan.accumulate, parts.device
        self.held_gradients: Dict[torch.Tensor, torch.Tensor] = {}  # layers Darknet does not update yet
        self.loss_sums = torch.zeros(4, dtype=torch.float64, device=device)
        self.update_losses = torch.zeros(accumulate, 4, dtype=torch.float64, device=device)
        self.sums_at_update: Optional[torch.Tensor] = None  # loss_sums at the last update (accumulate > 1)
        self.grads_non_finite = False  # AMP: the update's gradients overflowed (fetched by _fetch_update)
        self.stop_everywhere = False  # DDP: a process asked to stop (fetched by _fetch_update)

    def eval_model(self) -> nn.Module:
        """The model evaluated and saved: the EMA's when on, else the training model."""
        return self.parts.ema.module if self.parts.ema is not None else self.parts.model

    # ---------------------------------------------------------------- the epoch's sums
    def start_epoch(self, resumed_sums: Optional[torch.Tensor] = None) -> None:
        """Zero the epoch's loss sums, or start them from a resumed run's (saved mid-epoch)."""
        parts = self.parts
        self.loss_sums = torch.zeros(4, dtype=torch.float64, device=parts.device)
        if resumed_sums is not None:
            self.loss_sums += resumed_sums.to(parts.device)
        self.sums_at_update = self.loss_sums.clone() if parts.plan.accumulate > 1 else None
        parts.optimizer.zero_grad(set_to_none=True)

    def drop_unfinished_update(self) -> None:
        """The run stops in the middle of an update: the sums go back to its start (what a checkpoint saves)."""
        if self.sums_at_update is not None:
            self.loss_sums = self.sums_at_update

    # ---------------------------------------------------------------- one mini-batch
    def run(self, images: torch.Tensor, targets: torch.Tensor, b: int) -> bool:
        """Mini-batch ``b`` of the epoch: forward, loss, backward; at the last mini-batch of an update (a
        ``subdivisions`` boundary) the non-finite check and Darknet's update. Returns whether it updated.

        ``images``: ``UInt8[B, 3, H, W]`` RGB (or ``Float[B, 3, H, W]`` 0..1); ``targets``: ``Float[M, 6]`` rows
        (image index, class, cx, cy, w, h) in pixels of H x W (:mod:`yolo.data.collate`).
        """
        parts = self.parts
        accumulate, dist = parts.plan.accumulate, parts.dist
        images = parts.precision.images_to(images, parts.device)
        # The targets stay on the CPU: the loss assigns them there and copies only what the GPU needs, so that
        # the update's one sync stays the only one (yolo.losses.targets).
        size_hw = tuple(images.shape[-2:])
        slot = b % accumulate
        last_of_update = slot == accumulate - 1
        # DDP averages the gradients over the processes in the backward of an update's last mini-batch only.
        sync = last_of_update or not dist.enabled
        with parts.train_model.no_sync() if not sync else contextlib.nullcontext():
            with parts.precision.autocast():
                outputs = parts.forward(images)
            # Darknet's [region] prior term depends on the images seen so far, this batch included.
            minibatch = self.state.epoch * parts.plan.steps_per_epoch * accumulate + b
            images_seen = (minibatch + 1) * images.shape[0] * dist.world_size
            loss, terms = parts.criterion(outputs, targets, size_hw, images_seen=images_seen)
            parts.scaler.scale(loss / accumulate).backward()
        # On the device (no sync): this mini-batch's losses for the check, and the epoch's sums.
        losses = torch.stack([v.detach().to(torch.float64) for v in (loss, terms["box"], terms["obj"], terms["cls"])])
        self.update_losses[slot] = losses
        self.loss_sums[:3] += losses[1:]
        self.loss_sums[3] += 1
        if not last_of_update:
            return False
        self._fetch_update(b, size_hw, terms["num_targets"])
        self._optimizer_step()
        if self.sums_at_update is not None:
            self.sums_at_update = self.loss_sums.clone()
        return True

    def after_update(self) -> None:
        """What follows an update outside the step proper (the epoch's clock counts it apart): the EMA."""
        if self.parts.ema is not None:
            self.parts.ema.update(self.parts.model)

    # ---------------------------------------------------------------- the update
    def _fetch_update(self, b: int, size_hw: Tuple[int, int], num_targets: int) -> None:
        """The update's one CPU-GPU sync, deliberately before the optimizer step: stop on a non-finite loss
        in any of its mini-batches (on any process) before it reaches the weights, naming the first one;
        else ``state.step_log`` for the writers. It cannot wait longer (the step would apply the non-finite
        gradients) and need not come sooner (gradients are only accumulated until then).

        The same read brings, with AMP, whether the unscaled gradients overflowed (the GradScaler then skips
        the step, as its own ``step`` would, without a second sync) and, with DDP, whether any process was
        asked to stop."""
        parts = self.parts
        k, ddp = parts.plan.accumulate, parts.dist.enabled
        bad = (~torch.isfinite(self.update_losses[:, 0])).to(torch.float64)
        if ddp:  # a non-finite loss on one process stops them all, at the same mini-batch
            stop = torch.full((1,), float(self.stop.requested), dtype=torch.float64, device=parts.device)
            bad = torch.cat([bad, stop])
            torch.distributed.all_reduce(bad, op=torch.distributed.ReduceOp.MAX)
        extra = [self._gradient_overflow()] if parts.precision.amp else []
        numbers = torch.cat([bad, self.update_losses.flatten(), self.loss_sums, *extra]).tolist()
        if ddp:
            self.stop_everywhere = numbers.pop(k) > 0
        self.grads_non_finite = bool(extra) and numbers[-1] > 0
        flags, rows, sums = numbers[:k], numbers[k:5 * k], numbers[5 * k:5 * k + 4]
        if any(flags):
            first = flags.index(1.0)
            self._non_finite(b - (k - 1) + first, *rows[4 * first:4 * first + 4])
        n = max(sums[3], 1.0)
        loss, box, obj, cls = rows[-4:]
        self.state.step_log = StepLog(box=box, obj=obj, cls=cls, loss=loss, mean_box=sums[0] / n,
                                      mean_obj=sums[1] / n, mean_cls=sums[2] / n, size_hw=size_hw,
                                      num_targets=num_targets)

    def _gradient_overflow(self) -> torch.Tensor:
        """AMP: unscale the update's gradients now (as ``GradScaler.step`` would) and return, on the device,
        Float64[1] > 0 when any is inf/NaN: what ``GradScaler.step`` finds (and ``update`` reads) in the same
        unscaled gradients, the optimizer's, computed here on the device so that it comes with the update's one
        sync instead of the ``.item()`` of ``GradScaler.step``."""
        optimizer = self.parts.optimizer
        self.parts.scaler.unscale_(optimizer)
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        largest = nn.utils.get_total_norm(grads, norm_type=float("inf"))  # inf or NaN when any gradient is
        return (~torch.isfinite(largest)).to(self.parts.device, torch.float64).reshape(1)

    def _optimizer_step(self) -> None:
        """Darknet's update: the learning rate of update ``global_step``, gradients held for layers not updated
        yet (``dont_update``/``burnin_update``), optional norm clipping, the step, weight clipping (the EMA follows
        in :meth:`after_update`)."""
        state, parts = self.state, self.parts
        optimizer, scaler, max_grad_norm = parts.optimizer, parts.scaler, parts.hyp.max_grad_norm
        state.global_step += 1
        state.lr = parts.schedule(state.global_step)
        set_lr(optimizer, state.lr)
        # With AMP the gradients were unscaled by _fetch_update; without it the scaler is disabled (unscaled).
        if holds_gradients(optimizer, state.global_step, self.held_gradients):
            hold_gradients(optimizer, state.global_step, self.held_gradients)
        if max_grad_norm:
            nn.utils.clip_grad_norm_(parts.model.parameters(), max_grad_norm)
        if scaler.is_enabled():  # GradScaler.step without its sync: the overflow flag came with the losses
            if not self.grads_non_finite:
                optimizer.step()
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        clip_weights(optimizer, state.global_step)

    def _non_finite(self, b: int, loss: float, box: float, obj: float, cls: float) -> None:
        state, plan, run_dir = self.state, self.parts.plan, self.parts.run_dir
        last = run_dir / "last.pt" if run_dir is not None else None
        kept = (f"the last good checkpoint is {last}" if last is not None and last.exists()
                else "no checkpoint was written yet")
        message = (f"non-finite loss ({loss:.4g}; box {box:.4g}, obj {obj:.4g}, cls {cls:.4g}) at epoch "
                   f"{state.epoch + 1}/{plan.epochs}, iteration {b + 1} (update {state.epoch_step + 1}/"
                   f"{plan.steps_per_epoch} of the epoch, {state.global_step + 1} overall, lr {state.lr:.3g}): "
                   f"training stopped; {kept}. Lower learning_rate or lengthen burn_in, and check the data.")
        raise NonFiniteLossError(message)  # reported once, by whoever catches it (tools/train.py: its error line)


__all__ = ["StepRunner"]
