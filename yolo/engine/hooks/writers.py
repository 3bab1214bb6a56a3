"""What a run reports while it trains: progress lines, ``results.csv`` and its chart ``results.png``, TensorBoard
(scalars, sample images).

Each writer is a hook (:mod:`yolo.engine.hooks.base`) that runs on the main process only. They read numbers
the trainer already brought to the CPU (``trainer.state.step_log`` once per update, ``trainer.state.epoch_losses``
once per epoch): writing never adds a CPU-GPU sync of its own (sample images aside: they run the model).
"""
from __future__ import annotations

import csv
import logging
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from yolo.engine.epoch_times import data_wait_warning
from yolo.engine.hooks.base import HookBase
from yolo.errors import ConfigError
from yolo.files.atomic import atomic_path
from yolo.inference.postprocess import PostprocessOptions, postprocess
from yolo.ops.pixels import images_to_float
from yolo.ops.sizes import size_text
from yolo.plots import results_figure
from yolo.progress import ProgressLines
from yolo.visualize import draw_detections

logger = logging.getLogger(__name__)

RESULTS_COLUMNS = ("epoch", "box_loss", "obj_loss", "cls_loss", "loss", "lr", "precision", "recall",
                   "mAP50", "mAP50_95", "time_s", "time_data_s", "time_step_s", "time_other_s", "workers")
# time_s: from the epoch's first update to its results row (its evaluation included; the TensorBoard images and
# checkpoints come after; an epoch stopped and resumed: the time trained before the stop and after it);
# time_data_s + time_step_s + time_other_s: its
# updates (yolo.engine.epoch_times); workers: the loader's processes. A results.csv of an older run lacks the last
# four: its rows keep them blank.
RESULTS_TIME_COLUMNS = ("time_s", "time_data_s", "time_step_s", "time_other_s", "workers")
# With the hyperparameter darknet_map: Darknet's detector map mAP@0.50 of each evaluation, after mAP50_95.
DARKNET_MAP_COLUMN = "darknet_mAP50"


def results_columns(darknet_map: bool) -> Tuple[str, ...]:
    """The columns of ``results.csv``: :data:`RESULTS_COLUMNS`, with :data:`DARKNET_MAP_COLUMN` after ``mAP50_95``
    when ``darknet_map``."""
    if not darknet_map:
        return RESULTS_COLUMNS
    at = RESULTS_COLUMNS.index("mAP50_95") + 1
    return RESULTS_COLUMNS[:at] + (DARKNET_MAP_COLUMN,) + RESULTS_COLUMNS[at:]


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
        state, plan = trainer.state, trainer.parts.plan
        self.bar = tqdm(total=plan.steps_per_epoch, initial=state.epoch_step, disable=not self.show_bars,
                        desc=f"epoch {state.epoch + 1}/{plan.epochs}", dynamic_ncols=True, leave=True)
        self.lines = ProgressLines(f"epoch {state.epoch + 1}/{plan.epochs}", plan.steps_per_epoch,
                                   not self.show_bars, logger, done=state.epoch_step)

    def after_step(self, trainer) -> None:
        state, plan, s = trainer.state, trainer.parts.plan, trainer.state.step_log
        self.bar.set_postfix_str(f"box {s.mean_box:.3f} obj {s.mean_obj:.3f} cls {s.mean_cls:.3f} "
                                 f"lr {state.lr:.2e} img {size_text(s.size_hw)} "
                                 f"targets {s.num_targets}", refresh=False)
        self.bar.update(1)
        self.lines.update(state.epoch_step, f"box {s.mean_box:.3f} obj {s.mean_obj:.3f} cls {s.mean_cls:.3f} "
                                            f"lr {state.lr:.2e}")
        if self.bar.disable and state.epoch_step % 10 == 0:
            logger.debug("epoch %d/%d update %d/%d: box %.3f obj %.3f cls %.3f lr %.2e", state.epoch + 1,
                         plan.epochs, state.epoch_step, plan.steps_per_epoch, s.mean_box, s.mean_obj,
                         s.mean_cls, state.lr)

    def after_epoch_updates(self, trainer) -> None:
        self.close()
        state, plan, s = trainer.state, trainer.parts.plan, trainer.state.step_log  # its running means cover the epoch
        if s is None:  # resumed after the epoch's last update: no update ran here
            logger.info("epoch %d/%d: its updates were done before the resume", state.epoch + 1, plan.epochs)
            return
        split = state.epoch_split
        logger.info("epoch %d/%d: box %.3f obj %.3f cls %.3f lr %.2e; trained on %d images in %.1f s "
                    "(%.2f images/s; data wait %.1f s, step %.1f s, other %.1f s; %d loader workers)",
                    state.epoch + 1, plan.epochs, s.mean_box, s.mean_obj, s.mean_cls, state.lr,
                    state.epoch_images, split.total, state.throughput, split.data, split.step,
                    split.other, plan.workers)
        if not self.warned_data_wait:  # once a run: the advice does not change from epoch to epoch
            warning = data_wait_warning(split, plan.workers, bool(trainer.parts.hyp.cache_images))
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
    keeps the rows of the epochs before it. An epoch stopped part-way keeps the times it trained before the stop
    (:meth:`state_dict`, saved in ``last.pt``): its row, written by the resumed run, adds them to the rest."""

    TIMES = ("time_s", "time_data_s", "time_step_s", "time_other_s")

    def __init__(self, path: Path, darknet_map: bool = False):
        self.path = path
        self.darknet_map = darknet_map
        self.before_stop: Dict[str, float] = {}  # {"epoch": the 0-based epoch stopped in, TIMES: seconds before}

    def _times_before_stop(self, epoch: int) -> Dict[str, float]:
        """The seconds of the 0-based ``epoch`` trained before a stop (zeros when it was not stopped)."""
        if self.before_stop.get("epoch") != epoch:
            return dict.fromkeys(self.TIMES, 0.0)
        return {key: float(self.before_stop[key]) for key in self.TIMES}

    def after_interrupt(self, trainer) -> None:
        state, split = trainer.state, trainer.state.epoch_split  # the split of the epoch's updates so far
        now = {"time_s": time.perf_counter() - state.epoch_start, "time_data_s": split.data,
               "time_step_s": split.step, "time_other_s": split.other}
        before = self._times_before_stop(state.epoch)
        self.before_stop = {"epoch": state.epoch, **{key: before[key] + now[key] for key in self.TIMES}}

    def state_dict(self) -> Dict[str, float]:
        return dict(self.before_stop)

    def load_state_dict(self, state: Dict[str, float]) -> None:
        valid = (isinstance(state.get("epoch"), int)
                 and all(isinstance(state.get(key), (int, float)) for key in self.TIMES))
        self.before_stop = dict(state) if valid else {}  # a record only: a damaged one counts as no stop

    def before_train(self, trainer) -> None:
        """A resumed run's results.csv must be readable before the first epoch is spent: one that is not (not
        UTF-8 text, not CSV) is the user's to look at, so it is neither replaced nor trained past."""
        try:
            read_results(self.path, before_epoch=0)
        except (UnicodeDecodeError, csv.Error) as exc:
            reason = f"not UTF-8 text at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else f"not CSV: {exc}"
            raise ConfigError(f"{self.path}: {reason}; this run writes one row an epoch into it: move it aside (or "
                              "repair it) and resume again (nothing was changed)") from None

    def after_epoch(self, trainer) -> None:
        state = trainer.state
        done, metrics, split = state.epoch, state.epoch_metrics, state.epoch_split
        before = self._times_before_stop(done - 1)
        self.before_stop = {}
        row = {"epoch": done, **state.epoch_losses, "lr": state.lr,
               "precision": metrics.get("precision", ""), "recall": metrics.get("recall", ""),
               "mAP50": metrics.get("mAP50", ""), "mAP50_95": metrics.get("mAP50_95", ""),
               DARKNET_MAP_COLUMN: metrics.get(DARKNET_MAP_COLUMN, ""),
               "time_s": before["time_s"] + time.perf_counter() - state.epoch_start,
               "time_data_s": before["time_data_s"] + split.data, "time_step_s": before["time_step_s"] + split.step,
               "time_other_s": before["time_other_s"] + split.other, "workers": trainer.parts.plan.workers}
        rows = read_results(self.path, before_epoch=done)
        # the column while the run computes it, and kept once there (a resume without it leaves its cells blank)
        columns = results_columns(self.darknet_map or any(r.get(DARKNET_MAP_COLUMN) for r in rows))
        rows.append({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items() if k in columns})
        with atomic_path(self.path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)


# Drawing results.png takes about a second (matplotlib, 10-15 panels): after every epoch of a small dataset it
# would take as long as the training. It is redrawn when this long has passed since the last drawing.
CHART_INTERVAL_S = 30.0


class ResultsChartWriter(HookBase):
    """``results.png`` beside ``results.csv``, redrawn from it (:func:`yolo.plots.results_figure`) after an epoch
    that ends :data:`CHART_INTERVAL_S` or more after the last drawing (or the run's start), after the run's last
    epoch, and when the run stops with rows not drawn yet. Runs after :class:`ResultsCSVWriter`; the trainer wraps
    it in :class:`yolo.engine.hooks.guarded.Guarded`, so a chart that cannot be drawn never stops a run.
    ``clock`` is ``time.monotonic`` (a test's clock in tests)."""

    def __init__(self, csv_path: Path, png_path: Path, interval_s: float = CHART_INTERVAL_S, clock=time.monotonic):
        self.csv_path, self.png_path = csv_path, png_path
        self.interval_s, self.clock = interval_s, clock
        self.drawn_at = clock()
        self.rows_not_drawn = False

    def before_train(self, trainer) -> None:
        self.drawn_at = self.clock()

    def after_epoch(self, trainer) -> None:
        last_epoch = trainer.state.epoch >= trainer.parts.plan.epochs
        if last_epoch or self.clock() - self.drawn_at >= self.interval_s:
            self._draw()
        else:
            self.rows_not_drawn = True

    def after_interrupt(self, trainer) -> None:
        if self.rows_not_drawn:
            self._draw()

    def _draw(self) -> None:
        self.rows_not_drawn = False
        write_results_chart(self.csv_path, self.png_path)
        self.drawn_at = self.clock()


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
    evaluation ``tb_images`` validation images with their predicted boxes (what detect.py would draw:
    :func:`sample_detections`). The evaluation's own curves go through ``trainer.parts.writer`` (this writer's
    ``SummaryWriter``)."""

    def __init__(self, run_dir: Path, sample_images: int):
        self.writer = SummaryWriter(str(run_dir))
        self.sample_images = sample_images

    def after_step(self, trainer) -> None:
        state = trainer.state
        s, step = state.step_log, state.global_step
        self.writer.add_scalar("train/box_loss", s.box, step)
        self.writer.add_scalar("train/obj_loss", s.obj, step)
        self.writer.add_scalar("train/cls_loss", s.cls, step)
        self.writer.add_scalar("train/loss", s.loss, step)
        self.writer.add_scalar("train/lr", state.lr, step)

    def after_epoch(self, trainer) -> None:
        state = trainer.state
        parts = trainer.parts
        count = min(self.sample_images, len(parts.val_set))
        if state.epoch_metrics and count > 0:
            images = sample_predictions(trainer.step_runner.eval_model(), parts.val_set, count, parts.data.names,
                                        parts.device)
            self.writer.add_images("val/predictions", images, state.epoch, dataformats="NHWC")
        for key, value in state.epoch_losses.items():
            self.writer.add_scalar(f"epoch/{key}", value, state.epoch)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


@torch.no_grad()
def sample_detections(model: nn.Module, images: torch.Tensor, device: torch.device) -> List[Dict[str, torch.Tensor]]:
    """``model``'s detections on ``images`` (``UInt8[N, 3, H, W]`` RGB at the network input size) as detect.py finds
    them: the Detector's post-processing (:func:`yolo.inference.postprocess.postprocess`) at detection's defaults
    with the cfg's own NMS variant and head kind (:meth:`PostprocessOptions.for_model`). One dict per image of CPU
    tensors: ``boxes`` ``Float32[K, 4]`` xyxy input pixels, ``scores`` ``Float32[K]``, ``labels`` ``Int64[K]``."""
    settings = PostprocessOptions.for_model(model)
    was_training = model.training
    model.eval()
    try:
        return postprocess(model(images_to_float(images.to(device))), settings)
    finally:
        model.train(was_training)


def sample_predictions(model: nn.Module, dataset, count: int, names: List[str], device: torch.device) -> np.ndarray:
    """The first ``count`` images of ``dataset`` with ``model``'s boxes drawn (:func:`sample_detections`), as
    ``uint8[count, H, W, 3]`` RGB at the network input size."""
    items = [dataset[i] for i in range(count)]
    dets = sample_detections(model, torch.stack([it[0] for it in items]), device)
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


__all__ = ["DARKNET_MAP_COLUMN", "ProgressWriter", "RESULTS_COLUMNS", "RESULTS_TIME_COLUMNS", "ResultsCSVWriter",
           "ResultsChartWriter", "TensorBoardWriter", "read_results", "results_columns", "sample_detections",
           "sample_predictions", "write_results_chart"]
