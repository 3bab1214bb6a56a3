"""Plots: the training chart (``results.png``) and the evaluation's precision-recall curves and confusion
matrix (matplotlib, Agg backend).

Every function returns a ``matplotlib.figure.Figure`` built without pyplot's global state, so it
works in worker threads and headless servers, can be written with :func:`save_figure` or handed to
TensorBoard's ``SummaryWriter.add_figure``.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from yolo.errors import shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["pr_curves_figure", "pr_curves_grid_figure", "confusion_matrix_figure", "new_figure", "results_figure",
           "save_figure"]

# the x axis, and the durations and worker count, which say nothing of the learning
RESULTS_NOT_CHARTED = ("epoch", "time_s", "time_data_s", "time_step_s", "time_other_s", "workers")
RESULTS_LINE_COLOUR = "#1f77b4"  # matplotlib's tab:blue
RESULTS_PANEL_INCHES = (3.0, 2.6)  # width, height of one panel (100 dpi)
RESULTS_PANELS_PER_ROW = 5
# The most characters of a class name a plot shows (a 100,000-character title took matplotlib 50 s to draw).
PLOT_NAME_CHARS = 40


def plot_name(name: str) -> str:
    """A class name as a plot shows it: escapes for control characters, at most :data:`PLOT_NAME_CHARS` of it,
    and ``$`` a dollar sign (matplotlib reads the text between two as math, and fails on ``$\\frac$``)."""
    return shown(name, PLOT_NAME_CHARS).replace("$", r"\$")



def new_figure(**options: Any) -> Figure:
    """``matplotlib.figure.Figure(**options)`` on the Agg backend. matplotlib is imported by the first drawing,
    not with this module: it takes half a second, which a tool that draws nothing (detection, an export, a refused
    input) does not pay."""
    import matplotlib  # deferred import: half a second, for the processes that draw

    if "matplotlib.pyplot" not in sys.modules:  # a pyplot the caller uses keeps its backend
        matplotlib.use("Agg")  # headless: never needs a display
    from matplotlib.figure import Figure  # deferred import: as above

    return Figure(**options)


def save_figure(fig: Figure, path: Union[str, Path], dpi: int = 150) -> Path:
    """Write ``fig`` as an image (format from the suffix) and release it; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    fig.clear()
    return path


def _series(rows: Sequence[Mapping[str, str]], column: str) -> Tuple[List[float], List[float]]:
    """``(epochs, values)`` of one results.csv column; blank cells (epochs without an evaluation) and cells
    that are not numbers are left out."""
    epochs, values = [], []
    for row in rows:
        try:
            epoch, value = float(row["epoch"]), float(row[column])
        except (KeyError, TypeError, ValueError):
            continue
        epochs.append(epoch)
        values.append(value)
    return epochs, values


def results_figure(rows: Sequence[Mapping[str, str]]) -> Figure:
    """The training chart: one panel per column of ``results.csv`` rows (losses, lr, precision, recall,
    mAP50, mAP50_95; not ``epoch``, the times and ``workers``) against the epoch, :data:`RESULTS_PANELS_PER_ROW` panels a
    row, each :data:`RESULTS_PANEL_INCHES` at 100 dpi."""
    columns = [c for c in (rows[0].keys() if rows else ()) if c not in RESULTS_NOT_CHARTED]
    per_row = max(1, min(RESULTS_PANELS_PER_ROW, len(columns)))
    lines = max(1, math.ceil(len(columns) / per_row))
    fig = new_figure(figsize=(RESULTS_PANEL_INCHES[0] * per_row, RESULTS_PANEL_INCHES[1] * lines), dpi=100,
                 tight_layout=True)
    for i, column in enumerate(columns):
        ax = fig.add_subplot(lines, per_row, i + 1)
        epochs, values = _series(rows, column)
        ax.plot(epochs, values, color=RESULTS_LINE_COLOUR, linewidth=1.5, marker="o", markersize=3)
        ax.set_title(column, fontsize=9)
        ax.set_xlabel("epoch", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if not columns:
        fig.add_subplot().text(0.5, 0.5, "no results yet", ha="center", va="center")
    return fig


def _defined(curves: np.ndarray) -> np.ndarray:
    """Classes (columns) with a defined curve (classes without ground truth are NaN)."""
    return ~np.isnan(curves).all(axis=0)


def pr_curves_figure(recall: np.ndarray, precision: np.ndarray, names: Sequence[str],
                     ap50: Optional[Sequence[float]] = None, max_legend: int = 20) -> Figure:
    """Every class's precision-recall curve at IoU 0.5 in one plot, plus their mean in bold.

    Args:
        recall: ``[R]`` recall thresholds (COCO's 101 points).
        precision: ``[R, C]`` interpolated precision per class; NaN columns (no ground truth) are skipped.
        names: ``C`` class names.
        ap50: per-class AP50 for the legend.
        max_legend: name each class in the legend only up to this many classes.
    """
    fig = new_figure(figsize=(8, 6), tight_layout=True)
    ax = fig.add_subplot()
    defined = np.flatnonzero(_defined(precision))
    show_legend = len(defined) <= max_legend
    for c in defined:
        label = None
        if show_legend:
            label = plot_name(names[c]) if ap50 is None else f"{plot_name(names[c])} {ap50[c]:.3f}"
        ax.plot(recall, precision[:, c], linewidth=1, label=label, color=None if show_legend else "grey",
                alpha=1.0 if show_legend else 0.5)
    if len(defined):
        mean = precision[:, defined].mean(axis=1)
        ax.plot(recall, mean, linewidth=3, color="tab:blue", label=f"all classes {mean.mean():.3f} mAP@0.5")
    ax.set_xlabel("Recall")
    ax.set_ylabel("Precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title("Precision-recall at IoU 0.5")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=7)
    return fig


def pr_curves_grid_figure(recall: np.ndarray, precision: np.ndarray, names: Sequence[str],
                          ap50: Optional[Sequence[float]] = None) -> Figure:
    """One small precision-recall panel per class with ground truth, titled with its AP50."""
    defined = np.flatnonzero(_defined(precision))
    n = max(len(defined), 1)
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    fig = new_figure(figsize=(2.0 * cols, 1.8 * rows), tight_layout=True)
    for i, c in enumerate(defined):
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.plot(recall, precision[:, c], linewidth=1.2)
        ax.fill_between(recall, precision[:, c], alpha=0.2)
        title = plot_name(names[c]) if ap50 is None else f"{plot_name(names[c])} {ap50[c]:.2f}"
        ax.set_title(title, fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.tick_params(labelsize=5)
    if not len(defined):
        fig.add_subplot().text(0.5, 0.5, "no ground truth", ha="center", va="center")
    return fig


def confusion_matrix_figure(matrix: np.ndarray, names: Sequence[str], conf_thres: Optional[float] = None,
                            iou_thres: Optional[float] = None, normalize: bool = True) -> Figure:
    """Heat map of a ``[C + 1, C + 1]`` confusion matrix (rows true, columns predicted, last = background).

    With ``normalize`` each row (true class) is divided by its total, so a cell reads "fraction of
    this class's boxes predicted as that class"; the background row is normalized the same way.
    Rows and columns that are all zero are dropped to keep large label sets readable.
    """
    labels = [plot_name(name) for name in names] + ["background"]
    m = matrix.astype(np.float64)
    used = (m.sum(axis=0) + m.sum(axis=1)) > 0
    used[-1] = True
    m, labels = m[np.ix_(used, used)], [l for l, u in zip(labels, used) if u]
    if normalize:
        m = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
    k = len(labels)
    size = min(max(6.0, 0.22 * k + 3), 30.0)
    fig = new_figure(figsize=(size, size * 0.85), tight_layout=True)
    ax = fig.add_subplot()
    image = ax.imshow(np.where(m > 0, m, np.nan), cmap="Blues", vmin=0, vmax=1 if normalize else None)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    font = max(3.0, min(9.0, 200.0 / k))
    ax.set_xticks(range(k), labels, rotation=90, fontsize=font)
    ax.set_yticks(range(k), labels, fontsize=font)
    if k <= 30:
        for i in range(k):
            for j in range(k):
                if m[i, j] > 0:
                    ax.text(j, i, f"{m[i, j]:.2f}" if normalize else f"{int(m[i, j])}", ha="center", va="center",
                            fontsize=font * 0.8, color="white" if m[i, j] > 0.5 * np.nanmax(m) else "black")
    ax.set_xlabel("Predicted")
    ax.set_ylabel("True")
    title = "Confusion matrix" + (" (row-normalized)" if normalize else "")
    if conf_thres is not None and iou_thres is not None:
        title += f", conf >= {conf_thres:g}, IoU >= {iou_thres:g}"
    ax.set_title(title)
    return fig
