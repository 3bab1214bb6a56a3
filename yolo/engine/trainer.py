"""The training loop: SGD with Darknet's schedule, accumulation, AMP, EMA, evaluation, checkpoints, resume, DDP.

One optimizer update consumes ``batch`` images (over all processes) in ``subdivisions`` mini-batches whose
gradients are accumulated; the loss is per image (:class:`yolo.losses.yolo_loss.YoloLoss`), each mini-batch's
loss is divided by ``subdivisions``, so the update sees the mean gradient per image and Darknet's learning
rates carry over. The update is Darknet's (:mod:`yolo.engine.optimizer`: SGD with momentum and weight decay on
conv weights only, or Darknet's Adam with ``adam=1``; each layer's ``learning_rate`` key scales its rate). The
learning rate of update ``n`` is :class:`yolo.engine.schedule.LRSchedule` at ``n``.

The trainer is given its parts (:class:`yolo.engine.parts.TrainingParts`: model, optimizer, schedule, criterion,
batches, ...; ``trainer.parts``); :func:`yolo.engine.build.build_training` makes them from a cfg and a dataset
YAML, and :meth:`Trainer.from_options` is the two together. It is three things, as detectron2's
``SimpleTrainer``: the parts, the run's counters and results (:class:`yolo.engine.train_state.TrainState`,
``trainer.state``, what the hooks and callbacks read: ``trainer.state.epoch``, ``trainer.state.global_step``...)
and the per-update work (forward, loss, backward, and at an update's last mini-batch the update), a
:class:`yolo.engine.update_step.StepRunner` (``trainer.step_runner``) made from the parts: it reads the model,
optimizer, schedule, criterion, scaler and EMA there and holds only the step's own values (the loss sums).
Everything else is a hook (:mod:`yolo.engine.hooks`): progress lines,
``results.csv``, TensorBoard, evaluation, checkpoints, and a user's functions (:meth:`Trainer.add_callback`). A run folder
``runs/train/NAME`` (never an earlier run's) receives the exact settings (:mod:`yolo.engine.run_folder`),
``results.csv`` (one row per epoch), ``last.pt`` and ``best.pt`` (written atomically), TensorBoard events, and at
the end ``metrics.json`` and the evaluation plots.

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
:meth:`~yolo.engine.update_step.StepRunner._fetch_update`) checks them (and with AMP the gradients' overflow
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

from yolo.engine.build import build_training
from yolo.engine.config import TrainOptions
from yolo.engine.distributed import any_true, barrier, cleanup_distributed, lost_peer
from yolo.engine.epoch_times import EpochTimes
from yolo.engine.hooks import CallbackHook, HookBase
from yolo.engine.parts import TrainingParts
from yolo.engine.rng import set_rng_state
from yolo.engine.stop import StopRequest
from yolo.engine.train_state import TrainState
from yolo.engine.transfer import frozen_to_eval
from yolo.engine.update_step import StepRunner
from yolo.data.worker_signals import is_worker_death
from yolo.errors import DataError, LoaderWorkerError, NonFiniteLossError, TrainingProcessLost
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


class Trainer:
    """Train the given parts; see the module docstring.

    Example::

        result = Trainer.from_options(TrainOptions(cfg="configs/yolov3-tiny-shapes.cfg", data="configs/shapes.yaml",
                                                   hyp="configs/hyp.shapes.yaml", device="cpu")).fit()

    Its attributes: ``parts`` (what it was given), ``state`` (:class:`yolo.engine.train_state.TrainState`),
    ``step_runner`` (the step: it reads the model, optimizer, criterion, ``forward``, ... in ``parts``, where
    scripts read them too, and holds only its own loss sums),
    ``hooks`` (:class:`yolo.engine.hooks.HookBase`, main process only for the built-in ones; they run in their
    order and read ``trainer.state`` and ``trainer.parts.plan``), ``stop_request`` and ``epoch_times``.
    ``trainer.add_callback(event, fn)`` appends ``fn(trainer)`` at ``before_train`` (before the first update),
    ``after_step`` (after each optimizer update) or ``after_epoch`` (after evaluation and checkpoints), on every
    process. ``trainer.request_stop()`` (what Ctrl-C does) ends the run at the next update boundary with a
    checkpoint.
    """

    def __init__(self, parts: TrainingParts):
        if isinstance(parts, TrainOptions):
            raise TypeError("Trainer takes the built parts of a run; Trainer.from_options(options) builds them")
        if not isinstance(parts, TrainingParts):
            raise TypeError(f"Trainer takes the built parts of a run (TrainingParts), got {type(parts).__name__}; "
                            "to train from settings: Trainer.from_options(TrainOptions(cfg=..., data=..., ...))")
        self.parts = parts  # the run's settings, plan, data and folder (parts.start: where it goes on from)
        start = parts.start
        self.state = TrainState(epoch=start.epoch, epoch_step=start.epoch_step, global_step=start.global_step,
                                best_fitness=start.best_fitness, metrics=dict(start.last_metrics),
                                lr=parts.schedule(start.global_step) if start.global_step else 0.0)
        self.stop_request = StopRequest(announce=parts.dist.is_main)
        self.step_runner = StepRunner(parts, self.state, self.stop_request)
        self.hooks: List[HookBase] = list(parts.hooks)
        self.epoch_times = EpochTimes(parts.device)  # the clock of the epoch's parts

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
        trainer.stop_request = trainer.step_runner.stop = stop
        return trainer

    # ---------------------------------------------------------------- public
    def request_stop(self) -> None:
        """Stop at the next optimizer-update boundary, saving ``last.pt`` there."""
        self.stop_request.requested = True

    def add_callback(self, event: str, fn: Callable[["Trainer"], None]) -> None:
        """Run ``fn(trainer)`` at ``event`` (``before_train``, ``after_step``, ``after_epoch``: the hook method of
        that name), after the hooks already there (:class:`yolo.engine.hooks.callbacks.CallbackHook`)."""
        self.hooks.append(CallbackHook(event, fn))

    def fit(self) -> TrainResult:
        """Run the training; returns a :class:`TrainResult`. Raises :class:`NonFiniteLossError` on NaN/inf."""
        self.stop_request.install()
        try:
            self._check_best_checkpoint()
            self._load_hook_states()
            self._call_hooks("before_train")
            return self._train()
        except RuntimeError as exc:
            if not self.parts.dist.enabled or isinstance(exc, (NonFiniteLossError, LoaderWorkerError)) \
                    or not lost_peer(exc):
                raise
            raise TrainingProcessLost(self._lost_peer_message(exc)) from None
        finally:
            self.stop_request.restore()
            close_batches = getattr(self.parts.batches, "close", None)
            if close_batches is not None:  # the loader's workers end before the run folder's lock is released
                close_batches()
            for hook in self.hooks:
                hook.close()
            self.parts.writer = None
            cleanup_distributed()

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
    def _check_best_checkpoint(self) -> None:
        """A best fitness whose ``best.pt`` is missing (a kill between the two saves of an epoch) is dropped, so
        that the next evaluation writes a new ``best.pt``."""
        best, run_dir = self.state.best_fitness, self.parts.run_dir
        if best >= 0 and run_dir is not None and not (run_dir / "best.pt").is_file():
            if self.parts.dist.is_main:
                logger.warning("%s is missing although last.pt records a best fitness of %.4f: the next evaluation "
                               "writes a new best.pt", run_dir / "best.pt", best)
            self.state.best_fitness = -1.0

    def _load_hook_states(self) -> None:
        for hook in self.hooks:
            state = self.parts.start.hooks.get(hook.state_key)
            if state is not None:
                hook.load_state_dict(state)

    def _call_hooks(self, method: str) -> None:
        for hook in self.hooks:
            getattr(hook, method)(self)

    # ---------------------------------------------------------------- the loop
    def _train(self) -> TrainResult:
        """The epochs from where the run is; each one's updates, then its end (evaluation, checkpoints)."""
        start, plan = self.parts.start, self.parts.plan
        if start.rng is not None:
            set_rng_state(start.rng)
        if self.state.epoch >= plan.epochs and self.parts.dist.is_main:
            logger.info("the run already finished its %d epochs: nothing to resume", plan.epochs)
        while self.state.epoch < plan.epochs:
            if self._train_epoch() or self._end_epoch():
                return self._result("interrupted")
        return self._result("finished")

    def _train_epoch(self) -> bool:
        """The epoch's updates from ``state.epoch_step``; returns True when a stop was requested and saved (after
        any update, the epoch's last included: its evaluation is then left to the resumed run)."""
        state, plan, runner = self.state, self.parts.plan, self.step_runner
        first = state.epoch_step
        self._train_mode()
        runner.start_epoch(self.parts.start.epoch_sums if first else None)
        batches = self.parts.batches(state.epoch, first)
        batches = iter(batches) if first < plan.steps_per_epoch else iter(())
        self._call_hooks("before_epoch")
        state.epoch_start = time.perf_counter()
        self.epoch_times.start()
        for i in range((plan.steps_per_epoch - first) * plan.accumulate):
            try:
                images, targets, _infos = next(batches)
            except StopIteration:
                break
            except RuntimeError as exc:
                if not is_worker_death(exc):
                    raise
                self._finish_epoch_clock(first)  # the times of the updates done, for results.csv on resume
                self._worker_died(str(exc))  # last.pt at the last completed update
                return True
            self.epoch_times.data_ready()
            updated = runner.run(images, targets, first * plan.accumulate + i)
            self.epoch_times.step_done()
            if not updated:
                continue
            runner.after_update()
            state.epoch_step += 1
            self._call_hooks("after_step")
            # Every process stops at the same update: with DDP the requests came with the update's one sync (a
            # request made after it, during this update's hooks, stops the run after the next update).
            if runner.stop_everywhere if self.parts.dist.enabled else self.stop_request.requested:
                self._finish_epoch_clock(first)  # the times of the updates done, for results.csv on resume
                self._call_hooks("after_interrupt")  # last.pt at this update
                barrier()
                return True
        self._finish_epoch_clock(first)
        self._call_hooks("after_epoch_updates")
        return False

    def _end_epoch(self) -> bool:
        """After an epoch's updates: its mean losses over every process, then the hooks (evaluation, results.csv,
        TensorBoard, best.pt and last.pt, the callbacks). Returns whether the run stops here (a stop requested,
        or during the evaluation: nothing of it is recorded, a resumed run does it)."""
        state, runner = self.state, self.step_runner
        epoch = state.epoch
        process_sums = runner.loss_sums.clone()  # this process's (a stop in the evaluation saves them)
        state.epoch, state.epoch_step = epoch + 1, 0
        if self.parts.dist.enabled:
            torch.distributed.all_reduce(runner.loss_sums)
        box, obj, cls, n = runner.loss_sums.tolist()  # the per-epoch CPU-GPU sync
        n = max(n, 1.0)
        state.epoch_losses = {"box_loss": box / n, "obj_loss": obj / n, "cls_loss": cls / n,
                              "loss": box / n + obj / n + cls / n}
        state.epoch_metrics, state.is_best = {}, False  # until the evaluation, when the epoch has one
        evaluation_stopped = False
        try:
            self._call_hooks("after_epoch")
        except EvaluationStopped:
            evaluation_stopped = True
            state.epoch, state.epoch_step, runner.loss_sums = epoch, self.parts.plan.steps_per_epoch, process_sums
            self._call_hooks("after_interrupt")
        except DataError:  # a val image unreadable now (changed since its scan): last.pt, the evaluation left to resume
            state.epoch, state.epoch_step, runner.loss_sums = epoch, self.parts.plan.steps_per_epoch, process_sums
            self._call_hooks("after_interrupt")
            raise
        barrier()
        return any_true(self.stop_request.requested or evaluation_stopped, self.parts.device)

    def _train_mode(self) -> None:
        self.parts.train_model.train()
        if self.parts.options.freeze:
            frozen_to_eval(self.parts.model, self.parts.options.freeze)

    def _finish_epoch_clock(self, first_update: int) -> None:
        """The epoch's time split and throughput (its updates from ``first_update`` to now, all processes)."""
        state = self.state
        state.epoch_split = self.epoch_times.finish()
        state.epoch_images = (state.epoch_step - first_update) * self.parts.hyp.batch
        state.throughput = state.epoch_images / max(state.epoch_split.total, 1e-9)  # images/s, all processes

    def _result(self, status: str) -> TrainResult:
        run_dir = self.parts.run_dir
        last = run_dir / "last.pt" if run_dir is not None else None
        best = run_dir / "best.pt" if run_dir is not None else None
        stop, state = self.stop_request, self.state
        stopped_by = ("" if status != "interrupted" else "worker" if stop.worker_failure
                      else stop.signal_name or "request")
        return TrainResult(run_dir=run_dir, status=status, epochs_done=state.epoch,
                           global_step=state.global_step, best_fitness=state.best_fitness, metrics=state.metrics,
                           last=last, best=best if best is not None and best.exists() else None,
                           throughput=state.throughput, stopped_by=stopped_by, failure=stop.worker_failure or "")

    def _lost_peer_message(self, exc: BaseException) -> str:
        run_dir, dist = self.parts.run_dir, self.parts.dist
        last = run_dir / "last.pt" if run_dir is not None else None
        kept = f"the last checkpoint is {last}" if last is not None and last.is_file() else "no checkpoint was written"
        reason = " ".join(str(exc).split())[:200]
        return (f"process {dist.rank} of {dist.world_size}: another process of this distributed run is "
                f"gone ({reason}) at epoch {self.state.epoch + 1}, update {self.state.epoch_step}/"
                f"{self.parts.plan.steps_per_epoch}; training stopped; {kept}")

    def _worker_died(self, message: str) -> None:
        """A loader worker died (PyTorch's ``message``) in the middle of an update: save ``last.pt`` at the last
        completed one. Under DDP the other processes wait for this one's gradients: it ends with the error
        (they report the lost process)."""
        self.stop_request.worker_died(message)
        if self.parts.dist.enabled:
            raise LoaderWorkerError(self.stop_request.worker_failure)
        self.step_runner.drop_unfinished_update()  # without the mini-batches of the unfinished update
        self._call_hooks("after_interrupt")


def train(**kwargs) -> TrainResult:
    """``Trainer.from_options(TrainOptions(**kwargs)).fit()``."""
    return Trainer.from_options(TrainOptions(**kwargs)).fit()


__all__ = ["NonFiniteLossError", "TrainOptions", "TrainResult", "Trainer", "train"]
