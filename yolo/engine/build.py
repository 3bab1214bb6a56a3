"""The builder: a training run's parts (:class:`yolo.engine.parts.TrainingParts`) from ``TrainOptions`` (a cfg,
a dataset YAML, ``--hyp`` and the flags), or from a run's ``last.pt`` with ``--resume``.

In order: the resume checkpoint and its saved options (:mod:`yolo.engine.hooks.checkpointing`), the device and the process
group, the cfg and the dataset config, the model, the hyperparameters (:func:`yolo.engine.config.resolve_hyp`),
how the step runs (:mod:`yolo.engine.step_precision`), pretrained weights, head priors and frozen layers, the
update (optimizer, GradScaler, EMA), the datasets and the run's plan (:mod:`yolo.engine.run_plan`), the
criterion, the resumed state, the DDP wrapper, the run folder, its lock and its hooks (:mod:`yolo.engine.run_folder`).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn as nn

from yolo.data import load_data_config
from yolo.device import parse_device
from yolo.engine.config import Hyperparameters, TrainOptions, resolve_hyp
from yolo.engine.distributed import DistInfo, barrier, cleanup_distributed, init_distributed
from yolo.engine.ema import ModelEMA
from yolo.engine.epoch_batches import EpochBatches
from yolo.engine.optimizer import optimizer_from_hyp
from yolo.engine.parts import TrainingParts
from yolo.engine.hooks.checkpointing import (MACHINE_SETTINGS, ResumeState, check_resume_counters,
                                             check_same_dataset, dataset_record, load_training_state,
                                             read_resume_checkpoint, saved_hyp)
from yolo.engine.rng import seed_everything
from yolo.engine.run_folder import open_run_folder, run_folder
from yolo.engine.run_plan import build_datasets, multi_scale_rule, plan_run, run_schedule
from yolo.engine.step_precision import CompiledForward, StepPrecision, apply_tf32, step_precision
from yolo.engine.transfer import freeze_layers, load_pretrained, with_num_classes
from yolo.errors import ConfigError
from yolo.evaluation.darknet_evaluator import check_darknet_map_model
from yolo.files.images import ready_decoder
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.cfg import Section, parse_cfg, parse_cfg_text
from yolo.models.head_sections import CLASS_COUNT_HEADS, TRAINED_HEADS
from yolo.models.head_prior import prior_head_biases
from yolo.models.model import Darknet
from yolo.ops.sizes import size_text
from yolo.progress import use_bars

logger = logging.getLogger(__name__)

# What --weights reads as one of our checkpoints rather than Darknet weights (yolo.engine.transfer.load_pretrained).
CHECKPOINT_SUFFIXES = (".pt", ".pth")


def build_training(options: TrainOptions) -> TrainingParts:
    """The parts of the run ``options`` describes (see the module docstring). On failure the process group
    and the run folder's lock are released."""
    check_cutoff(options)
    options, ckpt = read_resume_checkpoint(options)
    resume_path = Path(options.resume) if ckpt is not None else None
    device = parse_device(options.device, int(os.environ.get("LOCAL_RANK", "0")))
    dist = init_distributed(device)
    try:
        return _build(options, ckpt, resume_path, device, dist)
    except BaseException:
        cleanup_distributed()
        raise


def check_cutoff(options: TrainOptions) -> None:
    """Refuse a ``--cutoff`` that would be ignored: it selects the layers read from a Darknet ``.weights`` file,
    and a ``.pt`` checkpoint's tensors load by name (:func:`yolo.engine.transfer.load_pretrained`)."""
    if options.cutoff is None or options.resume:
        return  # (with --resume, the saved settings are checked: yolo.engine.hooks.checkpointing)
    if not options.weights:
        raise ConfigError(f"--cutoff {options.cutoff}: applies to Darknet .weights given with --weights, and "
                          "there is no --weights")
    if Path(options.weights).suffix in CHECKPOINT_SUFFIXES:
        raise ConfigError(f"--cutoff {options.cutoff}: applies to Darknet .weights only, not to the checkpoint "
                          f"{options.weights} (its tensors load by name): drop --cutoff")


def _build(options: TrainOptions, ckpt: Optional[Dict[str, Any]], resume_path: Optional[Path],
           device: torch.device, dist: DistInfo) -> TrainingParts:
    main = dist.is_main
    if not main:
        options.progress = False
    sections, adapted, data = read_cfg_and_data(options, ckpt, resume_path, main)
    seed_everything(options.seed)
    model = Darknet(sections)
    check_image_channels(model)
    if ckpt is not None:
        model.cfg_text = ckpt["cfg"]
    elif not adapted:  # keep the file as written (comments included), not a re-rendering of it
        model.cfg_text = Path(options.cfg).read_text(encoding="utf-8", errors="replace")
    hyp = run_hyp(model, data, options, ckpt)
    precision = step_precision(device, hyp)
    apply_tf32(precision.tf32)
    initialize_model(model, options, hyp, precision, device, ckpt is None, main)
    optimizer = optimizer_from_hyp(model, hyp)
    scaler = torch.amp.GradScaler("cuda", enabled=precision.amp)
    # Only rank 0 evaluates and saves, so only it keeps the moving average.
    ema = ModelEMA(model, hyp.ema_decay, hyp.ema_tau) if hyp.ema and main else None
    if options.sync_bn and dist.enabled:
        if device.type == "cuda":
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        else:
            logger.warning("--sync-bn needs CUDA (PyTorch has no CPU SyncBatchNorm): per-process BatchNorm")
    train_set, val_set = build_datasets(data, hyp, model.stride, options.seed, main,
                                        size_source=f"{resume_path or 'hyp'}: img_size", dist=dist,
                                        progress=main and use_bars(options.progress),
                                        decode=ready_decoder(options.decode or "opencv"))
    plan = plan_run(hyp, len(train_set), dist)
    schedule = run_schedule(hyp, plan, options.seed, main)
    multi_scale = multi_scale_rule(hyp, plan, model.stride, options.seed)
    criterion = YoloLoss(model)
    start = ResumeState()
    # what the checkpoints record of the dataset, and what a resume compares with the saved record
    record = dataset_record(data, train_set, val_set) if main or ckpt is not None else None
    if ckpt is not None:  # before the DDP wrap, which broadcasts rank 0's weights
        check_same_dataset(ckpt["train"].get("dataset"), ckpt.get("names"), record, getattr(data, "source", None),
                           resume_path)
        start = load_training_state(ckpt, model, optimizer, scaler, ema)
        check_resume_counters(start, plan.steps_per_epoch, resume_path)
        if main:
            logger.info("resuming %s at epoch %d, update %d of the epoch (update %d overall)", resume_path,
                        start.epoch + 1, start.epoch_step, start.global_step)
    train_model = model
    if dist.enabled:
        ddp_kwargs = {"device_ids": [device.index]} if device.type == "cuda" else {}
        train_model = nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
    run_dir = run_folder(options, resume_path, main)
    hooks, writer = [], None
    if main:
        hooks, writer = open_run_folder(run_dir, ckpt is not None, options, hyp, model.cfg_text, data, record,
                                        finished=ckpt is not None and start.epoch >= plan.epochs)
        logger.info("run folder %s: %d epochs x %d updates of %d images (%d mini-batch(es) of %d x %d "
                    "process(es)), img %s, lr %g, %s (%s)", run_dir, plan.epochs, plan.steps_per_epoch,
                    hyp.batch, plan.accumulate, plan.mini_batch, dist.world_size, size_text(plan.img_size),
                    hyp.learning_rate, device, precision.describe())
    batches = EpochBatches(train_set, plan.mini_batch, plan.accumulate, plan.steps_per_epoch, plan.workers,
                           options.seed, device, dist, multi_scale)
    return TrainingParts(model=model, optimizer=optimizer, schedule=schedule, criterion=criterion, batches=batches,
                         plan=plan, hyp=hyp, options=options, device=device, dist=dist, precision=precision,
                         scaler=scaler, ema=ema, train_model=train_model,
                         forward=CompiledForward(train_model) if precision.compile else train_model,
                         hooks=hooks, start=start, run_dir=run_dir, data=data, train_set=train_set,
                         val_set=val_set, writer=writer)


def read_cfg_and_data(options: TrainOptions, ckpt: Optional[Dict[str, Any]], resume_path: Optional[Path],
                      main: bool) -> Tuple[List[Section], bool, Any]:
    """The cfg's sections (from the checkpoint's cfg text on resume), whether ``--adapt-classes`` set its heads
    to the class count of the dataset config, and that config (rank 0 reads it first: it may generate the
    shapes data)."""
    if ckpt is not None:
        sections = parse_cfg_text(ckpt["cfg"], source=f"{resume_path}:cfg")
    else:
        if not options.cfg:
            raise ConfigError("--cfg is required (a Darknet .cfg)")
        sections = parse_cfg(options.cfg)
    if not options.data:
        raise ConfigError("--data is required (a dataset YAML)")
    data = load_data_config(options.data) if main else None
    barrier()
    if not main:
        data = load_data_config(options.data)
    cfg_classes = [int(s.options.get("classes", 20)) for s in sections if s.type in CLASS_COUNT_HEADS]
    adapted = bool(options.adapt_classes and cfg_classes and any(c != data.num_classes for c in cfg_classes))
    if adapted:
        sections = with_num_classes(sections, data.num_classes)
        logger.info("cfg heads set to %d classes (--adapt-classes)", data.num_classes)
    return sections, adapted, data


def check_image_channels(model: Darknet) -> None:
    """Refuse a cfg whose input is not 3 channels, at its ``channels`` (or ``inputs``) line: the datasets give
    RGB images. (Darknet would read the images as grayscale for ``channels=1``: ``load_data_detection`` in
    src/data.c loads with OpenCV's colour flag ``c >= 3``; the dataset code has no such conversion.)"""
    if model.input_channels != 3:
        key = "channels" if model.net.has("channels") else "inputs"
        raise model.net.error(f"{key}={model.net.options[key]}: training reads 3-channel (RGB) images; "
                              "grayscale or other inputs are not supported: set channels=3", key)


def run_hyp(model: Darknet, data, options: TrainOptions, ckpt: Optional[Dict[str, Any]]) -> Hyperparameters:
    """From [net], --hyp and the flags (:func:`yolo.engine.config.resolve_hyp`), or the saved run's
    (:func:`yolo.engine.hooks.checkpointing.saved_hyp`); ``options`` then records the machine settings used. First checks the
    heads' class count."""
    if model.num_classes != data.num_classes:
        raise ConfigError(
            f"the cfg's heads predict {model.num_classes} classes but {options.data} names {data.num_classes}: "
            f"set classes={data.num_classes} in each [yolo] and filters=(classes+5)*len(mask) in the "
            "[convolutional] before it, or pass --adapt-classes")
    if ckpt is None:
        hyp = resolve_hyp(model.net, [s for s in model.sections if s.type in TRAINED_HEADS], options.hyp,
                          options.hyp_overrides(), stride=model.stride)
    else:
        hyp = saved_hyp(ckpt, options)
    if hyp.darknet_map:  # refused now rather than after the first epoch
        try:
            check_darknet_map_model(model)
        except ValueError as exc:
            raise ConfigError(f"darknet_map: {exc}") from None
    for key in MACHINE_SETTINGS:  # opt.yaml records the values used
        setattr(options, key, getattr(hyp, key))
    if hyp.batch < 2:
        logger.warning("batch=%d: the cfg's [net] has Darknet's testing settings; pass --batch-size "
                       "(BatchNorm needs several images per mini-batch)", hyp.batch)
    return hyp


def initialize_model(model: Darknet, options: TrainOptions, hyp: Hyperparameters, precision: StepPrecision,
                     device: torch.device, fresh_run: bool, main: bool) -> None:
    """BatchNorm momentum, pretrained weights (--weights), head priors, frozen layers; to the device, in the
    step's memory format (before the optimizer and the EMA copy see the weights)."""
    if hyp.bn_momentum is not None:
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.momentum = hyp.bn_momentum
    if fresh_run:
        fresh = None  # heads starting from scratch: all of them without --weights
        if options.weights:
            report = load_pretrained(model, options.weights, cutoff=options.cutoff)
            fresh = report.reinitialized_layers()
            if main:
                for line in report.summary().splitlines():
                    logger.info("%s", line)
        if hyp.head_prior:
            prior_head_biases(model, hyp.img_size, fresh)
    frozen = frozen_layers(model, options.freeze) if options.freeze else []
    if frozen and main:
        logger.info("froze layers 0..%d (%d parameter tensors)", options.freeze - 1, len(frozen))
    model.to(device)
    precision.prepare_model(model)


def frozen_layers(model: Darknet, count: int) -> List[str]:
    """:func:`yolo.engine.transfer.freeze_layers`, a count past the model's layers a :class:`ConfigError` (the
    tool's one-line error) instead of its ``ValueError``."""
    try:
        return freeze_layers(model, count)
    except ValueError as exc:  # its only ValueError: --freeze larger than the layer count
        raise ConfigError(str(exc)) from None


__all__ = ["CHECKPOINT_SUFFIXES", "build_training", "check_cutoff", "check_image_channels", "frozen_layers", "initialize_model", "read_cfg_and_data", "run_hyp"]
