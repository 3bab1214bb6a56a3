"""The run's data and plan, from the resolved hyperparameters: the train and val datasets, the mini-batch per
process, the updates per epoch, the epochs, the learning-rate schedule and the multi-scale rule."""
from __future__ import annotations

import logging
import math
from typing import Callable, Optional, Tuple

from yolo.data import MultiScale, build_dataset
from yolo.data.darknet_multiscale import DarknetMultiScale
from yolo.data.loader import default_workers
from yolo.device import cpu_threads
from yolo.engine.config import Hyperparameters
from yolo.engine.distributed import DistInfo, barrier, local_world_size
from yolo.engine.parts import RunPlan
from yolo.engine.schedule import LRSchedule, burn_in_outlasts_run, rate_warnings, schedule_from_hyp
from yolo.engine.shared_images import cache_train_images
from yolo.errors import ConfigError
from yolo.models.preprocessing import training_preprocessing
from yolo.ops.sizes import check_stride

logger = logging.getLogger(__name__)


def build_datasets(data, hyp: Hyperparameters, stride: int, seed: int, main: bool, size_source: str = "img_size",
                   dist: DistInfo = DistInfo(), progress: bool = False, decode: str = "opencv"):
    """``(train_set, val_set)`` at ``hyp.img_size`` (rank 0 scans first and writes the label caches; the others
    then read them; only rank 0, which evaluates, gets a val set). ``size_source`` names where the size came
    from (the hyp or the resumed checkpoint) in the stride check's error. With ``hyp.cache_images`` the train
    images are decoded into memory when they fit, one copy per machine (:mod:`yolo.engine.shared_images`; a bar
    while it fills when ``progress``). ``decode``: how both sets read their image files (``opencv`` or ``stb``)."""
    img_size = check_stride(hyp.img_size, stride, size_source)  # a checkpoint's size may not fit this cfg
    train_set = val_set = None
    for turn in (True, False):
        if main == turn:
            train_set = build_dataset(data, "train", img_size=img_size, augment=True, hyp=hyp.augment, seed=seed)
            train_set.decode = decode
            if main:
                val_set = build_dataset(data, "val", img_size=img_size, augment=False)
                # validate as the model trains, as the checkpoint records it (yolo.models.preprocessing)
                record = training_preprocessing(hyp.augment, img_size, decode)
                val_set.resize, val_set.resample = record["resize"], record["resample"]
                val_set.decode = record["decode"]
        barrier()
    if hyp.cache_images:  # before the loader's workers start: they share the decoded images
        one_size = None if hyp.multi_scale else img_size  # every item at img_size: images may be kept reduced
        cache_train_images(train_set, dist, progress, one_size)
    return train_set, val_set


def plan_run(hyp: Hyperparameters, train_images: int, dist: DistInfo) -> RunPlan:
    """Mini-batch per process, updates per epoch (``max_steps_per_epoch`` caps them), epochs (enough for
    ``max_batches`` updates when not given: ``hyp.epochs`` is set) and loader workers (``hyp.workers``, else
    :func:`yolo.data.loader.default_workers`: the CPUs of this process's affinity mask but one, per process on
    the machine, at most a mini-batch's images)."""
    world = dist.world_size
    per_update = hyp.batch // hyp.subdivisions
    if per_update % world:
        raise ConfigError(f"batch/subdivisions = {per_update} images per mini-batch cannot be split over "
                          f"{world} processes")
    mini_batch = per_update // world
    minibatches = math.ceil(train_images / world) // mini_batch
    if minibatches < hyp.subdivisions:
        raise ConfigError(f"the train split has {train_images} images: fewer than one update of "
                          f"batch={hyp.batch} ({world} process(es)); lower --batch-size")
    steps_per_epoch = minibatches // hyp.subdivisions
    if hyp.max_steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, hyp.max_steps_per_epoch)
    if hyp.epochs is None:
        hyp.epochs = max(1, math.ceil(hyp.max_batches / steps_per_epoch))
    if hyp.workers is not None:
        workers = hyp.workers
        why = "--workers"
    else:
        cpus, local = cpu_threads(), local_world_size(dist)
        workers = default_workers(mini_batch, local, cpus)
        why = (f"{cpus} CPU(s) this process may use, all but one"
               + (f", shared by {local} training processes" if local > 1 else "")
               + f", at most the {mini_batch} images of a mini-batch; --workers sets it")
    if dist.is_main:
        logger.info("data loading: %d loader worker process(es) per training process (%s)", workers, why)
    return RunPlan(epochs=hyp.epochs, steps_per_epoch=steps_per_epoch, accumulate=hyp.subdivisions,
                   mini_batch=mini_batch, img_size=hyp.img_size, workers=workers)


def run_schedule(hyp: Hyperparameters, plan: RunPlan, seed: int, main: bool) -> LRSchedule:
    """The learning rate of each update (:func:`yolo.engine.schedule.schedule_from_hyp`), with a warning where
    the cfg's schedule does not fit this run's length."""
    total = plan.total_steps
    schedule = schedule_from_hyp(hyp, total, seed=seed)
    if not main:
        return schedule
    if schedule.burn_in != hyp.burn_in:  # scale_burn_in
        logger.info("burn_in=%d of max_batches=%d scaled to this run's %d updates: burn_in %d (scale_burn_in)",
                    hyp.burn_in, hyp.max_batches, total, schedule.burn_in)
    if hyp.max_batches and hyp.max_batches != total and hyp.policy in ("poly", "sgdr"):
        logger.warning("policy=%s follows max_batches=%d, but this run makes %d updates", hyp.policy,
                       hyp.max_batches, total)
    for warning in rate_warnings(schedule):
        logger.warning("%s", warning)
    late = [s for s in schedule.steps if s > total]
    if late:
        logger.warning("lr steps %s lie beyond this run's %d updates: they never apply", late, total)
    long_burn_in = burn_in_outlasts_run(schedule, total)
    if long_burn_in:
        logger.warning("%s", long_burn_in)
    return schedule


def multi_scale_rule(hyp: Hyperparameters, plan: RunPlan, stride: int,
                     seed: int) -> Optional[Callable[[int], Optional[Tuple[int, int]]]]:
    """Run-wide mini-batch index -> (h, w) its images are loaded at (None: img_size); None without
    multi-scale. The cfg's ``random`` is Darknet's rule, one size per update; ``multi_scale: true`` ours."""
    if isinstance(hyp.multi_scale, dict):
        sizes = DarknetMultiScale(plan.img_size, random=hyp.multi_scale["random"],
                                  resize_step=hyp.multi_scale["resize_step"], total_updates=plan.total_steps,
                                  seed=seed)
        accumulate = plan.accumulate
        return lambda minibatch: sizes(minibatch // accumulate)
    if hyp.multi_scale:
        low, high = hyp.multi_scale_range
        return MultiScale(plan.img_size, stride=stride, low=low, high=high, every=hyp.multi_scale_every, seed=seed)
    return None


__all__ = ["build_datasets", "multi_scale_rule", "plan_run", "run_schedule"]
