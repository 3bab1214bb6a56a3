"""Evaluation during training: COCO mAP on the val split every ``eval_interval`` epochs and after the last,
and which epoch is the best (:func:`fitness`)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional

from torch.utils.data import DataLoader

from yolo.data import collate_fn
from yolo.data.loader import one_thread_per_worker
from yolo.engine.hooks.base import HookBase
from yolo.evaluation import Evaluator, evaluate_model
from yolo.progress import use_bars

logger = logging.getLogger(__name__)


def fitness(metrics: Dict[str, Any]) -> float:
    """The number ``best.pt`` maximizes: ``0.1 * mAP50 + 0.9 * mAP50_95``."""
    return 0.1 * max(float(metrics.get("mAP50", 0.0)), 0.0) + 0.9 * max(float(metrics.get("mAP50_95", 0.0)), 0.0)


class EvalHook(HookBase):
    """After an epoch that is due: evaluate (``trainer._evaluate``), set ``trainer.epoch_metrics`` (empty when
    not due) and ``trainer.is_best``. Holds the best fitness so far (its state, restored on resume); a best
    score whose ``best_path`` is missing (a kill between the two saves) is dropped, so that the next evaluation
    writes a new ``best.pt``."""

    def __init__(self, interval: int, best_path: Optional[Path] = None):
        self.interval = interval
        self.best_path = best_path
        self.best_fitness = -1.0

    def after_epoch(self, trainer) -> None:
        done = trainer.epoch  # epochs completed, the one just trained included
        final = done == trainer.epochs
        metrics = trainer._evaluate(done - 1, final=final) if final or done % self.interval == 0 else {}
        trainer.epoch_metrics = metrics
        trainer.is_best = bool(metrics) and fitness(metrics) > self.best_fitness
        if trainer.is_best:
            self.best_fitness = fitness(metrics)

    def state_dict(self) -> Dict[str, Any]:
        return {"best_fitness": self.best_fitness}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        best = float(state.get("best_fitness", -1.0))
        if best >= 0 and self.best_path is not None and not self.best_path.is_file():
            logger.warning("%s is missing although last.pt records a best fitness of %.4f: the next evaluation "
                           "writes a new best.pt", self.best_path, best)
            best = -1.0
        self.best_fitness = best


def evaluate_run(trainer, epoch: int, final: bool) -> Dict[str, Any]:
    """COCO metrics of ``trainer.eval_model()`` on the val split after ``epoch`` (0-based); TensorBoard curves
    when ``trainer.writer`` is set; after the ``final`` epoch also the summary table, ``metrics.json`` and
    the plots (pycocotools' numbers then). Sets ``trainer.last_metrics``."""
    hyp, val_set = trainer.hyp, trainer.val_set
    evaluator = Evaluator(trainer.data.names, val_set.ground_truth(),
                          category_ids=getattr(val_set, "category_ids", None), use_pycocotools=final)
    loader = DataLoader(val_set, batch_size=max(1, trainer.mini_batch), shuffle=False,
                        num_workers=trainer.workers, collate_fn=collate_fn,
                        worker_init_fn=one_thread_per_worker if trainer.workers > 0 else None)
    metrics = evaluate_model(trainer.eval_model(), loader, evaluator, conf_thres=hyp.conf_thres,
                             iou_thres=hyp.iou_thres, device=trainer.device, amp=trainer.amp,
                             progress=use_bars(trainer.options.progress), desc=f"val {epoch + 1}/{trainer.epochs}")
    logger.info("epoch %d/%d: mAP50 %.4f  mAP50_95 %.4f  P %.3f  R %.3f  (%d val images)", epoch + 1,
                trainer.epochs, metrics["mAP50"], metrics["mAP50_95"], metrics["precision"], metrics["recall"],
                metrics["num_images"])
    if trainer.writer is not None:
        try:
            evaluator.write_tensorboard(trainer.writer, epoch + 1, prefix="val", plots=final and hyp.plots)
        except Exception as exc:  # a report; never lose a run over it
            logger.warning("could not write the evaluation to TensorBoard: %s", exc)
    if final:
        print(evaluator.summary_text(metrics))
        evaluator.save_metrics(trainer.run_dir / "metrics.json", {"epoch": epoch + 1})
        if hyp.plots:
            try:
                evaluator.save_plots(trainer.run_dir)
            except Exception as exc:  # plots are a convenience; never lose a run over them
                logger.warning("could not draw the evaluation plots: %s", exc)
    trainer.last_metrics = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
    return metrics


__all__ = ["EvalHook", "evaluate_run", "fitness"]
