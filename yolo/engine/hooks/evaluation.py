"""Evaluation during training: COCO mAP on the val split every ``eval_interval`` epochs and after the last
(:class:`EvalHook` decides when and records the result in the trainer's state; the function it is handed
measures, by default :func:`evaluate_training`, which is :func:`evaluate_run` on the trainer's parts; which
epoch is the best: :func:`yolo.engine.train_state.fitness`)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from yolo.data import collate_fn
from yolo.data.loader import ensure_open_files, init_worker
from yolo.data.worker_signals import QuietStart, is_worker_death
from yolo.engine.config import Hyperparameters
from yolo.engine.hooks.base import HookBase
from yolo.engine.stop import StopRequest
from yolo.engine.train_state import fitness
from yolo.evaluation import EvaluationStopped, Evaluator, evaluate_model
from yolo.evaluation.darknet_evaluator import DarknetMapEvaluator
from yolo.output_pipe import discard_output
from yolo.progress import use_bars

logger = logging.getLogger(__name__)


class EvalHook(HookBase):
    """After an epoch that is due (every ``interval`` epochs, and the last): ``evaluate(trainer, epoch, final)``
    (``epoch`` 0-based, ``final`` for the run's last), the function it is handed (None:
    :func:`evaluate_training`), and the metrics it returns recorded in ``trainer.state`` (the metrics, the best
    fitness, whether ``best.pt`` is written: :meth:`yolo.engine.train_state.TrainState.record_evaluation`). The
    hook writes no file itself."""

    def __init__(self, interval: int, evaluate: Optional[Callable[[Any, int, bool], Dict[str, Any]]] = None):
        self.interval = interval
        self.evaluate = evaluate

    def after_epoch(self, trainer) -> None:
        done, epochs = trainer.state.epoch, trainer.parts.plan.epochs  # epochs completed, this one included
        if done == epochs or done % self.interval == 0:
            evaluate = self.evaluate if self.evaluate is not None else evaluate_training
            trainer.state.record_evaluation(evaluate(trainer, done - 1, done == epochs))


def evaluate_training(trainer, epoch: int, final: bool) -> Dict[str, Any]:
    """COCO metrics of the trainer's evaluated model (the EMA's when on) on its val split after ``epoch``
    (0-based; ``final``: the run's last): :func:`evaluate_run` with the run's settings."""
    parts = trainer.parts
    return evaluate_run(trainer.step_runner.eval_model(), parts.val_set, parts.data.names, parts.hyp, epoch=epoch,
                        epochs=parts.plan.epochs, final=final, batch_size=parts.plan.mini_batch,
                        workers=parts.plan.workers, device=parts.device, amp=parts.precision.amp,
                        progress=parts.options.progress, stop=trainer.stop_request, writer=parts.writer,
                        run_dir=parts.run_dir)


def evaluate_run(model: nn.Module, val_set, names: List[str], hyp: Hyperparameters, *, epoch: int, epochs: int,
                 final: bool, batch_size: int, workers: int, device: torch.device, amp: bool = False,
                 progress: Optional[bool] = None, stop: Optional[StopRequest] = None, writer: Any = None,
                 run_dir: Optional[Path] = None) -> Dict[str, Any]:
    """COCO metrics of ``model`` on ``val_set`` after ``epoch`` (0-based, of ``epochs``), in batches of
    ``batch_size`` read by ``workers`` processes; TensorBoard curves when ``writer`` is set; after the ``final``
    epoch also the summary table, ``run_dir/metrics.json`` and the plots (pycocotools' numbers then).

    A stop asked for meanwhile (``stop``: a signal, a loader worker that died) ends it within a batch with
    :class:`yolo.evaluation.EvaluationStopped`: nothing of it is recorded."""
    evaluator = Evaluator(names, val_set.ground_truth(), category_ids=getattr(val_set, "category_ids", None),
                          use_pycocotools=final)
    # hyp.darknet_map: Darknet's detector map from the same forward passes (its -map chart's figure)
    darknet = DarknetMapEvaluator(names, val_set.ground_truth()) if hyp.get("darknet_map") else None
    ensure_open_files(workers)
    loader = DataLoader(val_set, batch_size=max(1, batch_size), shuffle=False, num_workers=workers,
                        collate_fn=collate_fn, worker_init_fn=init_worker if workers > 0 else None)
    try:
        metrics = evaluate_model(model, QuietStart(loader), evaluator, conf_thres=hyp.conf_thres,
                                 iou_thres=hyp.iou_thres, device=device, amp=amp, progress=use_bars(progress),
                                 desc=f"val {epoch + 1}/{epochs}",
                                 stop=(lambda: stop.requested) if stop is not None else None,
                                 darknet_map=darknet)
    except RuntimeError as exc:
        if stop is None or not is_worker_death(exc):
            raise
        stop.worker_died(str(exc))
        raise EvaluationStopped(str(exc)) from None
    darknet_text = ""
    if darknet is not None:
        metrics["darknet_mAP50"] = metrics["darknet_map"]["map"]
        darknet_text = f"  darknet mAP50 {metrics['darknet_mAP50']:.4f}"
    logger.info("epoch %d/%d: mAP50 %.4f  mAP50_95 %.4f%s  P %.3f  R %.3f  (%d val images)", epoch + 1,
                epochs, metrics["mAP50"], metrics["mAP50_95"], darknet_text, metrics["precision"], metrics["recall"],
                metrics["num_images"])
    if writer is not None:
        try:
            evaluator.write_tensorboard(writer, epoch + 1, prefix="val", plots=final and hyp.plots)
        except Exception as exc:  # a report; never lose a run over it
            logger.warning("could not write the evaluation to TensorBoard: %s", exc)
    if final:
        try:
            print(evaluator.summary_text(metrics))
            if darknet is not None:
                print(darknet.report.text())
        except BrokenPipeError:  # the reader has gone (``| head``): the run goes on, its output discarded
            discard_output()
    if final and run_dir is not None:
        evaluator.save_metrics(run_dir / "metrics.json", {"epoch": epoch + 1})
        if hyp.plots:
            try:
                evaluator.save_plots(run_dir)
            except Exception as exc:  # plots are a convenience; never lose a run over them
                logger.warning("could not draw the evaluation plots: %s", exc)
    return metrics


__all__ = ["EvalHook", "evaluate_run", "evaluate_training", "fitness"]
