"""What an evaluation shows: the text tables, the figures (drawn by :mod:`yolo.plots`), TensorBoard
scalars and figures, and the metrics JSON.

Every function reads the outputs of :meth:`yolo.evaluation.Evaluator.evaluate`: ``metrics`` (its
returned dict) and ``results`` (its :attr:`~yolo.evaluation.Evaluator.results` arrays).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from yolo import plots
from yolo.errors import shown
from yolo.evaluation.metrics import COCO_STAT_NAMES

__all__ = ["class_table", "summary_text", "figures", "save_plots", "write_tensorboard", "save_metrics"]

TENSORBOARD_SCALARS = ("mAP50", "mAP50_95", "mAP75", "AR100", "precision", "recall")


def class_table(metrics: Mapping[str, Any]) -> str:
    """The per-class table (images, instances, P, R, AP50, AP) with an ``all`` row first."""
    per_class = {shown(name): m for name, m in metrics["per_class"].items()}  # as every echoed value: escaped, cut
    width = max([len("class")] + [len(n) for n in per_class]) + 2
    lines = [f"{'class':>{width}}{'images':>9}{'instances':>11}{'P':>8}{'R':>8}{'AP50':>8}{'AP':>8}"]

    def row(name, images, instances, p, r, ap50, ap):
        lines.append(f"{name:>{width}}{images:>9}{instances:>11}{p:>8.3f}{r:>8.3f}{ap50:>8.3f}{ap:>8.3f}")

    row("all", metrics["num_images"], metrics["num_instances"], metrics["precision"], metrics["recall"],
        max(metrics["mAP50"], 0.0), max(metrics["mAP50_95"], 0.0))
    for name, m in per_class.items():
        row(name, m["images"], m["instances"], m["P"], m["R"], m["AP50"], m["AP"])
    return "\n".join(lines)


def summary_text(metrics: Mapping[str, Any], coco_summary: Optional[str] = None) -> str:
    """COCO's 12-line summary (``coco_summary``, pycocotools' own text, when it ran; else the defined
    scalars one per line) followed by the class table."""
    if coco_summary is None:
        coco_summary = "\n".join(f"{k:>10}: {metrics[k]:.4f}" for k in COCO_STAT_NAMES if metrics[k] > -1)
    note = f"(P and R at confidence {metrics['conf']:.3f}, the best mean F1, IoU 0.5)"
    return f"{coco_summary}\n{class_table(metrics)}\n{note}"


def figures(results: Mapping[str, Any], names: Sequence[str], conf_thres_confusion: float,
            iou_thres_confusion: float) -> Dict[str, Any]:
    """Matplotlib figures for TensorBoard ``add_figure`` or files: ``pr_curves`` (every class + mean),
    ``pr_curves_per_class`` (one panel per class) and ``confusion_matrix``. They are standalone
    figures (no pyplot state): nothing to close."""
    return {
        "pr_curves": plots.pr_curves_figure(results["recall_thresholds"], results["pr_curves"], names,
                                            results["ap50_per_class"]),
        "pr_curves_per_class": plots.pr_curves_grid_figure(results["recall_thresholds"], results["pr_curves"],
                                                           names, results["ap50_per_class"]),
        "confusion_matrix": plots.confusion_matrix_figure(results["confusion_matrix"], names,
                                                          conf_thres_confusion, iou_thres_confusion),
    }


def save_plots(named_figures: Mapping[str, Any], save_dir: Union[str, Path]) -> List[Path]:
    """Write each figure as ``save_dir/NAME.png``; returns the paths."""
    save_dir = Path(save_dir)
    save_dir.mkdir(parents=True, exist_ok=True)
    return [plots.save_figure(fig, save_dir / f"{name}.png") for name, fig in named_figures.items()]


def write_tensorboard(writer, metrics: Mapping[str, Any], step: int, prefix: str = "val",
                      named_figures: Optional[Mapping[str, Any]] = None) -> None:
    """Log to a ``torch.utils.tensorboard.SummaryWriter``: the defined COCO scalars and
    precision/recall under ``prefix/``, per-class AP50 under ``prefix_AP50/``, and the figures."""
    for key in TENSORBOARD_SCALARS:
        if metrics[key] > -1:
            writer.add_scalar(f"{prefix}/{key}", metrics[key], step)
    for name, m in metrics["per_class"].items():
        writer.add_scalar(f"{prefix}_AP50/{name}", m["AP50"], step)
    for name, fig in (named_figures or {}).items():
        writer.add_figure(f"{prefix}/{name}", fig, step, close=False)


def save_metrics(metrics: Mapping[str, Any], path: Union[str, Path], extra: Optional[Mapping[str, Any]] = None
                 ) -> Path:
    """Write ``metrics`` (plus ``extra`` entries) as JSON; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**metrics, **(extra or {})}, indent=2))
    return path
