"""The training loop: SGD with Darknet's schedule, accumulation, AMP, EMA, evaluation, checkpoints, resume, DDP.

One optimizer update consumes ``batch`` images (over all processes) in ``subdivisions`` mini-batches whose
gradients are accumulated; the loss is per image (:class:`yolo.loss.YoloLoss`), each mini-batch's loss is
divided by ``subdivisions``, so the update sees the mean gradient per image and Darknet's learning rates
carry over. The update is Darknet's (:mod:`yolo.engine.optimizer`: SGD with momentum and weight decay on conv
weights only, or Darknet's Adam with ``adam=1``; each layer's ``learning_rate`` key scales its rate). The
learning rate of update ``n`` is :class:`yolo.engine.schedule.LRSchedule` at ``n``.

A run folder ``runs/train/NAME`` (never an earlier run's) receives ``cfg.cfg``, ``hyp.yaml``, ``opt.yaml``
and ``data.yaml`` (the exact settings), ``results.csv`` (one row per epoch), ``last.pt`` and ``best.pt``
(written atomically), TensorBoard events, and at the end ``metrics.json`` and the evaluation plots.

Checkpoints hold what a resumed run needs to continue bit for bit: the training weights, the EMA weights,
optimizer, GradScaler, update counters, the position in the epoch, and the torch / numpy / Python RNG
states; data order and augmentation are functions of ``(seed, epoch, index)``. ``Ctrl-C`` (SIGINT) or
SIGTERM finishes the current update, saves ``last.pt`` at that point and stops (a second Ctrl-C aborts
at once). A non-finite loss stops the run with :class:`NonFiniteLossError` before it can touch the weights;
the last checkpoint on disk stays the last good one.
"""
from __future__ import annotations

import contextlib
import csv
import logging
import math
import os
import platform
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import yaml

from yolo.runs import increment_path
from yolo.models.cfg import parse_cfg, parse_cfg_text
from yolo.device import parse_device
from yolo.files.atomic import atomic_path, remove_stale_temp_files
from yolo.models.checkpoint import load_checkpoint_file, model_checkpoint, save_checkpoint
from yolo.losses.yolo_loss import YoloLoss
from yolo.losses.region_loss import set_images_seen
from yolo.models.heads import is_head
from yolo.models.model import Darknet
from yolo.progress import use_bars
from yolo.engine.config import TrainOptions, resolve_hyp
from yolo.errors import ConfigError
from yolo.engine.distributed import (DistInfo, DistributedEpochSampler, SkipSampler, any_true, barrier, broadcast_object,
                          cleanup_distributed, init_distributed)
from yolo.engine.ema import ModelEMA
from yolo.engine.optimizer import build_optimizer, clip_weights, hold_gradients, holds_gradients, optimizer_from_hyp
from yolo.engine.schedule import LRSchedule, schedule_from_hyp, set_lr
from yolo.engine.transfer import freeze_layers, frozen_to_eval, load_pretrained, with_num_classes
from yolo.errors import NonFiniteLossError

logger = logging.getLogger(__name__)

RESULTS_COLUMNS = ("epoch", "box_loss", "obj_loss", "cls_loss", "loss", "lr", "precision", "recall",
                   "mAP50", "mAP50_95", "time_s")


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


def fitness(metrics: Dict[str, Any]) -> float:
    """The number ``best.pt`` maximizes: ``0.1 * mAP50 + 0.9 * mAP50_95``."""
    return 0.1 * max(float(metrics.get("mAP50", 0.0)), 0.0) + 0.9 * max(float(metrics.get("mAP50_95", 0.0)), 0.0)


# ------------------------------------------------------------------------------ RNG state
def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> Dict[str, Any]:
    """The torch, numpy and Python RNG states as plain types (loadable with ``weights_only=True``)."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {"key": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])},
        "python": {"version": int(py_state[0]), "state": list(py_state[1]),
                   "gauss": py_state[2]},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ------------------------------------------------------------------------------ optimizer
def prior_head_biases(model: nn.Module, img_hw: Tuple[int, int], layers: Optional[List[int]] = None,
                      objects_per_image: float = 8.0) -> List[int]:
    """Start the heads' objectness and class logits at a prior instead of 0 (probability 0.5).

    With zero biases every one of the thousands of predictions starts at objectness 0.5, and the
    background term swamps the first updates. The prior gives each cell ``objects_per_image / cells``
    objectness and each class ``0.6 / (classes - 0.99)``. Applies to the ``[convolutional]`` right before
    each ``[yolo]`` head at module index ``i`` for which ``i - 1`` is in ``layers`` (all heads when None),
    except heads with ``new_coords=1`` (their logistic is in the conv). Returns the conv layer indices set.
    """
    done = []
    for i, head in enumerate(model.module_list):
        if not is_head(head) or int(getattr(head.opts, "new_coords", 0)):
            continue
        prev = model.module_list[i - 1]
        conv = getattr(prev, "conv", None)
        if conv is None or conv.bias is None or (layers is not None and i - 1 not in layers):
            continue
        grid_h = model.layer_infos[i].out_shape[1]  # at the cfg's [net] size
        stride = model.input_size[0] / grid_h if grid_h else 32.0
        cells = (img_hw[0] / stride) * (img_hw[1] / stride)
        with torch.no_grad():
            bias = conv.bias.view(head.num_anchors, -1)
            bias[:, 4] = math.log(objects_per_image / cells)
            bias[:, 5:] = math.log(0.6 / max(head.num_classes - 0.99, 0.01))
        done.append(i - 1)
    return done


# ------------------------------------------------------------------------------ the trainer
class Trainer:
    """Train a Darknet cfg on a dataset YAML; see the module docstring.

    Example::

        result = Trainer(TrainOptions(cfg="configs/yolov3-tiny-shapes.cfg", data="configs/shapes.yaml",
                                      hyp="configs/hyp.shapes.yaml", device="cpu")).fit()

    Hooks (``trainer.hooks[event].append(fn)``, ``fn(trainer)``): ``train_start`` (after setup),
    ``step_end`` (after each optimizer update), ``epoch_end`` (after evaluation and checkpoints).
    ``trainer.request_stop()`` (what Ctrl-C does) ends the run at the next update boundary with a checkpoint.
    """

    EVENTS = ("train_start", "step_end", "epoch_end")

    def __init__(self, options: TrainOptions):
        self.options = options
        self.hooks: Dict[str, List[Callable[["Trainer"], None]]] = {e: [] for e in self.EVENTS}
        self._stop_requested = False
        self.writer = None
        self.epoch = 0
        self.epoch_step = 0
        self.global_step = 0
        self.best_fitness = -1.0
        self.last_metrics: Dict[str, Any] = {}

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
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            cleanup_distributed()

    # ---------------------------------------------------------------- signals
    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = {}

        def handler(signum, frame):
            if self._stop_requested:
                raise KeyboardInterrupt
            self._stop_requested = True
            dist_info = getattr(self, "dist", None)
            if dist_info is None or dist_info.is_main:
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

    # ---------------------------------------------------------------- setup
    def _setup(self) -> None:
        opt = self.options
        resume_ckpt = None
        if opt.resume:
            resume_path = Path(opt.resume)
            if resume_path.is_dir():
                resume_path = resume_path / "last.pt"
            resume_ckpt = load_checkpoint_file(resume_path)
            if "train" not in resume_ckpt:
                raise ConfigError(f"{resume_path}: not a training checkpoint (no optimizer/epoch state); "
                                  "use --weights to start a new run from it")
            saved = TrainOptions(**{k: v for k, v in resume_ckpt["train"]["options"].items()
                                    if k in TrainOptions.__dataclass_fields__})
            # Only the machine-dependent settings and the run length may change on resume.
            saved.device = opt.device if opt.device is not None else saved.device
            saved.workers = opt.workers if opt.workers is not None else saved.workers
            saved.progress = opt.progress
            if opt.epochs is not None:
                saved.epochs = opt.epochs
            saved.resume = str(resume_path)
            self.options = opt = saved
            self.resume_path = resume_path
        else:
            # Absolute paths, so the saved options resume from any working directory.
            for key in ("cfg", "data", "weights"):
                value = getattr(opt, key)
                if value and Path(value).exists():
                    setattr(opt, key, str(Path(value).resolve()))

        self.device = parse_device(opt.device, int(os.environ.get("LOCAL_RANK", "0")))
        self.dist: DistInfo = init_distributed(self.device)
        self.main = self.dist.is_main
        if not self.main:
            opt.progress = False

        # Model from the cfg (or the cfg text the checkpoint carries).
        if resume_ckpt is not None:
            sections = parse_cfg_text(resume_ckpt["cfg"], source=f"{self.resume_path}:cfg")
        else:
            if not opt.cfg:
                raise ConfigError("--cfg is required (a Darknet .cfg)")
            sections = parse_cfg(opt.cfg)
        from yolo.data.config import load_data_config

        if not opt.data:
            raise ConfigError("--data is required (a dataset YAML)")
        if self.main:
            self.data = load_data_config(opt.data)  # may generate the shapes data: rank 0 first
        barrier()
        if not self.main:
            self.data = load_data_config(opt.data)
        cfg_classes = [int(s.options.get("classes", 20)) for s in sections if s.type in ("yolo", "region")]
        adapted = opt.adapt_classes and cfg_classes and any(c != self.data.num_classes for c in cfg_classes)
        if adapted:
            sections = with_num_classes(sections, self.data.num_classes)
            logger.info("cfg heads set to %d classes (--adapt-classes)", self.data.num_classes)
        seed_everything(opt.seed)
        model = Darknet(sections)
        if resume_ckpt is not None:
            model.cfg_text = resume_ckpt["cfg"]
        elif not adapted:  # keep the file as written (comments included), not a re-rendering of it
            model.cfg_text = Path(opt.cfg).read_text(encoding="utf-8", errors="replace")
        if model.num_classes != self.data.num_classes:
            raise ConfigError(
                f"the cfg's heads predict {model.num_classes} classes but {opt.data} names {self.data.num_classes}: "
                f"set classes={self.data.num_classes} in each [yolo] and filters=(classes+5)*len(mask) in the "
                "[convolutional] before it, or pass --adapt-classes")
        if resume_ckpt is None:
            self.hyp = resolve_hyp(model.net, [s for s in model.sections if s.type in ("yolo", "region")], opt.hyp,
                                   {"epochs": opt.epochs, "batch": opt.batch_size,
                                    "img_size": opt.img_size, "workers": opt.workers})
        else:
            # The saved hyperparameters are the run's; only the run length and the workers may change.
            self.hyp = dict(resume_ckpt["train"]["hyp"])
            if opt.epochs is not None:
                self.hyp["epochs"] = int(opt.epochs)
            if opt.workers is not None:
                self.hyp["workers"] = int(opt.workers)
        hyp = self.hyp
        if hyp["batch"] < 2:
            logger.warning("batch=%d: the cfg's [net] has Darknet's testing settings; pass --batch-size "
                           "(BatchNorm needs several images per mini-batch)", hyp["batch"])

        if hyp.get("bn_momentum") is not None:
            for m in model.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.momentum = float(hyp["bn_momentum"])

        self.transfer_report = None
        if resume_ckpt is None:
            fresh = None  # heads starting from scratch: all of them without --weights
            if opt.weights:
                self.transfer_report = load_pretrained(model, opt.weights, cutoff=opt.cutoff)
                fresh = self.transfer_report.reinitialized_layers()
                if self.main:
                    for line in self.transfer_report.summary().splitlines():
                        logger.info("%s", line)
            if hyp.get("head_prior", False):
                prior_head_biases(model, tuple(hyp["img_size"]), fresh)
        self.frozen = freeze_layers(model, opt.freeze) if opt.freeze else []
        if self.frozen and self.main:
            logger.info("froze layers 0..%d (%d parameter tensors)", opt.freeze - 1, len(self.frozen))
        model.to(self.device)

        self.optimizer = optimizer_from_hyp(model, hyp)
        self.amp = bool(hyp["amp"]) and self.device.type == "cuda"
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)
        # Only rank 0 evaluates and saves, so only it keeps the moving average.
        self.ema = ModelEMA(model, hyp["ema_decay"], hyp["ema_tau"]) if hyp["ema"] and self.main else None

        if opt.sync_bn and self.dist.enabled:
            if self.device.type == "cuda":
                model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
            else:
                logger.warning("--sync-bn needs CUDA (PyTorch has no CPU SyncBatchNorm): per-process BatchNorm")
        self.model = model  # unwrapped

        # Data.
        from yolo.data import build_dataset

        self.img_size = tuple(hyp["img_size"])
        stride = model.stride
        if self.img_size[0] % stride or self.img_size[1] % stride:
            raise ConfigError(f"img_size {list(self.img_size)} must be a multiple of the network stride {stride}")
        # Rank 0 scans first (and writes the label caches); the others then read them.
        self.train_set = self.val_set = None
        for turn in (True, False):
            if self.main == turn:
                self.train_set = build_dataset(self.data, "train", img_size=self.img_size, augment=True,
                                               hyp=hyp["augment"], seed=opt.seed)
                if self.main:
                    self.val_set = build_dataset(self.data, "val", img_size=self.img_size, augment=False)
            barrier()
        world = self.dist.world_size
        per_update = hyp["batch"] // hyp["subdivisions"]
        if per_update % world:
            raise ConfigError(f"batch/subdivisions = {per_update} images per mini-batch cannot be split over "
                              f"{world} processes")
        self.mini_batch = per_update // world
        self.accumulate = hyp["subdivisions"]
        per_rank = math.ceil(len(self.train_set) / world)
        minibatches = per_rank // self.mini_batch
        if minibatches < self.accumulate:
            raise ConfigError(f"the train split has {len(self.train_set)} images: fewer than one update of "
                              f"batch={hyp['batch']} ({world} process(es)); lower --batch-size")
        self.steps_per_epoch = minibatches // self.accumulate
        if hyp.get("max_steps_per_epoch"):
            self.steps_per_epoch = min(self.steps_per_epoch, int(hyp["max_steps_per_epoch"]))
        if hyp["epochs"] is None:
            hyp["epochs"] = max(1, math.ceil(hyp["max_batches"] / self.steps_per_epoch))
        self.epochs = int(hyp["epochs"])
        self.total_steps = self.epochs * self.steps_per_epoch
        self.schedule: LRSchedule = schedule_from_hyp(hyp, self.total_steps, seed=opt.seed)
        if (hyp["max_batches"] and hyp["max_batches"] != self.total_steps and hyp["policy"] in ("poly", "sgdr")
                and self.main):
            logger.warning("policy=%s follows max_batches=%d, but this run makes %d updates", hyp["policy"],
                           hyp["max_batches"], self.total_steps)
        late = [s for s in self.schedule.steps if s > self.total_steps]
        if late and self.main:
            logger.warning("lr steps %s lie beyond this run's %d updates: they never apply", late, self.total_steps)
        workers = hyp.get("workers")
        if workers is None:
            workers = min(4, max(0, (os.cpu_count() or 1) - 1))
        self.workers = int(workers)
        # Multi-scale: run-wide mini-batch index -> (h, w) its images are loaded at (None: img_size).
        self.multi_scale = None
        if isinstance(hyp["multi_scale"], dict):  # the cfg's random: Darknet's rule, one size per update
            from yolo.data.darknet_multiscale import DarknetMultiScale

            sizes = DarknetMultiScale(self.img_size, random=hyp["multi_scale"]["random"],
                                      resize_step=hyp["multi_scale"]["resize_step"],
                                      total_updates=self.total_steps, seed=opt.seed)
            self.multi_scale = lambda minibatch: sizes(minibatch // self.accumulate)
        elif hyp["multi_scale"]:
            from yolo.data import MultiScale

            low, high = hyp["multi_scale_range"]
            self.multi_scale = MultiScale(self.img_size, stride=stride, low=low, high=high,
                                          every=int(hyp["multi_scale_every"]), seed=opt.seed)
        self.criterion = YoloLoss(model)

        # Resume states (before the DDP wrap, which broadcasts rank 0's weights).
        if resume_ckpt is not None:
            self._load_training_state(resume_ckpt)
        if self.dist.enabled:
            ddp_kwargs = {"device_ids": [self.device.index]} if self.device.type == "cuda" else {}
            self.train_model = nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
        else:
            self.train_model = model

        # Run folder.
        if resume_ckpt is not None:
            self.run_dir = self.resume_path.parent
        else:
            run_dir = None
            if self.main:
                run_dir = str(increment_path(Path(opt.project) / opt.name))
            self.run_dir = Path(broadcast_object(run_dir))
        if self.main:
            self._recover_run_folder(resumed=resume_ckpt is not None)
            if resume_ckpt is None:  # a resumed run keeps the settings files it started with
                self._write_settings()
            if hyp["tensorboard"]:
                self.writer = _summary_writer(self.run_dir)
            logger.info("run folder %s: %d epochs x %d updates of %d images (%d mini-batch(es) of %d x %d "
                        "process(es)), img %dx%d, lr %g, %s", self.run_dir, self.epochs, self.steps_per_epoch,
                        hyp["batch"], self.accumulate, self.mini_batch, world, self.img_size[0], self.img_size[1],
                        hyp["learning_rate"], self.device)

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

    def _recover_run_folder(self, resumed: bool) -> None:
        """Undo what a kill during a save left behind: temp files, and a best score without its best.pt."""
        stale = remove_stale_temp_files(self.run_dir)
        if stale:
            logger.warning("removed %d unfinished file(s) of an interrupted save: %s", len(stale),
                           ", ".join(p.name for p in stale))
        if resumed and self.best_fitness >= 0 and not (self.run_dir / "best.pt").is_file():
            logger.warning("%s is missing although last.pt records a best fitness of %.4f: the next evaluation "
                           "writes a new best.pt", self.run_dir / "best.pt", self.best_fitness)
            self.best_fitness = -1.0

    def _write_settings(self) -> None:
        d = self.run_dir
        (d / "cfg.cfg").write_text(self.model.cfg_text, encoding="utf-8")
        _write_yaml(d / "hyp.yaml", self.hyp)
        _write_yaml(d / "opt.yaml", {k: v for k, v in self.options.to_dict().items() if k != "hyp"}
                    | {"hyp": str(self.options.hyp) if not isinstance(self.options.hyp, dict) else "inline"})
        source = getattr(self.data, "source", None)
        if source is not None and Path(source).is_file():
            (d / "data.yaml").write_text(Path(source).read_text(encoding="utf-8"), encoding="utf-8")
        env = software_environment()
        _write_yaml(d / "environment.yaml", env)
        logger.info("environment: %s (identical losses need the same versions, thread count and seed)",
                    ", ".join(f"{k} {v}" for k, v in env.items()))

    # ---------------------------------------------------------------- data per epoch
    def _train_loader(self, epoch: int, skip_steps: int):
        from yolo.data import create_dataloader, set_epoch
        from yolo.data.loader import EpochShuffleSampler

        if self.dist.enabled:
            sampler = DistributedEpochSampler(self.train_set, num_replicas=self.dist.world_size,
                                              rank=self.dist.rank, shuffle=True, seed=self.options.seed)
        else:
            sampler = EpochShuffleSampler(len(self.train_set), self.options.seed)
        sampler.set_epoch(epoch)
        if skip_steps:
            sampler = SkipSampler(sampler, skip_steps * self.accumulate * self.mini_batch)
        loader = create_dataloader(self.train_set, batch_size=self.mini_batch, num_workers=self.workers,
                                   seed=self.options.seed + epoch, drop_last=True, sampler=sampler,
                                   pin_memory=self.device.type == "cuda", size_of=self.multi_scale,
                                   first_batch=(epoch * self.steps_per_epoch + skip_steps) * self.accumulate)
        set_epoch(loader, epoch)
        return loader

    # ---------------------------------------------------------------- the loop
    def _train(self) -> TrainResult:
        if getattr(self, "_resume_rng", None) is not None:
            set_rng_state(self._resume_rng)
        if self.epoch >= self.epochs:
            if self.main:
                logger.info("the run already finished its %d epochs: nothing to resume", self.epochs)
            return self._result("finished")
        status = "finished"
        for epoch in range(self.epoch, self.epochs):
            self.epoch = epoch
            stopped = self._train_epoch(epoch)
            if stopped:
                status = "interrupted"
                break
            self.epoch, self.epoch_step = epoch + 1, 0
            last_epoch = epoch + 1 == self.epochs
            if self.dist.enabled:  # epoch losses over every process
                sums = self._epoch_sums.to(self.device)
                torch.distributed.all_reduce(sums)
                self._epoch_sums = sums.cpu()
            metrics = {}
            if self.main and (last_epoch or (epoch + 1) % int(self.hyp["eval_interval"]) == 0):
                metrics = self._evaluate(epoch, final=last_epoch)
            if self.main:
                is_best = bool(metrics) and fitness(metrics) > self.best_fitness
                if is_best:
                    self.best_fitness = fitness(metrics)
                self._log_epoch(epoch, metrics)
                self._save(best=is_best)
            barrier()
            self._emit("epoch_end")
            if any_true(self._stop_requested, self.device):
                status = "interrupted"
                break
        return self._result(status)

    def _result(self, status: str) -> TrainResult:
        run_dir = self.run_dir
        best = run_dir / "best.pt"
        return TrainResult(run_dir=run_dir, status=status, epochs_done=self.epoch, global_step=self.global_step,
                           best_fitness=self.best_fitness, metrics=self.last_metrics, last=run_dir / "last.pt",
                           best=best if best.exists() else None, throughput=getattr(self, "throughput", 0.0))

    def _train_epoch(self, epoch: int) -> bool:
        """One epoch (from ``self.epoch_step``); returns True when a stop was requested and saved."""
        from tqdm import tqdm

        model, hyp = self.train_model, self.hyp
        model.train()
        if self.options.freeze:
            frozen_to_eval(self.model, self.options.freeze)
        start_step = self.epoch_step
        loader = self._train_loader(epoch, start_step)
        num_batches = (self.steps_per_epoch - start_step) * self.accumulate
        minibatches_per_epoch = self.steps_per_epoch * self.accumulate
        sums = torch.zeros(4, dtype=torch.float64)  # box, obj, cls, count of mini-batches
        resumed = getattr(self, "_resume_sums", None)
        if resumed is not None and start_step:
            sums += resumed
        self._resume_sums = None
        self._epoch_sums = sums
        bar = tqdm(total=self.steps_per_epoch, initial=start_step, disable=not use_bars(self.options.progress),
                   desc=f"epoch {epoch + 1}/{self.epochs}", dynamic_ncols=True, leave=True)
        self.optimizer.zero_grad(set_to_none=True)
        self._epoch_start = time.perf_counter()
        try:
            for i, (images, targets, _infos) in enumerate(loader):
                if i >= num_batches:
                    break
                b = start_step * self.accumulate + i  # mini-batch index within the epoch
                global_b = epoch * minibatches_per_epoch + b
                images = images.to(self.device, non_blocking=True)
                targets = targets.to(self.device)
                size_hw = tuple(images.shape[-2:])
                last_of_update = (b + 1) % self.accumulate == 0
                sync = last_of_update or not self.dist.enabled
                ctx = model.no_sync() if not sync else contextlib.nullcontext()
                with ctx:
                    with torch.autocast(device_type=self.device.type, enabled=self.amp):
                        outputs = model(images)
                    # Darknet's [region] prior term depends on the images seen so far, this batch included.
                    set_images_seen(self.model, (global_b + 1) * images.shape[0] * self.dist.world_size)
                    loss, parts = self.criterion(outputs, targets, size_hw)
                    bad = not bool(torch.isfinite(loss).item())
                    if any_true(bad, self.device):
                        self._non_finite(epoch, b, loss, parts)
                    self.scaler.scale(loss / self.accumulate).backward()
                sums += torch.tensor([float(parts["box"]), float(parts["obj"]), float(parts["cls"]), 1.0],
                                     dtype=torch.float64)
                if not last_of_update:
                    continue
                self._optimizer_step()
                self.epoch_step += 1
                if self.main:
                    n = max(sums[3].item(), 1.0)
                    bar.set_postfix_str(f"box {sums[0] / n:.3f} obj {sums[1] / n:.3f} cls {sums[2] / n:.3f} "
                                        f"lr {self.lr:.2e} img {size_hw[1]}x{size_hw[0]} "
                                        f"targets {parts['num_targets']}", refresh=False)
                    bar.update(1)
                    if bar.disable and self.epoch_step % 10 == 0:  # with --verbose, in logs
                        logger.debug("epoch %d/%d update %d/%d: box %.3f obj %.3f cls %.3f lr %.2e", epoch + 1,
                                    self.epochs, self.epoch_step, self.steps_per_epoch, sums[0] / n, sums[1] / n,
                                    sums[2] / n, self.lr)
                    if self.writer is not None:
                        w = self.writer
                        w.add_scalar("train/box_loss", float(parts["box"]), self.global_step)
                        w.add_scalar("train/obj_loss", float(parts["obj"]), self.global_step)
                        w.add_scalar("train/cls_loss", float(parts["cls"]), self.global_step)
                        w.add_scalar("train/loss", float(loss.detach()), self.global_step)
                        w.add_scalar("train/lr", self.lr, self.global_step)
                self._emit("step_end")
                if self.epoch_step < self.steps_per_epoch and any_true(self._stop_requested, self.device):
                    if self.main:
                        self._save(best=False)
                        bar.close()
                        logger.warning("stopped at epoch %d, update %d/%d; saved %s (continue with --resume %s)",
                                       epoch + 1, self.epoch_step, self.steps_per_epoch, self.run_dir / "last.pt",
                                       self.run_dir / "last.pt")
                    barrier()
                    return True
        finally:
            bar.close()
        seconds = time.perf_counter() - self._epoch_start
        images = (self.steps_per_epoch - start_step) * self.hyp["batch"]
        self.throughput = images / max(seconds, 1e-9)  # training images per second, all processes
        if self.main:
            n = max(sums[3].item(), 1.0)
            logger.info("epoch %d/%d: box %.3f obj %.3f cls %.3f lr %.2e; trained on %d images in %.1f s "
                        "(%.2f images/s)", epoch + 1, self.epochs, sums[0] / n, sums[1] / n, sums[2] / n,
                        getattr(self, "lr", 0.0), images, seconds, self.throughput)
        return False

    def _optimizer_step(self) -> None:
        self.global_step += 1
        self.lr = self.schedule(self.global_step)
        set_lr(self.optimizer, self.lr)
        unscaled = False
        held = self.__dict__.setdefault("held_gradients", {})  # layers Darknet does not update yet (dont_update)
        if holds_gradients(self.optimizer, self.global_step, held):
            self.scaler.unscale_(self.optimizer)
            unscaled = True
            hold_gradients(self.optimizer, self.global_step, held)
        if self.hyp.get("max_grad_norm"):
            if not unscaled:
                self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.model.parameters(), float(self.hyp["max_grad_norm"]))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        clip_weights(self.optimizer, self.global_step)
        if self.ema is not None:
            self.ema.update(self.model)

    def _non_finite(self, epoch: int, b: int, loss: torch.Tensor, parts: Dict[str, Any]) -> None:
        last = self.run_dir / "last.pt" if hasattr(self, "run_dir") else None
        kept = (f"the last good checkpoint is {last}" if last is not None and last.exists()
                else "no checkpoint was written yet")
        update = self.epoch_step + 1
        message = (f"non-finite loss ({float(loss.detach()):.4g}; box {float(parts['box']):.4g}, "
                   f"obj {float(parts['obj']):.4g}, cls {float(parts['cls']):.4g}) at epoch {epoch + 1}/{self.epochs}, "
                   f"iteration {b + 1} (update {update}/{self.steps_per_epoch} of the epoch, {self.global_step + 1} "
                   f"overall, lr {getattr(self, 'lr', 0.0):.3g}): training stopped; {kept}. "
                   "Lower learning_rate or lengthen burn_in, and check the data.")
        if self.main:
            logger.error("%s", message)
        raise NonFiniteLossError(message)

    # ---------------------------------------------------------------- evaluation and logging
    def _eval_model(self) -> nn.Module:
        return self.ema.module if self.ema is not None else self.model

    def _evaluate(self, epoch: int, final: bool) -> Dict[str, Any]:
        from torch.utils.data import DataLoader

        from yolo.data import collate_fn
        from yolo.evaluation import Evaluator, evaluate_model

        evaluator = Evaluator(self.data.names, self.val_set.ground_truth(),
                              category_ids=getattr(self.val_set, "category_ids", None), use_pycocotools=final)
        loader = DataLoader(self.val_set, batch_size=max(1, self.mini_batch), shuffle=False,
                            num_workers=self.workers, collate_fn=collate_fn)
        model = self._eval_model()
        metrics = evaluate_model(model, loader, evaluator, conf_thres=float(self.hyp["conf_thres"]),
                                 iou_thres=float(self.hyp["iou_thres"]), device=self.device, amp=self.amp,
                                 progress=use_bars(self.options.progress), desc=f"val {epoch + 1}/{self.epochs}")
        logger.info("epoch %d/%d: mAP50 %.4f  mAP50_95 %.4f  P %.3f  R %.3f  (%d val images)", epoch + 1,
                    self.epochs, metrics["mAP50"], metrics["mAP50_95"], metrics["precision"], metrics["recall"],
                    metrics["num_images"])
        if self.writer is not None:
            evaluator.write_tensorboard(self.writer, epoch + 1, prefix="val", plots=final and self.hyp["plots"])
            self._log_predictions(model, epoch + 1)
        if final:
            print(evaluator.summary_text(metrics))
            evaluator.save_metrics(self.run_dir / "metrics.json", {"epoch": epoch + 1})
            if self.hyp["plots"]:
                try:
                    evaluator.save_plots(self.run_dir)
                except Exception as exc:  # plots are a convenience; never lose a run over them
                    logger.warning("could not draw the evaluation plots: %s", exc)
        self.last_metrics = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
        return metrics

    @torch.no_grad()
    def _log_predictions(self, model: nn.Module, step: int) -> None:
        """A few validation images with their predicted boxes (input pixels), to TensorBoard."""
        from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer, postprocess_gaussian
        from yolo.ops import postprocess
        from yolo.visualize import draw_detections

        count = min(int(self.hyp.get("tb_images") or 0), len(self.val_set))
        if count <= 0:
            return
        items = [self.val_set[i] for i in range(count)]
        images = torch.stack([it[0] for it in items]).float().div(255.0).to(self.device)
        was_training = model.training
        model.eval()
        try:
            gaussian = any(isinstance(h, GaussianYOLOLayer) for h in self.model.yolo_layers)  # rows with 4 sigmas
            dets = (postprocess_gaussian if gaussian else postprocess)(model(images).float(), conf_thres=0.25,
                                                                       iou_thres=0.45)
        finally:
            model.train(was_training)
        drawn = []
        for (image, _t, _info), det in zip(items, dets):
            bgr = np.ascontiguousarray(image.permute(1, 2, 0).numpy()[:, :, ::-1])
            out = draw_detections(bgr, det["boxes"], det["scores"], det["labels"], self.data.names)
            drawn.append(out[:, :, ::-1].copy())
        self.writer.add_images("val/predictions", np.stack(drawn), step, dataformats="NHWC")

    def _log_epoch(self, epoch: int, metrics: Dict[str, Any]) -> None:
        sums = self._epoch_sums.clone()
        n = max(sums[3].item(), 1.0)
        box, obj, cls = (sums[:3] / n).tolist()
        row = {"epoch": epoch + 1, "box_loss": box, "obj_loss": obj, "cls_loss": cls, "loss": box + obj + cls,
               "lr": getattr(self, "lr", 0.0),
               "precision": metrics.get("precision", ""), "recall": metrics.get("recall", ""),
               "mAP50": metrics.get("mAP50", ""), "mAP50_95": metrics.get("mAP50_95", ""),
               "time_s": time.perf_counter() - self._epoch_start}
        path = self.run_dir / "results.csv"
        rows = _read_results(path, before_epoch=epoch + 1)
        rows.append({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
        with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=RESULTS_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        if self.writer is not None:
            for key in ("box_loss", "obj_loss", "cls_loss", "loss"):
                self.writer.add_scalar(f"epoch/{key}", row[key], epoch + 1)
            self.writer.flush()

    # ---------------------------------------------------------------- checkpoints
    def _checkpoint(self) -> Dict[str, Any]:
        saved_model = self._eval_model()
        train_state = {
            "model": {k: v.detach().cpu() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.amp else None,
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "epoch": self.epoch,
            "epoch_step": self.epoch_step,
            "global_step": self.global_step,
            "best_fitness": self.best_fitness,
            "metrics": self.last_metrics,
            "rng": rng_state(),
            "epoch_sums": self._epoch_sums.clone() if self.epoch_step else None,
            "options": self.options.to_dict() | {"hyp": None},
            "hyp": self.hyp,
        }
        return model_checkpoint(saved_model, names=self.data.names, train=train_state,
                                epoch=self.epoch, metrics=self.last_metrics)

    def _save(self, best: bool) -> None:
        """Write ``best.pt`` (when ``best``) and then ``last.pt``, each atomically.

        The order makes a kill at any point recoverable: ``last.pt`` records the best score, so it must
        never reach the disk before the ``best.pt`` holding that score. A kill between the two leaves the
        previous ``last.pt``; resuming from it repeats the epoch and writes both again.
        """
        ckpt = self._checkpoint()
        if best:
            save_checkpoint(ckpt, self.run_dir / "best.pt")
        save_checkpoint(ckpt, self.run_dir / "last.pt")


# ------------------------------------------------------------------------------ helpers
def software_environment() -> Dict[str, Any]:
    """What makes two runs with the same seed give identical losses, or not, on the CPU.

    Measured: runs that agree in all of these reproduce every mini-batch loss bit for bit. A different
    CPU thread count changes the float summation order (losses differ from the second update), and
    another OpenCV version decodes and resizes the images differently (losses differ from the first).
    """
    import cv2

    return {"python": platform.python_version(), "torch": str(torch.__version__),
            "opencv": cv2.__version__, "numpy": np.__version__, "cpu_threads": torch.get_num_threads()}


def _summary_writer(run_dir: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception as exc:  # tensorboard is optional at run time
        logger.warning("TensorBoard logging is off (%s)", exc)
        return None
    return SummaryWriter(str(run_dir))


def _write_yaml(path: Path, data: Dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(_plain(data), sort_keys=False), encoding="utf-8")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


def _read_results(path: Path, before_epoch: int) -> List[Dict[str, str]]:
    """Rows of an existing results.csv for epochs before ``before_epoch`` (a resumed run rewrites the rest)."""
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r.get("epoch", "").isdigit() and int(r["epoch"]) < before_epoch]


def train(**kwargs) -> TrainResult:
    """``Trainer(TrainOptions(**kwargs)).fit()``."""
    return Trainer(TrainOptions(**kwargs)).fit()


__all__ = ["NonFiniteLossError", "RESULTS_COLUMNS", "TrainOptions", "TrainResult", "Trainer", "build_optimizer",
           "fitness", "rng_state", "seed_everything", "set_rng_state", "train"]
