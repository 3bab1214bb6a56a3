"""The training loop: SGD with Darknet's schedule, accumulation, AMP, EMA, evaluation, checkpoints, resume, DDP.

One optimizer update consumes ``batch`` images (over all processes) in ``subdivisions`` mini-batches whose
gradients are accumulated; the loss is per image (:class:`yolo.losses.yolo_loss.YoloLoss`), each mini-batch's
loss is divided by ``subdivisions``, so the update sees the mean gradient per image and Darknet's learning
rates carry over. The update is Darknet's (:mod:`yolo.engine.optimizer`: SGD with momentum and weight decay on
conv weights only, or Darknet's Adam with ``adam=1``; each layer's ``learning_rate`` key scales its rate). The
learning rate of update ``n`` is :class:`yolo.engine.schedule.LRSchedule` at ``n``.

The trainer is given its parts (:class:`yolo.engine.parts.TrainingParts`: model, optimizer, schedule, criterion,
batches, ...); :func:`yolo.engine.build.build_training` makes them from a cfg and a dataset YAML, and
:meth:`Trainer.from_options` is the two together. :meth:`Trainer.run_step` is one mini-batch (forward, loss,
backward, and at an update's last mini-batch the update: :mod:`yolo.engine.update_step`); everything else is a
hook (:mod:`yolo.engine.hooks`): progress lines, ``results.csv``, TensorBoard, evaluation, checkpoints, and a
user's functions (:meth:`Trainer.add_callback`). A run folder ``runs/train/NAME`` (never an earlier run's)
receives the exact settings (:mod:`yolo.engine.run_folder`), ``results.csv`` (one row per epoch), ``last.pt`` and
``best.pt`` (written atomically), TensorBoard events, and at the end ``metrics.json`` and the evaluation plots.

A resumed run continues bit for bit (:mod:`yolo.engine.hooks.checkpointing`, :mod:`yolo.engine.rng`); data
order and augmentation are functions of ``(seed, epoch, index)``. ``Ctrl-C`` (SIGINT), SIGTERM or SIGHUP
finishes the current update (or drops the evaluation in progress), saves ``last.pt`` at that point and stops (a
second Ctrl-C aborts at once; :mod:`yolo.engine.stop`); a loader worker that dies (``kill -9``, the OOM killer)
stops the run the same way, at the last completed update. A stop after an epoch's last update saves ``last.pt``
with the epoch's updates done and its evaluation still to run: a resumed run evaluates it first. A non-finite loss
stops the run with :class:`NonFiniteLossError` before it can touch the weights; the last checkpoint on disk stays
the last good one.

How the step runs on its device (fp16 autocast and channels_last on CUDA, float32 NCHW on the CPU, TF32,
``torch.compile``) is decided in one place, :mod:`yolo.engine.step_precision`.

CPU-GPU syncs are deliberate: the losses stay on the device; one sync per update (before the optimizer step,
:meth:`~yolo.engine.update_step.UpdateStep._fetch_update`) checks them (and with AMP the gradients' overflow
flag, so that the GradScaler adds no sync of its own), brings the numbers the writers need and, under DDP, the
processes' stop requests; one per epoch brings the epoch's means; a checkpoint copies the state to the CPU. (The
loss's target assignment selects with data-dependent shapes, which syncs inside the loss.)

Each epoch's training time is split into the wait for data, the step and the rest
(:mod:`yolo.engine.epoch_times`: the host clock, CUDA events on the GPU read with the epoch's sync); the epoch's
line and ``results.csv`` carry them, and a line says so when the wait for data takes over a quarter of the epoch.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed
import torch.nn as nn

from yolo.engine.build import build_training
from yolo.engine.config import TrainOptions
from yolo.engine.distributed import any_true, barrier, cleanup_distributed, lost_peer
from yolo.engine.epoch_times import EpochTimes, EpochTimeSplit
from yolo.engine.hooks import CallbackHook, EvalHook, HookBase, StepLog, evaluate_run
from yolo.engine.parts import TrainingParts
from yolo.engine.rng import set_rng_state
from yolo.engine.step_precision import StepPrecision
from yolo.engine.stop import StopRequest
from yolo.engine.transfer import frozen_to_eval
from yolo.engine.update_step import UpdateStep
from yolo.data.worker_signals import is_worker_death
from yolo.errors import LoaderWorkerError, NonFiniteLossError, TrainingProcessLost
from yolo.evaluation import EvaluationStopped

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns."""

    run_dir: Optional[Path]
    status: str  # "finished" or "interrupted"
    epochs_done: int
    global_step: int
    best_fitness: float
    metrics: Dict[str, Any] = field(default_factory=dict)
    last: Optional[Path] = None
    best: Optional[Path] = None
    throughput: float = 0.0  # training images per second in the last epoch (evaluation excluded)
    # what stopped an interrupted run: a signal's name ("SIGTERM", ...), "worker" (a loader worker died; its line
    # in ``failure``) or "request" (Trainer.request_stop)
    stopped_by: str = ""
    failure: str = ""


class Trainer(UpdateStep):
    """Train the given parts; see the module docstring.

    Example::

        result = Trainer.from_options(TrainOptions(cfg="configs/yolov3-tiny-shapes.cfg", data="configs/shapes.yaml",
                                                   hyp="configs/hyp.shapes.yaml", device="cpu")).fit()

    ``trainer.hooks`` (:class:`yolo.engine.hooks.HookBase`, main process only for the built-in ones) run in their
    order; ``trainer.add_callback(event, fn)`` appends ``fn(trainer)`` at ``train_start`` (before the first
    update), ``step_end`` (after each optimizer update) or ``epoch_end`` (after evaluation and checkpoints), on
    every process. ``trainer.request_stop()`` (what Ctrl-C does) ends the run at the next update boundary with a
    checkpoint.
    """

    def __init__(self, parts: TrainingParts):
        if isinstance(parts, TrainOptions):
            raise TypeError("Trainer takes the built parts of a run; Trainer.from_options(options) builds them")
        p, plan = parts, parts.plan
        self.options, self.hyp, self.data = p.options, p.hyp, p.data
        self.device, self.dist = p.device, p.dist
        self.main = p.dist.is_main  # the process that evaluates, logs and saves
        # The update: model, the module the step runs (DDP wrapper, torch.compile), optimizer, loss.
        self.model = p.model  # unwrapped
        self.train_model: nn.Module = p.train_model if p.train_model is not None else p.model
        self.forward: Callable = p.forward if p.forward is not None else self.train_model
        self.precision: StepPrecision = p.precision or StepPrecision(p.device.type, amp=False, channels_last=False,
                                                                     tf32=False, compile=False)
        self.amp = self.precision.amp  # fp16 autocast
        self.scaler = p.scaler if p.scaler is not None else torch.amp.GradScaler("cuda", enabled=False)
        self.optimizer, self.schedule, self.criterion, self.ema = p.optimizer, p.schedule, p.criterion, p.ema
        self.held_gradients: Dict[torch.Tensor, torch.Tensor] = {}  # layers Darknet does not update yet
        # The data and the run's plan.
        self.batches, self.train_set, self.val_set, self.multi_scale = p.batches, p.train_set, p.val_set, p.multi_scale
        self.img_size, self.workers = tuple(plan.img_size), plan.workers
        self.mini_batch = plan.mini_batch  # images per mini-batch and process
        self.accumulate = plan.accumulate  # mini-batches per update (Darknet's subdivisions)
        self.steps_per_epoch, self.epochs, self.total_steps = plan.steps_per_epoch, plan.epochs, plan.total_steps
        # Where the hooks write; how the run started.
        self.hooks: List[HookBase] = list(p.hooks)
        self.run_dir, self.writer, self.resume_path = p.run_dir, p.writer, p.resume_path
        self.transfer_report, self.frozen = p.transfer_report, p.frozen
        self.stop_request = StopRequest(announce=self.main)
        # Progress, saved in checkpoints.
        self.start = p.start
        self.epoch = p.start.epoch  # the epoch in progress (0-based); after it ends, the number of epochs done
        self.epoch_step = p.start.epoch_step  # updates done in the epoch
        self.global_step = p.start.global_step  # updates done in the run
        self.lr = self.schedule(self.global_step) if self.global_step else 0.0  # the last update's
        self.last_metrics: Dict[str, Any] = dict(p.start.last_metrics)
        self._resume_sums: Optional[torch.Tensor] = p.start.epoch_sums
        self._sums_at_update: Optional[torch.Tensor] = None  # loss_sums at the last update (accumulate > 1)
        self._grads_non_finite = False  # AMP: the update's gradients overflowed (fetched by _fetch_update)
        self._stop_everywhere = False  # DDP: a process asked to stop (fetched by _fetch_update)
        # What the hooks read.
        self.loss_sums: Optional[torch.Tensor] = None  # float64[4] on the device: box, obj, cls, mini-batches
        self.update_losses = torch.zeros(self.accumulate, 4, dtype=torch.float64, device=self.device)  # loss, b, o, c
        self.step_log: Optional[StepLog] = None
        self.epoch_losses: Dict[str, float] = {}  # box_loss, obj_loss, cls_loss, loss over every process
        self.epoch_metrics: Dict[str, Any] = {}  # this epoch's evaluation ({} when not evaluated)
        self.is_best = False
        self.epoch_start = 0.0
        self.epoch_seconds = 0.0
        self.epoch_images = 0
        self.throughput = 0.0
        self.epoch_times = EpochTimes(self.device)  # the clock of the epoch's parts
        self.epoch_split = EpochTimeSplit(0.0, 0.0, 0.0, 0.0)  # the last epoch's: data wait, step, other

    @classmethod
    def from_options(cls, options: TrainOptions) -> "Trainer":
        """The trainer of the run ``options`` describes: :func:`yolo.engine.build.build_training`'s parts. A
        Ctrl-C while they are built asks for a stop at the first update, as one during the run does."""
        if not isinstance(options, TrainOptions):
            raise TypeError(f"Trainer.from_options takes a TrainOptions, got {type(options).__name__} {options!r}")
        stop = StopRequest()
        stop.install()
        try:
            trainer = cls(build_training(options))
        except BaseException:
            stop.restore()
            raise
        trainer.stop_request = stop
        return trainer

    # ---------------------------------------------------------------- public
    def request_stop(self) -> None:
        """Stop at the next optimizer-update boundary, saving ``last.pt`` there."""
        self.stop_request.requested = True

    @property
    def _stop_requested(self) -> bool:
        return self.stop_request.requested

    def add_callback(self, event: str, fn: Callable[["Trainer"], None]) -> None:
        """Run ``fn(trainer)`` at ``event`` (``train_start``, ``step_end``, ``epoch_end``), after the hooks
        already there (:class:`yolo.engine.hooks.callbacks.CallbackHook`)."""
        self.hooks.append(CallbackHook(event, fn))

    def fit(self) -> TrainResult:
        """Run the training; returns a :class:`TrainResult`. Raises :class:`NonFiniteLossError` on NaN/inf."""
        self.stop_request.install()
        try:
            self._load_hook_states()
            self._call_hooks("before_train")
            return self._train()
        except RuntimeError as exc:
            if not self.dist.enabled or isinstance(exc, (NonFiniteLossError, LoaderWorkerError)) \
                    or not lost_peer(exc):
                raise
            raise TrainingProcessLost(self._lost_peer_message(exc)) from None
        finally:
            self.stop_request.restore()
            close_batches = getattr(self.batches, "close", None)
            if close_batches is not None:  # the loader's workers end before the run folder's lock is released
                close_batches()
            for hook in self.hooks:
                hook.close()
            self.writer = None
            cleanup_distributed()

    def eval_model(self) -> nn.Module:
        """The model evaluated and saved: the EMA's when on, else the training model."""
        return self.ema.module if self.ema is not None else self.model

    @property
    def best_fitness(self) -> float:
        """The best evaluation's fitness so far (-1: none yet): the evaluation hook's."""
        return next((h.best_fitness for h in self.hooks if isinstance(h, EvalHook)), -1.0)

    def hooks_state(self) -> Dict[str, Dict[str, Any]]:
        """Each hook's :meth:`~yolo.engine.hooks.base.HookBase.state_dict` that holds something, by its
        ``state_key`` (what a checkpoint keeps under ``train["hooks"]``)."""
        states = {}
        for hook in self.hooks:
            state = hook.state_dict()
            if state:
                states[hook.state_key] = state
        return states

    # ---------------------------------------------------------------- hooks
    def _load_hook_states(self) -> None:
        for hook in self.hooks:
            state = self.start.hooks.get(hook.state_key)
            if state is not None:
                hook.load_state_dict(state)

    def _call_hooks(self, method: str) -> None:
        for hook in self.hooks:
            getattr(hook, method)(self)

    # ---------------------------------------------------------------- the loop
    def _train(self) -> TrainResult:
        if self.start.rng is not None:
            set_rng_state(self.start.rng)
        if self.epoch >= self.epochs:
            if self.main:
                logger.info("the run already finished its %d epochs: nothing to resume", self.epochs)
            return self._result("finished")
        status = "finished"
        for epoch in range(self.epoch, self.epochs):
            self.epoch = epoch
            if self._train_epoch(epoch):
                status = "interrupted"
                break
            process_sums = self.loss_sums.clone()  # this process's (a stop in the evaluation saves them)
            self.epoch, self.epoch_step = epoch + 1, 0
            if self.dist.enabled:  # epoch losses over every process
                torch.distributed.all_reduce(self.loss_sums)
            sums = self.loss_sums.tolist()  # the per-epoch CPU-GPU sync
            n = max(sums[3], 1.0)
            box, obj, cls = sums[0] / n, sums[1] / n, sums[2] / n
            self.epoch_losses = {"box_loss": box, "obj_loss": obj, "cls_loss": cls, "loss": box + obj + cls}
            # evaluation, results.csv, TensorBoard, best.pt and last.pt, then the callbacks
            evaluation_stopped = False
            try:
                self._call_hooks("after_epoch")
            except EvaluationStopped:  # nothing of the epoch's evaluation is recorded; a resumed run does it
                evaluation_stopped = True
                self.epoch, self.epoch_step, self.loss_sums = epoch, self.steps_per_epoch, process_sums
                self._call_hooks("after_interrupt")
            barrier()
            if any_true(self._stop_requested or evaluation_stopped, self.device):
                status = "interrupted"
                break
        return self._result(status)

    def _result(self, status: str) -> TrainResult:
        last = self.run_dir / "last.pt" if self.run_dir is not None else None
        best = self.run_dir / "best.pt" if self.run_dir is not None else None
        stop = self.stop_request
        stopped_by = ("" if status != "interrupted" else "worker" if stop.worker_failure
                      else stop.signal_name or "request")
        return TrainResult(run_dir=self.run_dir, status=status, epochs_done=self.epoch, global_step=self.global_step,
                           best_fitness=self.best_fitness, metrics=self.last_metrics, last=last,
                           best=best if best is not None and best.exists() else None, throughput=self.throughput,
                           stopped_by=stopped_by, failure=stop.worker_failure or "")

    def _train_epoch(self, epoch: int) -> bool:
        """One epoch (from ``self.epoch_step``); returns True when a stop was requested and saved (after any
        update, the epoch's last included: its evaluation is then left to the resumed run)."""
        self.train_model.train()
        if self.options.freeze:
            frozen_to_eval(self.model, self.options.freeze)
        start_step = self.epoch_step
        batches = self.batches(epoch, start_step)
        num_batches = (self.steps_per_epoch - start_step) * self.accumulate
        self.loss_sums = torch.zeros(4, dtype=torch.float64, device=self.device)
        if self._resume_sums is not None and start_step:
            self.loss_sums += self._resume_sums.to(self.device)
        self._resume_sums = None
        self._sums_at_update = self.loss_sums.clone() if self.accumulate > 1 else None
        self._call_hooks("before_epoch")
        self.optimizer.zero_grad(set_to_none=True)
        self.epoch_start = time.perf_counter()
        self.epoch_times.start()
        iterator = iter(batches) if num_batches else iter(())
        for i in range(num_batches):
            try:
                images, targets, _infos = next(iterator)
            except StopIteration:
                break
            except RuntimeError as exc:
                if not is_worker_death(exc):
                    raise
                self._worker_died(str(exc))  # last.pt at the last completed update
                return True
            self.epoch_times.data_ready()
            updated = self.run_step(images, targets, start_step * self.accumulate + i)
            self.epoch_times.step_done()
            if not updated:
                continue
            self._after_update()
            self.epoch_step += 1
            if self._sums_at_update is not None:
                self._sums_at_update = self.loss_sums.clone()
            self._call_hooks("after_step")
            # Every process stops at the same update: with DDP the requests came with the update's one sync (a
            # request made after it, during this update's hooks, stops the run after the next update).
            stop = self._stop_everywhere if self.dist.enabled else self._stop_requested
            if stop:
                self._call_hooks("after_interrupt")  # last.pt at this update
                barrier()
                return True
        self.epoch_split = self.epoch_times.finish()
        self.epoch_seconds = self.epoch_split.total
        self.epoch_images = (self.steps_per_epoch - start_step) * self.hyp.batch
        self.throughput = self.epoch_images / max(self.epoch_seconds, 1e-9)  # images/s, all processes
        self._call_hooks("after_epoch_updates")
        return False

    def _lost_peer_message(self, exc: BaseException) -> str:
        last = self.run_dir / "last.pt" if self.run_dir is not None else None
        kept = f"the last checkpoint is {last}" if last is not None and last.is_file() else "no checkpoint was written"
        reason = " ".join(str(exc).split())[:200]
        return (f"process {self.dist.rank} of {self.dist.world_size}: another process of this distributed run is "
                f"gone ({reason}) at epoch {self.epoch + 1}, update {self.epoch_step}/{self.steps_per_epoch}; "
                f"training stopped; {kept}")

    def _worker_died(self, message: str) -> None:
        """A loader worker died (PyTorch's ``message``) in the middle of an update: save ``last.pt`` at the last
        completed one. Under DDP the other processes wait for this one's gradients: it ends with the error
        (they report the lost process)."""
        self.stop_request.worker_died(message)
        if self.dist.enabled:
            raise LoaderWorkerError(self.stop_request.worker_failure)
        if self._sums_at_update is not None:  # without the mini-batches of the unfinished update
            self.loss_sums = self._sums_at_update
        self._call_hooks("after_interrupt")

    # ---------------------------------------------------------------- evaluation
    def _evaluate(self, epoch: int, final: bool) -> Dict[str, Any]:
        """COCO metrics after ``epoch`` (0-based): :func:`yolo.engine.hooks.evaluation.evaluate_run`."""
        return evaluate_run(self, epoch, final)


def train(**kwargs) -> TrainResult:
    """``Trainer.from_options(TrainOptions(**kwargs)).fit()``."""
    return Trainer.from_options(TrainOptions(**kwargs)).fit()


__all__ = ["NonFiniteLossError", "TrainOptions", "TrainResult", "Trainer", "train"]
