"""What a run reports while it trains: progress lines, ``results.csv`` and its chart ``results.png``, TensorBoard
(scalars, sample images).

Each writer is a hook (:mod:`yolo.engine.hooks.base`) that runs on the main process only. They read numbers
the trainer already brought to the CPU (``trainer.step_log`` once per update, ``trainer.epoch_losses`` once per
epoch): writing never adds a CPU-GPU sync of its own (sample images aside: they run the model).
"""
from __future__ import annotations

import csv
import logging
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from yolo.engine.epoch_times import data_wait_warning
from yolo.engine.hooks.base import HookBase
from yolo.files.atomic import atomic_path
from yolo.models.heads import has_gaussian_heads
from yolo.models.layer_types.gaussian_yolo import postprocess_gaussian
from yolo.inference.postprocess import postprocess
from yolo.plots import results_figure
from yolo.progress import ProgressLines
from yolo.visualize import draw_detections

logger = logging.getLogger(__name__)

RESULTS_COLUMNS = ("epoch", "box_loss", "obj_loss", "cls_loss", "loss", "lr", "precision", "recall",
                   "mAP50", "mAP50_95", "time_s", "time_data_s", "time_step_s", "time_other_s", "workers")
# time_s: the whole epoch (its evaluation and checkpoints too); time_data_s + time_step_s + time_other_s: its
# updates (yolo.engine.epoch_times); workers: the loader's processes. A results.csv of an older run lacks the last
# four: its rows keep them blank.
RESULTS_TIME_COLUMNS = ("time_s", "time_data_s", "time_step_s", "time_other_s", "workers")


class ProgressWriter(HookBase):
    """A tqdm bar per epoch (postfix: the epoch's running mean losses, lr, input size, targets); when bars are
    off, a progress line every ``yolo.progress.LINE_SECONDS`` and a debug line every 10 updates (``--verbose``);
    a summary line per epoch."""

    def __init__(self, show_bars: bool):
        self.show_bars = show_bars
        self.bar: Optional[tqdm] = None
        self.lines: Optional[ProgressLines] = None
        self.warned_data_wait = False

    def before_epoch(self, trainer) -> None:
        self.bar = tqdm(total=trainer.steps_per_epoch, initial=trainer.epoch_step, disable=not self.show_bars,
                        desc=f"epoch {trainer.epoch + 1}/{trainer.epochs}", dynamic_ncols=True, leave=True)
        self.lines = ProgressLines(f"epoch {trainer.epoch + 1}/{trainer.epochs}", trainer.steps_per_epoch,
                                   not self.show_bars, logger, done=trainer.epoch_step)

    def after_step(self, trainer) -> None:
        s = trainer.step_log
        self.bar.set_postfix_str(f"box {s.mean_box:.3f} obj {s.mean_obj:.3f} cls {s.mean_cls:.3f} "
                                 f"lr {trainer.lr:.2e} img {s.size_hw[1]}x{s.size_hw[0]} "
                                 f"targets {s.num_targets}", refresh=False)
        self.bar.update(1)
        self.lines.update(trainer.epoch_step, f"box {s.mean_box:.3f} obj {s.mean_obj:.3f} cls {s.mean_cls:.3f} "
                                              f"lr {trainer.lr:.2e}")
        if self.bar.disable and trainer.epoch_step % 10 == 0:
            logger.debug("epoch %d/%d update %d/%d: box %.3f obj %.3f cls %.3f lr %.2e", trainer.epoch + 1,
                         trainer.epochs, trainer.epoch_step, trainer.steps_per_epoch, s.mean_box, s.mean_obj,
                         s.mean_cls, trainer.lr)

    def after_epoch_updates(self, trainer) -> None:
        self.close()
        s = trainer.step_log  # its running means now cover the whole epoch
        if s is None:  # resumed after the epoch's last update: no update ran here
            logger.info("epoch %d/%d: its updates were done before the resume", trainer.epoch + 1, trainer.epochs)
            return
        split = trainer.epoch_split
        logger.info("epoch %d/%d: box %.3f obj %.3f cls %.3f lr %.2e; trained on %d images in %.1f s "
                    "(%.2f images/s; data wait %.1f s, step %.1f s, other %.1f s; %d loader workers)",
                    trainer.epoch + 1, trainer.epochs, s.mean_box, s.mean_obj, s.mean_cls, trainer.lr,
                    trainer.epoch_images, trainer.epoch_seconds, trainer.throughput, split.data, split.step,
                    split.other, trainer.workers)
        if not self.warned_data_wait:  # once a run: the advice does not change from epoch to epoch
            warning = data_wait_warning(split, trainer.workers, bool(trainer.hyp.cache_images))
            if warning:
                logger.warning("%s", warning)
                self.warned_data_wait = True

    def after_interrupt(self, trainer) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class ResultsCSVWriter(HookBase):
    """``results.csv``: one row per epoch (:data:`RESULTS_COLUMNS`), rewritten atomically; a resumed run
    keeps the rows of the epochs before it."""

    def __init__(self, path: Path):
        self.path = path

    def after_epoch(self, trainer) -> None:
        done, losses, metrics = trainer.epoch, trainer.epoch_losses, trainer.epoch_metrics
        row = {"epoch": done, **losses, "lr": trainer.lr,
               "precision": metrics.get("precision", ""), "recall": metrics.get("recall", ""),
               "mAP50": metrics.get("mAP50", ""), "mAP50_95": metrics.get("mAP50_95", ""),
               "time_s": time.perf_counter() - trainer.epoch_start, "time_data_s": trainer.epoch_split.data,
               "time_step_s": trainer.epoch_split.step, "time_other_s": trainer.epoch_split.other,
               "workers": trainer.workers}
        rows = read_results(self.path, before_epoch=done)
        rows.append({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
        with atomic_path(self.path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=RESULTS_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)


class ResultsChartWriter(HookBase):
    """``results.png`` beside ``results.csv``, redrawn from it after every epoch (:func:`yolo.plots.results_figure`):
    runs after :class:`ResultsCSVWriter`; the trainer wraps it in :class:`yolo.engine.hooks.guarded.Guarded`, so
    a chart that cannot be drawn never stops a run."""

    def __init__(self, csv_path: Path, png_path: Path):
        self.csv_path, self.png_path = csv_path, png_path

    def after_epoch(self, trainer) -> None:
        write_results_chart(self.csv_path, self.png_path)


def write_results_chart(csv_path: Path, png_path: Path) -> Path:
    """Draw the rows of ``csv_path`` (a ``results.csv``) into ``png_path``, atomically; returns ``png_path``."""
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    fig = results_figure(rows)
    try:
        with atomic_path(png_path) as tmp:
            fig.savefig(tmp, format="png")
    finally:
        fig.clear()
    return Path(png_path)


class TensorBoardWriter(HookBase):
    """TensorBoard events in the run folder: losses and lr per update, mean losses per epoch, and after each
    evaluation ``tb_images`` validation images with their predicted boxes. The evaluation's own curves go
    through ``trainer.writer`` (this writer's ``SummaryWriter``)."""

    def __init__(self, run_dir: Path, sample_images: int):
        self.writer = SummaryWriter(str(run_dir))
        self.sample_images = sample_images

    def after_step(self, trainer) -> None:
        s, step = trainer.step_log, trainer.global_step
        self.writer.add_scalar("train/box_loss", s.box, step)
        self.writer.add_scalar("train/obj_loss", s.obj, step)
        self.writer.add_scalar("train/cls_loss", s.cls, step)
        self.writer.add_scalar("train/loss", s.loss, step)
        self.writer.add_scalar("train/lr", trainer.lr, step)

    def after_epoch(self, trainer) -> None:
        count = min(self.sample_images, len(trainer.val_set))
        if trainer.epoch_metrics and count > 0:
            images = sample_predictions(trainer.eval_model(), trainer.val_set, count, trainer.data.names,
                                        trainer.device)
            self.writer.add_images("val/predictions", images, trainer.epoch, dataformats="NHWC")
        for key, value in trainer.epoch_losses.items():
            self.writer.add_scalar(f"epoch/{key}", value, trainer.epoch)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


@torch.no_grad()
def sample_predictions(model: nn.Module, dataset, count: int, names: List[str], device: torch.device) -> np.ndarray:
    """The first ``count`` images of ``dataset`` with ``model``'s boxes drawn (conf 0.25, NMS IoU 0.45),
    as ``uint8[count, H, W, 3]`` RGB at the network input size."""
    items = [dataset[i] for i in range(count)]
    images = torch.stack([it[0] for it in items]).float().div(255.0).to(device)
    was_training = model.training
    model.eval()
    try:
        gaussian = has_gaussian_heads(model.yolo_layers)  # rows with 4 sigmas
        dets = (postprocess_gaussian if gaussian else postprocess)(model(images).float(), conf_thres=0.25,
                                                                   iou_thres=0.45)
    finally:
        model.train(was_training)
    drawn = []
    for (image, _t, _info), det in zip(items, dets):
        bgr = np.ascontiguousarray(image.permute(1, 2, 0).numpy()[:, :, ::-1])
        out = draw_detections(bgr, det["boxes"], det["scores"], det["labels"], names)
        drawn.append(out[:, :, ::-1].copy())
    return np.stack(drawn)


def read_results(path: Path, before_epoch: int) -> List[Dict[str, str]]:
    """Rows of an existing results.csv for epochs before ``before_epoch`` (a resumed run rewrites the rest)."""
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r.get("epoch", "").isdigit() and int(r["epoch"]) < before_epoch]


__all__ = ["ProgressWriter", "RESULTS_COLUMNS", "RESULTS_TIME_COLUMNS", "ResultsCSVWriter", "ResultsChartWriter", "TensorBoardWriter",
           "read_results", "sample_predictions", "write_results_chart"]
