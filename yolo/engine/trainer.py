"""The training loop: SGD with Darknet's schedule, accumulation, AMP, EMA, evaluation, checkpoints, resume, DDP.

One optimizer update consumes ``batch`` images (over all processes) in ``subdivisions`` mini-batches whose
gradients are accumulated; the loss is per image (:class:`yolo.losses.yolo_loss.YoloLoss`), each mini-batch's
loss is divided by ``subdivisions``, so the update sees the mean gradient per image and Darknet's learning
rates carry over. The update is Darknet's (:mod:`yolo.engine.optimizer`: SGD with momentum and weight decay on
conv weights only, or Darknet's Adam with ``adam=1``; each layer's ``learning_rate`` key scales its rate). The
learning rate of update ``n`` is :class:`yolo.engine.schedule.LRSchedule` at ``n``.

:meth:`Trainer.run_step` is one mini-batch (forward, loss, backward, and at an update's last mini-batch the
update); everything else is a hook (:mod:`yolo.engine.hooks`): progress lines, ``results.csv``,
TensorBoard, evaluation, checkpoints. A run folder ``runs/train/NAME`` (never an earlier run's) receives the
exact settings (:mod:`yolo.engine.run_folder`), ``results.csv`` (one row per epoch), ``last.pt`` and
``best.pt`` (written atomically), TensorBoard events, and at the end ``metrics.json`` and the evaluation plots.

A resumed run continues bit for bit (:mod:`yolo.engine.hooks.checkpointing`, :mod:`yolo.engine.rng`); data
order and augmentation are functions of ``(seed, epoch, index)``. ``Ctrl-C`` (SIGINT) or SIGTERM finishes
the current update, saves ``last.pt`` at that point and stops (a second Ctrl-C aborts at once). A non-finite
loss stops the run with :class:`NonFiniteLossError` before it can touch the weights; the last checkpoint on
disk stays the last good one.

How the step runs on its device (fp16 autocast and channels_last on CUDA, float32 NCHW on the CPU, TF32,
``torch.compile``) is decided in one place, :mod:`yolo.engine.step_precision`.

CPU-GPU syncs are deliberate: the losses stay on the device; one sync per update (before the optimizer step,
:meth:`Trainer._fetch_update`) checks them (and with AMP the gradients' overflow flag, so that the GradScaler
adds no sync of its own), brings the numbers the writers need and, under DDP, the processes' stop requests;
one per epoch brings the epoch's means; a checkpoint copies the state to the CPU. (The loss's target
assignment selects with data-dependent shapes, which syncs inside the loss.)
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed
import torch.nn as nn

from yolo.data import EpochLoader, MultiScale, build_dataset, load_data_config
from yolo.data.darknet_multiscale import DarknetMultiScale
from yolo.data.loader import EpochShuffleSampler
from yolo.device import parse_device
from yolo.engine.config import Hyperparameters, TrainOptions, resolve_hyp
from yolo.engine.distributed import (DistInfo, DistributedEpochSampler, SkipSampler, any_true, barrier,
                                     broadcast_object, cleanup_distributed, init_distributed)
from yolo.engine.ema import ModelEMA
from yolo.engine.hooks import (CheckpointHook, EvalHook, Guarded, HookBase, ProgressWriter, ResultsChartWriter,
                               ResultsCSVWriter, RunFolderLock, StepLog, TensorBoardWriter, evaluate_run)
from yolo.engine.optimizer import clip_weights, hold_gradients, holds_gradients, optimizer_from_hyp
from yolo.engine.rng import seed_everything, set_rng_state
from yolo.engine.run_folder import recover_run_folder, update_settings, write_settings
from yolo.engine.schedule import LRSchedule, burn_in_outlasts_run, schedule_from_hyp, set_lr
from yolo.engine.step_precision import CompiledForward, StepPrecision, apply_tf32, step_precision
from yolo.engine.transfer import freeze_layers, frozen_to_eval, load_pretrained, with_num_classes
from yolo.errors import ConfigError, NonFiniteLossError
from yolo.losses.region_loss import set_images_seen
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.cfg import Section, parse_cfg, parse_cfg_text
from yolo.models.cfg_options import TRAINED_HEADS
from yolo.models.checkpoint import load_checkpoint_file
from yolo.models.head_prior import prior_head_biases
from yolo.models.model import Darknet
from yolo.models.preprocessing import training_preprocessing
from yolo.ops.sizes import ImageSize, checked_image_size
from yolo.progress import use_bars
from yolo.runs import increment_path, run_name

logger = logging.getLogger(__name__)

# Settings given both as hyperparameters and as options (flags) that a resumed run may change: how the step runs
# (yolo.engine.step_precision) and whether the train images are kept in memory; never what it computes.
MACHINE_SETTINGS = ("tf32", "compile", "cache_images")


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns."""

    run_dir: Path
    status: str  # "finished" or "interrupted"
    epochs_done: int
    global_step: int
    best_fitness: float
    metrics: Dict[str, Any] = field(default_factory=dict)
    last: Optional[Path] = None
    best: Optional[Path] = None
    throughput: float = 0.0  # training images per second in the last epoch (evaluation excluded)


class Trainer:
    """Train a Darknet cfg on a dataset YAML; see the module docstring.

    Example::

        result = Trainer(TrainOptions(cfg="configs/yolov3-tiny-shapes.cfg", data="configs/shapes.yaml",
                                      hyp="configs/hyp.shapes.yaml", device="cpu")).fit()

    Callbacks (``trainer.hooks[event].append(fn)``, ``fn(trainer)``): ``train_start`` (after setup),
    ``step_end`` (after each optimizer update), ``epoch_end`` (after evaluation and checkpoints); they run
    on every process, after the built-in hooks (``trainer.loop_hooks``, main process only).
    ``trainer.request_stop()`` (what Ctrl-C does) ends the run at the next update boundary with a checkpoint.
    """

    EVENTS = ("train_start", "step_end", "epoch_end")

    def __init__(self, options: TrainOptions):
        self.options = options
        self.hooks: Dict[str, List[Callable[["Trainer"], None]]] = {e: [] for e in self.EVENTS}
        self.loop_hooks: List[HookBase] = []  # progress, results.csv, TensorBoard, evaluation, checkpoints
        self._stop_requested = False
        # Set up by fit() (_setup): processes, model, update, data, run length, run folder.
        self.resume_path: Optional[Path] = None
        self.device: Optional[torch.device] = None
        self.dist: Optional[DistInfo] = None
        self.main = True  # the process that evaluates, logs and saves
        self.data = None  # yolo.data.DataConfig
        self.hyp: Optional[Hyperparameters] = None
        self.model: Optional[Darknet] = None  # unwrapped
        self.train_model: Optional[nn.Module] = None  # the model, or its DDP wrapper
        self.forward: Optional[Callable] = None  # train_model, or it through torch.compile (CompiledForward)
        self.precision: Optional[StepPrecision] = None  # autocast, memory format, TF32, compile
        self.transfer_report = None
        self.frozen: List[str] = []
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.amp = False  # fp16 autocast (self.precision.amp)
        self.scaler: Optional[torch.amp.GradScaler] = None
        self.ema: Optional[ModelEMA] = None
        self.criterion: Optional[Callable] = None
        self.held_gradients: Dict[torch.Tensor, torch.Tensor] = {}  # layers Darknet does not update yet
        self.img_size: ImageSize = (0, 0)
        self.train_set = self.val_set = None
        self.mini_batch = 0  # images per mini-batch and process
        self.accumulate = 1  # mini-batches per update (Darknet's subdivisions)
        self.steps_per_epoch = 0
        self.epochs = 0
        self.total_steps = 0
        self.schedule: Optional[LRSchedule] = None
        self.workers = 0
        self.multi_scale: Optional[Callable[[int], Optional[Tuple[int, int]]]] = None
        self.run_dir: Optional[Path] = None
        self.writer = None  # TensorBoard SummaryWriter (main process, tensorboard on)
        # Progress, saved in checkpoints.
        self.epoch = 0  # the epoch in progress (0-based); after it ends, the number of epochs done
        self.epoch_step = 0  # updates done in the epoch
        self.global_step = 0  # updates done in the run
        self.lr = 0.0
        self.best_fitness = -1.0
        self.last_metrics: Dict[str, Any] = {}
        self._resume_rng: Optional[Dict[str, Any]] = None
        self._resume_sums: Optional[torch.Tensor] = None
        self._grads_non_finite = False  # AMP: the update's gradients overflowed (fetched by _fetch_update)
        self._stop_everywhere = False  # DDP: a process asked to stop (fetched by _fetch_update)
        # What the hooks read.
        self.loss_sums: Optional[torch.Tensor] = None  # float64[4] on the device: box, obj, cls, mini-batches
        self.update_losses: Optional[torch.Tensor] = None  # float64[accumulate, 4]: loss, box, obj, cls
        self.step_log: Optional[StepLog] = None
        self.epoch_losses: Dict[str, float] = {}  # box_loss, obj_loss, cls_loss, loss over every process
        self.epoch_metrics: Dict[str, Any] = {}  # this epoch's evaluation ({} when not evaluated)
        self.is_best = False
        self.epoch_start = 0.0
        self.epoch_seconds = 0.0
        self.epoch_images = 0
        self.throughput = 0.0

    # ---------------------------------------------------------------- public
    def request_stop(self) -> None:
        """Stop at the next optimizer-update boundary, saving ``last.pt`` there."""
        self._stop_requested = True

    def fit(self) -> TrainResult:
        """Run the training; returns a :class:`TrainResult`. Raises :class:`NonFiniteLossError` on NaN/inf."""
        previous = self._install_signal_handlers()
        try:
            self._setup()
            self._emit("train_start")
            return self._train()
        finally:
            self._restore_signal_handlers(previous)
            for hook in self.loop_hooks:
                hook.close()
            self.writer = None
            cleanup_distributed()

    def eval_model(self) -> nn.Module:
        """The model evaluated and saved: the EMA's when on, else the training model."""
        return self.ema.module if self.ema is not None else self.model

    # ---------------------------------------------------------------- signals and callbacks
    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = {}

        def handler(signum, frame):
            if self._stop_requested:
                raise KeyboardInterrupt
            self._stop_requested = True
            if self.dist is None or self.dist.is_main:
                logger.warning("\n%s received: stopping after the current update and saving last.pt "
                               "(press Ctrl-C again to abort without saving)", signal.Signals(signum).name)

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
        return previous

    @staticmethod
    def _restore_signal_handlers(previous) -> None:
        if previous:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def _emit(self, event: str) -> None:
        for fn in self.hooks[event]:
            fn(self)

    def _call_hooks(self, method: str) -> None:
        for hook in self.loop_hooks:
            getattr(hook, method)(self)

    # ---------------------------------------------------------------- setup
    def _setup(self) -> None:
        resume_ckpt = self._read_resume_checkpoint()
        opt = self.options
        self.device = parse_device(opt.device, int(os.environ.get("LOCAL_RANK", "0")))
        self.dist = init_distributed(self.device)
        self.main = self.dist.is_main
        if not self.main:
            opt.progress = False
        sections, adapted = self._read_cfg_and_data(resume_ckpt)
        seed_everything(opt.seed)
        model = Darknet(sections)
        if resume_ckpt is not None:
            model.cfg_text = resume_ckpt["cfg"]
        elif not adapted:  # keep the file as written (comments included), not a re-rendering of it
            model.cfg_text = Path(opt.cfg).read_text(encoding="utf-8", errors="replace")
        self._resolve_hyp(model, resume_ckpt)
        self.precision = step_precision(self.device, self.hyp)
        apply_tf32(self.precision.tf32)
        self._initialize(model, resume_ckpt is None)
        self._build_update(model)
        self._build_datasets()
        self._plan_run()
        self.criterion = YoloLoss(self.model)
        # Resume states (before the DDP wrap, which broadcasts rank 0's weights).
        if resume_ckpt is not None:
            self._load_training_state(resume_ckpt)
        if self.dist.enabled:
            ddp_kwargs = {"device_ids": [self.device.index]} if self.device.type == "cuda" else {}
            self.train_model = nn.parallel.DistributedDataParallel(self.model, **ddp_kwargs)
        else:
            self.train_model = self.model
        self.forward = CompiledForward(self.train_model) if self.precision.compile else self.train_model
        self._open_run_folder(resumed=resume_ckpt is not None)

    def _read_resume_checkpoint(self) -> Optional[Dict[str, Any]]:
        """With ``--resume``: the checkpoint, and the run's saved options in place of ``self.options`` (only
        the machine-dependent settings and the run length may change). Otherwise None, and the paths in the
        options made absolute so that the saved options resume from any working directory."""
        opt = self.options
        if not opt.resume:
            for key in ("cfg", "data", "weights"):
                value = getattr(opt, key)
                if value and Path(value).exists():
                    setattr(opt, key, str(Path(value).resolve()))
            return None
        resume_path = Path(opt.resume)
        if resume_path.is_dir():
            resume_path = resume_path / "last.pt"
        ckpt = load_checkpoint_file(resume_path)
        if "train" not in ckpt:
            raise ConfigError(f"{resume_path}: not a training checkpoint (no optimizer/epoch state); "
                              "use --weights to start a new run from it")
        saved = TrainOptions(**{k: v for k, v in ckpt["train"]["options"].items()
                                if k in TrainOptions.__dataclass_fields__})
        saved.device = opt.device if opt.device is not None else saved.device
        saved.workers = opt.workers if opt.workers is not None else saved.workers
        saved.progress = opt.progress
        for key in MACHINE_SETTINGS:  # how the step runs may change; the saved value otherwise
            if getattr(opt, key) is not None:
                setattr(saved, key, getattr(opt, key))
        if opt.epochs is not None:
            saved.epochs = opt.epochs
        saved.resume = str(resume_path)
        self.options = saved
        self.resume_path = resume_path
        return ckpt

    def _read_cfg_and_data(self, resume_ckpt: Optional[Dict[str, Any]]) -> Tuple[List[Section], bool]:
        """The cfg's sections (from the checkpoint's cfg text on resume) and whether ``--adapt-classes`` set
        its heads to the class count of the dataset config (read into ``self.data``)."""
        opt = self.options
        if resume_ckpt is not None:
            sections = parse_cfg_text(resume_ckpt["cfg"], source=f"{self.resume_path}:cfg")
        else:
            if not opt.cfg:
                raise ConfigError("--cfg is required (a Darknet .cfg)")
            sections = parse_cfg(opt.cfg)
        if not opt.data:
            raise ConfigError("--data is required (a dataset YAML)")
        if self.main:
            self.data = load_data_config(opt.data)  # may generate the shapes data: rank 0 first
        barrier()
        if not self.main:
            self.data = load_data_config(opt.data)
        cfg_classes = [int(s.options.get("classes", 20)) for s in sections if s.type in ("yolo", "region")]
        adapted = bool(opt.adapt_classes and cfg_classes and any(c != self.data.num_classes for c in cfg_classes))
        if adapted:
            sections = with_num_classes(sections, self.data.num_classes)
            logger.info("cfg heads set to %d classes (--adapt-classes)", self.data.num_classes)
        return sections, adapted

    def _resolve_hyp(self, model: Darknet, resume_ckpt: Optional[Dict[str, Any]]) -> None:
        """``self.hyp``: from [net], --hyp and the flags (:func:`yolo.engine.config.resolve_hyp`), or the
        saved run's (only the run length and the workers may change). First checks the heads' class count."""
        opt = self.options
        if model.num_classes != self.data.num_classes:
            raise ConfigError(
                f"the cfg's heads predict {model.num_classes} classes but {opt.data} names {self.data.num_classes}: "
                f"set classes={self.data.num_classes} in each [yolo] and filters=(classes+5)*len(mask) in the "
                "[convolutional] before it, or pass --adapt-classes")
        if resume_ckpt is None:
            self.hyp = resolve_hyp(model.net, [s for s in model.sections if s.type in TRAINED_HEADS], opt.hyp,
                                   {"epochs": opt.epochs, "batch": opt.batch_size,
                                    "img_size": opt.img_size, "workers": opt.workers,
                                    **{key: getattr(opt, key) for key in MACHINE_SETTINGS}}, stride=model.stride)
        else:
            self.hyp = Hyperparameters.from_dict(resume_ckpt["train"]["hyp"])
            if opt.epochs is not None:
                self.hyp.epochs = int(opt.epochs)
            if opt.workers is not None:
                self.hyp.workers = int(opt.workers)
            for key in MACHINE_SETTINGS:
                if getattr(opt, key) is not None:
                    setattr(self.hyp, key, bool(getattr(opt, key)))
        for key in MACHINE_SETTINGS:  # opt.yaml records the values used
            setattr(opt, key, getattr(self.hyp, key))
        if self.hyp.batch < 2:
            logger.warning("batch=%d: the cfg's [net] has Darknet's testing settings; pass --batch-size "
                           "(BatchNorm needs several images per mini-batch)", self.hyp.batch)

    def _initialize(self, model: Darknet, fresh_run: bool) -> None:
        """BatchNorm momentum, pretrained weights (--weights), head priors, frozen layers; to the device."""
        opt, hyp = self.options, self.hyp
        if hyp.bn_momentum is not None:
            for m in model.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.momentum = hyp.bn_momentum
        if fresh_run:
            fresh = None  # heads starting from scratch: all of them without --weights
            if opt.weights:
                self.transfer_report = load_pretrained(model, opt.weights, cutoff=opt.cutoff)
                fresh = self.transfer_report.reinitialized_layers()
                if self.main:
                    for line in self.transfer_report.summary().splitlines():
                        logger.info("%s", line)
            if hyp.head_prior:
                prior_head_biases(model, tuple(hyp.img_size), fresh)
        self.frozen = freeze_layers(model, opt.freeze) if opt.freeze else []
        if self.frozen and self.main:
            logger.info("froze layers 0..%d (%d parameter tensors)", opt.freeze - 1, len(self.frozen))
        model.to(self.device)
        self.precision.prepare_model(model)  # before the optimizer and the EMA copy see the weights

    def _build_update(self, model: Darknet) -> None:
        """Optimizer, AMP scaler, EMA, SyncBatchNorm; sets ``self.model``."""
        hyp = self.hyp
        self.optimizer = optimizer_from_hyp(model, hyp)
        self.amp = self.precision.amp
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)
        # Only rank 0 evaluates and saves, so only it keeps the moving average.
        self.ema = ModelEMA(model, hyp.ema_decay, hyp.ema_tau) if hyp.ema and self.main else None
        if self.options.sync_bn and self.dist.enabled:
            if self.device.type == "cuda":
                model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
            else:
                logger.warning("--sync-bn needs CUDA (PyTorch has no CPU SyncBatchNorm): per-process BatchNorm")
        self.model = model

    def _build_datasets(self) -> None:
        """Train and val datasets (rank 0 scans first and writes the label caches; the others then read them),
        the mini-batch size per process and the updates per epoch."""
        hyp = self.hyp
        self.img_size = checked_image_size(hyp.img_size, self.model.stride,  # resolve_hyp's [h, w] or the checkpoint's
                                           f"{self.resume_path or 'hyp'}: img_size")
        for turn in (True, False):
            if self.main == turn:
                self.train_set = build_dataset(self.data, "train", img_size=self.img_size, augment=True,
                                               hyp=hyp.augment, seed=self.options.seed)
                if hyp.cache_images:  # before the loader's workers start: they share the decoded images
                    held = self.train_set.cache_images()
                    logger.info("cache_images: %d train images decoded and kept in memory (%.1f MB)",
                                len(self.train_set), held / 1e6)
                if self.main:
                    self.val_set = build_dataset(self.data, "val", img_size=self.img_size, augment=False)
                    # validate as the model trains, as the checkpoint records it (yolo.models.preprocessing)
                    self.val_set.resize = training_preprocessing(hyp.augment, self.img_size)["resize"]
            barrier()
        world = self.dist.world_size
        per_update = hyp.batch // hyp.subdivisions
        if per_update % world:
            raise ConfigError(f"batch/subdivisions = {per_update} images per mini-batch cannot be split over "
                              f"{world} processes")
        self.mini_batch = per_update // world
        self.accumulate = hyp.subdivisions
        per_rank = math.ceil(len(self.train_set) / world)
        minibatches = per_rank // self.mini_batch
        if minibatches < self.accumulate:
            raise ConfigError(f"the train split has {len(self.train_set)} images: fewer than one update of "
                              f"batch={hyp.batch} ({world} process(es)); lower --batch-size")
        self.steps_per_epoch = minibatches // self.accumulate
        if hyp.max_steps_per_epoch:
            self.steps_per_epoch = min(self.steps_per_epoch, hyp.max_steps_per_epoch)

    def _plan_run(self) -> None:
        """Epochs, updates, the learning-rate schedule, loader workers and the multi-scale rule."""
        hyp, seed = self.hyp, self.options.seed
        if hyp.epochs is None:
            hyp.epochs = max(1, math.ceil(hyp.max_batches / self.steps_per_epoch))
        self.epochs = hyp.epochs
        self.total_steps = self.epochs * self.steps_per_epoch
        self.schedule = schedule_from_hyp(hyp, self.total_steps, seed=seed)
        if hyp.max_batches and hyp.max_batches != self.total_steps and hyp.policy in ("poly", "sgdr") and self.main:
            logger.warning("policy=%s follows max_batches=%d, but this run makes %d updates", hyp.policy,
                           hyp.max_batches, self.total_steps)
        late = [s for s in self.schedule.steps if s > self.total_steps]
        if late and self.main:
            logger.warning("lr steps %s lie beyond this run's %d updates: they never apply", late, self.total_steps)
        long_burn_in = burn_in_outlasts_run(self.schedule, self.total_steps)
        if long_burn_in and self.main:
            logger.warning("%s", long_burn_in)
        self.workers = hyp.workers if hyp.workers is not None else min(4, max(0, (os.cpu_count() or 1) - 1))
        # Multi-scale: run-wide mini-batch index -> (h, w) its images are loaded at (None: img_size).
        if isinstance(hyp.multi_scale, dict):  # the cfg's random: Darknet's rule, one size per update
            sizes = DarknetMultiScale(self.img_size, random=hyp.multi_scale["random"],
                                      resize_step=hyp.multi_scale["resize_step"],
                                      total_updates=self.total_steps, seed=seed)
            self.multi_scale = lambda minibatch: sizes(minibatch // self.accumulate)
        elif hyp.multi_scale:
            low, high = hyp.multi_scale_range
            self.multi_scale = MultiScale(self.img_size, stride=self.model.stride, low=low, high=high,
                                          every=hyp.multi_scale_every, seed=seed)
        self.update_losses = torch.zeros(self.accumulate, 4, dtype=torch.float64, device=self.device)

    def _load_training_state(self, ckpt: Dict[str, Any]) -> None:
        state = ckpt["train"]
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.amp and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None:
            self.ema.load_state_dict(state["ema"], ckpt["model"])
        self.epoch = int(state["epoch"])
        self.epoch_step = int(state["epoch_step"])
        self.global_step = int(state["global_step"])
        self.best_fitness = float(state["best_fitness"])
        self.last_metrics = dict(state.get("metrics") or {})
        self._resume_rng = state["rng"]
        self._resume_sums = state.get("epoch_sums")
        if self.main:
            logger.info("resuming %s at epoch %d, update %d of the epoch (update %d overall)", self.resume_path,
                        self.epoch + 1, self.epoch_step, self.global_step)

    def _open_run_folder(self, resumed: bool) -> None:
        """The run folder (a new one, or the resumed run's), its settings files and the hooks that write to it."""
        opt, hyp = self.options, self.hyp
        if resumed:
            self.run_dir = self.resume_path.parent
        else:
            run_dir = str(increment_path(Path(opt.project) / run_name(opt.name))) if self.main else None
            self.run_dir = Path(broadcast_object(run_dir))
        if not self.main:
            return
        lock = RunFolderLock(self.run_dir)  # before anything in the folder is touched
        self.loop_hooks = [lock]  # released by fit() whatever happens next
        self.best_fitness = recover_run_folder(self.run_dir, resumed, self.best_fitness)
        if not resumed:  # a resumed run keeps the settings files it started with, but for its new run length
            write_settings(self.run_dir, self.model.cfg_text, hyp.to_dict(), opt.to_dict(), self.data)
        else:
            update_settings(self.run_dir, opt.to_dict(), hyp.to_dict())
        # The order matters: evaluation decides is_best before results.csv and the checkpoints are written.
        self.loop_hooks = [lock, Guarded(ProgressWriter(use_bars(opt.progress)), "progress display"),
                           EvalHook(hyp.eval_interval), ResultsCSVWriter(self.run_dir / "results.csv")]
        if hyp.plots:
            chart = ResultsChartWriter(self.run_dir / "results.csv", self.run_dir / "results.png")
            self.loop_hooks.append(Guarded(chart, "results chart (results.png)"))
        if hyp.tensorboard:
            tensorboard = TensorBoardWriter(self.run_dir, hyp.tb_images)
            self.writer = tensorboard.writer
            self.loop_hooks.append(Guarded(tensorboard, "TensorBoard writer"))
        self.loop_hooks.append(CheckpointHook())
        logger.info("run folder %s: %d epochs x %d updates of %d images (%d mini-batch(es) of %d x %d "
                    "process(es)), img %dx%d, lr %g, %s (%s)", self.run_dir, self.epochs, self.steps_per_epoch,
                    hyp.batch, self.accumulate, self.mini_batch, self.dist.world_size, self.img_size[0],
                    self.img_size[1], hyp.learning_rate, self.device, self.precision.describe())

    # ---------------------------------------------------------------- data per epoch
    def _train_loader(self, epoch: int, skip_steps: int):
        if self.dist.enabled:
            sampler = DistributedEpochSampler(self.train_set, num_replicas=self.dist.world_size,
                                              rank=self.dist.rank, shuffle=True, seed=self.options.seed)
        else:
            sampler = EpochShuffleSampler(len(self.train_set), self.options.seed)
        sampler.set_epoch(epoch)
        if skip_steps:
            sampler = SkipSampler(sampler, skip_steps * self.accumulate * self.mini_batch)
        if getattr(self, "_epoch_loader", None) is None:  # one loader for the run: its workers persist
            # On CUDA the batches travel pinned and as uint8 (a quarter of the bytes), converted on the device;
            # on the CPU the workers convert them, in parallel.
            cuda = self.device.type == "cuda"
            self._epoch_loader = EpochLoader(self.train_set, self.mini_batch, self.workers, self.options.seed,
                                             cuda, self.multi_scale, uint8_images=cuda)
        return self._epoch_loader.epoch(sampler, epoch, (epoch * self.steps_per_epoch + skip_steps) * self.accumulate)

    # ---------------------------------------------------------------- the loop
    def _train(self) -> TrainResult:
        if self._resume_rng is not None:
            set_rng_state(self._resume_rng)
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
            self.epoch, self.epoch_step = epoch + 1, 0
            if self.dist.enabled:  # epoch losses over every process
                torch.distributed.all_reduce(self.loss_sums)
            sums = self.loss_sums.tolist()  # the per-epoch CPU-GPU sync
            n = max(sums[3], 1.0)
            box, obj, cls = sums[0] / n, sums[1] / n, sums[2] / n
            self.epoch_losses = {"box_loss": box, "obj_loss": obj, "cls_loss": cls, "loss": box + obj + cls}
            self._call_hooks("after_epoch")  # evaluation, results.csv, TensorBoard, best.pt and last.pt
            barrier()
            self._emit("epoch_end")
            if any_true(self._stop_requested, self.device):
                status = "interrupted"
                break
        return self._result(status)

    def _result(self, status: str) -> TrainResult:
        best = self.run_dir / "best.pt"
        return TrainResult(run_dir=self.run_dir, status=status, epochs_done=self.epoch, global_step=self.global_step,
                           best_fitness=self.best_fitness, metrics=self.last_metrics, last=self.run_dir / "last.pt",
                           best=best if best.exists() else None, throughput=self.throughput)

    def _train_epoch(self, epoch: int) -> bool:
        """One epoch (from ``self.epoch_step``); returns True when a stop was requested and saved."""
        self.train_model.train()
        if self.options.freeze:
            frozen_to_eval(self.model, self.options.freeze)
        start_step = self.epoch_step
        loader = self._train_loader(epoch, start_step)
        num_batches = (self.steps_per_epoch - start_step) * self.accumulate
        self.loss_sums = torch.zeros(4, dtype=torch.float64, device=self.device)
        if self._resume_sums is not None and start_step:
            self.loss_sums += self._resume_sums.to(self.device)
        self._resume_sums = None
        self._call_hooks("before_epoch")
        self.optimizer.zero_grad(set_to_none=True)
        self.epoch_start = time.perf_counter()
        for i, (images, targets, _infos) in enumerate(loader):
            if i >= num_batches:
                break
            if not self.run_step(images, targets, start_step * self.accumulate + i):
                continue
            self.epoch_step += 1
            self._call_hooks("after_step")
            self._emit("step_end")
            # Every process stops at the same update: with DDP the requests came with the update's one sync (a
            # request made after it, during this update's hooks, stops the run after the next update).
            stop = self._stop_everywhere if self.dist.enabled else self._stop_requested
            if self.epoch_step < self.steps_per_epoch and stop:
                self._call_hooks("after_interrupt")  # last.pt at this update
                barrier()
                return True
        self.epoch_seconds = time.perf_counter() - self.epoch_start
        self.epoch_images = (self.steps_per_epoch - start_step) * self.hyp.batch
        self.throughput = self.epoch_images / max(self.epoch_seconds, 1e-9)  # images/s, all processes
        self._call_hooks("after_epoch_updates")
        return False

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
        yet (``dont_update``/``burnin_update``), optional norm clipping, the step, weight clipping, EMA."""
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
        if self.main:
            logger.error("%s", message)
        raise NonFiniteLossError(message)

    # ---------------------------------------------------------------- evaluation
    def _evaluate(self, epoch: int, final: bool) -> Dict[str, Any]:
        """COCO metrics after ``epoch`` (0-based): :func:`yolo.engine.hooks.evaluation.evaluate_run`."""
        return evaluate_run(self, epoch, final)


def train(**kwargs) -> TrainResult:
    """``Trainer(TrainOptions(**kwargs)).fit()``."""
    return Trainer(TrainOptions(**kwargs)).fit()


__all__ = ["NonFiniteLossError", "TrainOptions", "TrainResult", "Trainer", "train"]
