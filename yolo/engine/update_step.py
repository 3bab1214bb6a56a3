"""One optimizer update of the trainer: :meth:`UpdateStep.run_step` is one mini-batch (forward, loss, backward)
and, at an update's last mini-batch, the update's one CPU-GPU sync (:meth:`UpdateStep._fetch_update`) and
Darknet's update (:meth:`UpdateStep._optimizer_step`).

:class:`yolo.engine.trainer.Trainer` is an ``UpdateStep``; the methods read only the attributes they name
(``model``, ``optimizer``, ``scaler``, ``schedule``, ``accumulate``, ...), so that a test may run them on a bare
namespace of those attributes.
"""
from __future__ import annotations

import contextlib
from typing import Tuple

import torch
import torch.distributed
import torch.nn as nn

from yolo.engine.hooks import StepLog
from yolo.engine.optimizer import clip_weights, hold_gradients, holds_gradients
from yolo.engine.schedule import set_lr
from yolo.errors import NonFiniteLossError
from yolo.losses.region_loss import set_images_seen


class UpdateStep:
    """The training step's methods (see the module docstring)."""

    def run_step(self, images: torch.Tensor, targets: torch.Tensor, b: int) -> bool:
        """Mini-batch ``b`` of the epoch: forward, loss, backward; at the last mini-batch of an update (a
        ``subdivisions`` boundary) the non-finite check and Darknet's update. Returns whether it updated.

        ``images``: ``UInt8[B, 3, H, W]`` RGB (or ``Float[B, 3, H, W]`` 0..1); ``targets``: ``Float[M, 6]`` rows
        (image index, class, cx, cy, w, h) in pixels of H x W (:mod:`yolo.data.collate`).
        """
        images = self.precision.images_to(images, self.device)
        targets = targets.to(self.device, non_blocking=True)  # pinned on CUDA: no wait for the copy
        size_hw = tuple(images.shape[-2:])
        slot = b % self.accumulate
        last_of_update = slot == self.accumulate - 1
        # DDP averages the gradients over the processes in the backward of an update's last mini-batch only.
        sync = last_of_update or not self.dist.enabled
        with self.train_model.no_sync() if not sync else contextlib.nullcontext():
            with self.precision.autocast():
                outputs = self.forward(images)
            # Darknet's [region] prior term depends on the images seen so far, this batch included.
            minibatch = self.epoch * self.steps_per_epoch * self.accumulate + b
            set_images_seen(self.model, (minibatch + 1) * images.shape[0] * self.dist.world_size)
            loss, parts = self.criterion(outputs, targets, size_hw)
            self.scaler.scale(loss / self.accumulate).backward()
        # On the device (no sync): this mini-batch's losses for the check, and the epoch's sums.
        losses = torch.stack([v.detach().to(torch.float64) for v in (loss, parts["box"], parts["obj"], parts["cls"])])
        self.update_losses[slot] = losses
        self.loss_sums[:3] += losses[1:]
        self.loss_sums[3] += 1
        if not last_of_update:
            return False
        self._fetch_update(b, size_hw, parts["num_targets"])
        self._optimizer_step()
        return True

    def _fetch_update(self, b: int, size_hw: Tuple[int, int], num_targets: int) -> None:
        """The update's one CPU-GPU sync, deliberately before the optimizer step: stop on a non-finite loss
        in any of its mini-batches (on any process) before it reaches the weights, naming the first one;
        else ``self.step_log`` for the writers. It cannot wait longer (the step would apply the non-finite
        gradients) and need not come sooner (gradients are only accumulated until then).

        The same read brings, with AMP, whether the unscaled gradients overflowed (the GradScaler then skips
        the step, as its own ``step`` would, without a second sync) and, with DDP, whether any process was
        asked to stop."""
        k = self.accumulate
        bad = (~torch.isfinite(self.update_losses[:, 0])).to(torch.float64)
        if self.dist.enabled:  # a non-finite loss on one process stops them all, at the same mini-batch
            stop = torch.full((1,), float(self._stop_requested), dtype=torch.float64, device=self.device)
            bad = torch.cat([bad, stop])
            torch.distributed.all_reduce(bad, op=torch.distributed.ReduceOp.MAX)
        extra = [self._gradient_overflow()] if self.amp else []
        numbers = torch.cat([bad, self.update_losses.flatten(), self.loss_sums, *extra]).tolist()
        if self.dist.enabled:
            self._stop_everywhere = numbers.pop(k) > 0
        self._grads_non_finite = bool(extra) and numbers[-1] > 0
        flags, rows, sums = numbers[:k], numbers[k:5 * k], numbers[5 * k:5 * k + 4]
        if any(flags):
            first = flags.index(1.0)
            self._non_finite(b - (k - 1) + first, *rows[4 * first:4 * first + 4])
        n = max(sums[3], 1.0)
        loss, box, obj, cls = rows[-4:]
        self.step_log = StepLog(box=box, obj=obj, cls=cls, loss=loss, mean_box=sums[0] / n, mean_obj=sums[1] / n,
                                mean_cls=sums[2] / n, size_hw=size_hw, num_targets=num_targets)

    def _gradient_overflow(self) -> torch.Tensor:
        """AMP: unscale the update's gradients now (as ``GradScaler.step`` would) and return, on the device,
        Float64[1] > 0 when any is inf/NaN (summed over the scaler's per-device flags)."""
        self.scaler.unscale_(self.optimizer)
        # GradScaler keeps the flags in _per_optimizer_states (stable since torch 1.6); its step() would read them
        # with one .item() per device.
        found = self.scaler._per_optimizer_states[id(self.optimizer)]["found_inf_per_device"].values()
        return torch.stack([f.to(self.device, torch.float64).reshape(()) for f in found]).sum().reshape(1)

    def _optimizer_step(self) -> None:
        """Darknet's update: the learning rate of update ``global_step``, gradients held for layers not updated
        yet (``dont_update``/``burnin_update``), optional norm clipping, the step, weight clipping (the EMA follows
        in :meth:`_after_update`)."""
        self.global_step += 1
        self.lr = self.schedule(self.global_step)
        set_lr(self.optimizer, self.lr)
        # With AMP the gradients were unscaled by _fetch_update; without it the scaler is disabled (unscaled).
        held = vars(self).setdefault("held_gradients", {})  # also run on a bare namespace of these attributes
        if holds_gradients(self.optimizer, self.global_step, held):
            hold_gradients(self.optimizer, self.global_step, held)
        if self.hyp.max_grad_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.hyp.max_grad_norm)
        if self.scaler.is_enabled():  # GradScaler.step without its sync: the overflow flag came with the losses
            if not self._grads_non_finite:
                self.optimizer.step()
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        clip_weights(self.optimizer, self.global_step)

    def _after_update(self) -> None:
        """What follows an update outside the step proper (the epoch's clock counts it apart): the EMA."""
        if self.ema is not None:
            self.ema.update(self.model)

    def _non_finite(self, b: int, loss: float, box: float, obj: float, cls: float) -> None:
        last = self.run_dir / "last.pt" if self.run_dir is not None else None
        kept = (f"the last good checkpoint is {last}" if last is not None and last.exists()
                else "no checkpoint was written yet")
        message = (f"non-finite loss ({loss:.4g}; box {box:.4g}, obj {obj:.4g}, cls {cls:.4g}) at epoch "
                   f"{self.epoch + 1}/{self.epochs}, iteration {b + 1} (update {self.epoch_step + 1}/"
                   f"{self.steps_per_epoch} of the epoch, {self.global_step + 1} overall, lr {self.lr:.3g}): "
                   f"training stopped; {kept}. Lower learning_rate or lengthen burn_in, and check the data.")
        raise NonFiniteLossError(message)  # reported once, by whoever catches it (tools/train.py: its error line)


__all__ = ["UpdateStep"]
