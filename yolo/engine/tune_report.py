"""What a hyperparameter search leaves beside its trials (:mod:`yolo.engine.tune`): ``trials.csv`` (one row per
trial: its number, state, score, hyperparameters, run folder and what ended it), ``trials.png`` (the score against
each searched hyperparameter) and ``best_hyp.yaml`` (the ``--hyp`` file of the best trial, which ``tools/train.py``
takes as it is; searched loss gains, cfg keys, are in ``best.cfg`` beside it: :mod:`yolo.engine.tune_gains`).
Each is written atomically from the study's records, so any process of a shared study may rewrite them.
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Sequence

import yaml

from yolo.engine.tune_gains import is_gain
from yolo.files.atomic import atomic_path, write_text_atomic
from yolo.plots import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PANEL_INCHES = (3.2, 2.6)
PANELS_PER_ROW = 4
STATE_COLOURS = {"COMPLETE": "#1f77b4", "PRUNED": "#999999"}  # tab:blue; pruned trials at their last report


def trial_rows(trials: Sequence[Any], keys: Sequence[str]) -> List[Dict[str, Any]]:
    """One dict per Optuna ``FrozenTrial``: ``trial``, ``state``, ``value`` (a pruned trial's last reported one),
    each of ``keys`` (blank when the trial did not draw it), ``run_dir`` and ``note``."""
    rows = []
    for t in sorted(trials, key=lambda t: t.number):
        value = t.value
        if value is None and t.intermediate_values:
            value = t.intermediate_values[max(t.intermediate_values)]
        note = t.user_attrs.get("note", "")
        rows.append({"trial": t.number, "state": t.state.name, "value": "" if value is None else f"{value:.6g}",
                     **{k: t.params.get(k, "") for k in keys}, "run_dir": t.user_attrs.get("run_dir", ""),
                     "note": note})
    return rows


def write_trials_csv(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], path: Path) -> Path:
    """``rows`` (:func:`trial_rows`) as ``path``, atomically."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["trial", "state", "value", *keys, "run_dir", "note"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return write_text_atomic(path, out.getvalue())


def trials_figure(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], metric: str,
                  log_keys: Sequence[str] = ()) -> Figure:
    """The score (``metric``) of each finished or pruned trial against each hyperparameter of ``keys``, one panel
    per key (a log axis for ``log_keys``); pruned trials in gray at their last reported score."""
    cols = max(1, min(PANELS_PER_ROW, len(keys)))
    nrows = max(1, math.ceil(len(keys) / cols))
    from matplotlib.ticker import NullFormatter  # deferred import: matplotlib, for the processes that draw

    fig = new_figure(figsize=(PANEL_INCHES[0] * cols, PANEL_INCHES[1] * nrows), layout="constrained")
    scored = [r for r in rows if r["value"] != "" and r["state"] in STATE_COLOURS]
    for i, key in enumerate(keys or ["(none)"]):
        ax = fig.add_subplot(nrows, cols, i + 1)
        points = [(float(r[key]), float(r["value"]), STATE_COLOURS[r["state"]]) for r in scored if r.get(key, "") != ""]
        if points:
            xs, ys, colours = zip(*points)
            ax.scatter(xs, ys, c=colours, s=18)
        if key in log_keys:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # the decades only: minor labels run into each other
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{len(scored)} trials: {metric} (gray: pruned)")
    return fig


def write_trials_plot(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], metric: str, path: Path,
                      log_keys: Sequence[str] = ()) -> Path:
    """:func:`trials_figure` as a PNG at ``path``, atomically."""
    fig = trials_figure(rows, keys, metric, log_keys)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
    finally:
        fig.clear()
    return path


def hyp_with(base: Mapping[str, Any], params: Mapping[str, Any]) -> Dict[str, Any]:
    """``base`` (a ``--hyp`` mapping) with ``params`` drawn over it (``augment.KEY`` into ``augment``; the loss
    gains, ``gain.KEY``, are cfg keys and left out)."""
    hyp = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for key, value in params.items():
        if is_gain(key):
            continue
        if key.startswith("augment."):
            hyp.setdefault("augment", {})
            hyp["augment"] = {**(hyp["augment"] or {}), key[len("augment."):]: value}
        else:
            hyp[key] = value
    return hyp


def write_best_hyp(base: Mapping[str, Any], params: Mapping[str, Any], heading: str, path: Path) -> Path:
    """The ``--hyp`` YAML of the best trial: ``base`` with its ``params``, ``heading`` as a comment line."""
    text = f"# {heading}\n" + yaml.safe_dump(_plain(hyp_with(base, params)), sort_keys=False)
    return write_text_atomic(path, text)


def _plain(value: Any) -> Any:
    """Numbers as Python's own (an Optuna value may be a numpy scalar), for YAML's safe dumper."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def best_heading(study_name: str, number: int, metric: str, value: float, trials: int,
                 with_cfg: bool = False) -> str:
    """The first line of ``best_hyp.yaml`` (``with_cfg``: the search drew loss gains, written in ``best.cfg``)."""
    command = "tools/train.py --cfg best.cfg --hyp best_hyp.yaml" if with_cfg else "tools/train.py --hyp THIS_FILE"
    return (f"the best of {trials} trials of the hyperparameter search '{study_name}': trial {number}, "
            f"{metric} {value:.4f}; train with: {command}")


__all__ = ["best_heading", "hyp_with", "trial_rows", "trials_figure", "write_best_hyp", "write_trials_csv",
           "write_trials_plot"]
