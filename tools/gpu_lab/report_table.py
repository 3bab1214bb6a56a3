"""The GPU report's markdown table: our figures beside Darknet's GPU build and the targets, with the ratios.

``figures[model][key]`` holds what was measured (a key absent: not measured). Keys (img/s: images per
second, more is better; ms: milliseconds per image, less is better):

- ``train_img_s``: end-to-end training; ``step_fp32_img_s``, ``step_amp_img_s``, ``step_amp_cl_img_s`` (AMP
  with channels_last): the step without the loader;
- ``pipeline_img_s_fp32``/``_fp16`` (batch ``B``), ``pipeline_b1_ms_fp32``/``_fp16``: the Detector pipeline;
- ``model_img_s_fp32``/``_fp16``, ``model_b1_ms_fp32``/``_fp16``: the network alone;
- ``darknet_train_img_s`` (steady state), ``darknet_train_command_img_s`` (whole command),
  ``darknet_detect_ms`` (``detector test``, network only, batch 1);
- where the time goes (:func:`time_tables`): ``stage_b1_<stage>_ms_<fp32|fp16>`` and ``stage_b_<stage>_ms_...``
  (detection, per batch, ``<stage>`` one of ``upload``, ``preprocess``, ``model``, ``postprocess``, ``total``),
  ``train_data_ms``, ``train_step_ms``, ``train_other_ms`` (training, per update) and ``train_workers``.

A figure not measured reads "not measured", or "not measured (stopped)" / "not measured (budget)" where the
report was stopped or its budget left the measurement out (``missing``).

"speed vs Darknet" is our speed over Darknet's (img/s over img/s, or Darknet's ms over ours): above 1, ours is
faster. "vs target" is the same ratio against the target; "met" says whether the target holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

__all__ = ["Row", "ROWS", "TARGETS", "NOT_MEASURED", "markdown_table", "time_tables", "format_value", "speed_ratio",
           "figure_label", "figure_text"]

NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Row:
    key: str
    work: str
    unit: str  # "img/s" (more is better) or "ms" (less is better)
    darknet: Optional[str] = None  # the key of Darknet's figure for the same work


def rows(batch: int) -> Tuple[Row, ...]:
    """The table's rows for training batch / detection batch ``batch``."""
    return (
        Row("train_img_s", f"training end to end, batch {batch}", "img/s", "darknet_train_img_s"),
        Row("step_fp32_img_s", f"training step only (no loader), batch {batch}, fp32", "img/s"),
        Row("step_amp_img_s", f"training step only (no loader), batch {batch}, AMP", "img/s"),
        Row("step_amp_cl_img_s", f"training step only (no loader), batch {batch}, AMP, channels_last", "img/s"),
        Row("pipeline_img_s_fp32", f"detection pipeline, batch {batch}, fp32", "img/s"),
        Row("pipeline_img_s_fp16", f"detection pipeline, batch {batch}, fp16", "img/s"),
        Row("pipeline_b1_ms_fp32", "detection pipeline, batch 1, fp32", "ms", "darknet_detect_ms"),
        Row("pipeline_b1_ms_fp16", "detection pipeline, batch 1, fp16", "ms", "darknet_detect_ms"),
        Row("model_img_s_fp32", f"model only, batch {batch}, fp32", "img/s"),
        Row("model_img_s_fp16", f"model only, batch {batch}, fp16", "img/s"),
        Row("model_b1_ms_fp32", "model only, batch 1, fp32", "ms", "darknet_detect_ms"),
        Row("model_b1_ms_fp16", "model only, batch 1, fp16", "ms", "darknet_detect_ms"),
    )


ROWS = rows(64)

# The targets on an H100 at 416 (model, key) -> (the bound: ">=" img/s or "<=" ms, value); training must also
# be at least TRAIN_VS_DARKNET times Darknet's GPU build.
TARGETS: Dict[Tuple[str, str], Tuple[str, float]] = {
    ("yolov3-tiny", "train_img_s"): (">=", 1000.0),
    ("yolov3", "train_img_s"): (">=", 700.0),
    ("yolov3", "pipeline_img_s_fp16"): (">=", 2500.0),
    ("yolov3", "pipeline_b1_ms_fp32"): ("<=", 3.0),
    ("yolov3", "pipeline_b1_ms_fp16"): ("<=", 3.0),
    ("yolov3-tiny", "pipeline_b1_ms_fp32"): ("<=", 1.5),
    ("yolov3-tiny", "pipeline_b1_ms_fp16"): ("<=", 1.5),
}
TRAIN_VS_DARKNET = 8.0


def format_value(value: Optional[float], unit: str) -> str:
    """``1,049 img/s``, ``2.61 ms``, ``1,250 ms``; :data:`NOT_MEASURED` for None."""
    if value is None:
        return NOT_MEASURED
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:,.3g} {unit}"  # 1,250 ms, not 1.25e+03 ms


def speed_ratio(ours: Optional[float], other: Optional[float], unit: str) -> Optional[float]:
    """Our speed over the other's: ``ours / other`` for img/s, ``other / ours`` for ms (above 1: ours faster)."""
    if ours is None or other is None or ours <= 0 or other <= 0:
        return None
    return ours / other if unit == "img/s" else other / ours


def _target_cells(model: str, row: Row, ours: Optional[float], darknet: Optional[float],
                  targets: bool) -> Tuple[str, str, str]:
    """(target, our speed over the target's, met) for one row; all "-" without ``targets``."""
    target = TARGETS.get((model, row.key))
    if target is None or not targets:
        return "-", "-", "-"
    bound, value = target
    text = f"{'≥' if bound == '>=' else '≤'} {format_value(value, row.unit)}"
    ratio = speed_ratio(ours, value, row.unit)
    met = None if ratio is None else ratio >= 1.0
    if row.key == "train_img_s":
        text += f" and ≥ {TRAIN_VS_DARKNET:g}x Darknet"
        vs_darknet = speed_ratio(ours, darknet, row.unit)
        met = None if met is None or vs_darknet is None else met and vs_darknet >= TRAIN_VS_DARKNET
    return (text, "-" if ratio is None else f"{ratio:.2f}x",
            NOT_MEASURED if met is None else ("yes" if met else "no"))


STAGE_NAMES = (("upload", "upload"), ("preprocess", "pre-processing"), ("model", "model"),
               ("postprocess", "post-processing"), ("total", "total"))
TRAIN_SPLIT = (("train_data_ms", "waiting for data"), ("train_step_ms", "step"), ("train_other_ms", "the rest"))
DARKNET_LABELS = {"darknet_detect_ms": ("Darknet detector test, network, batch 1", "ms"),
                  "darknet_train_img_s": ("Darknet detector train, steady", "img/s"),
                  "darknet_train_command_img_s": ("Darknet detector train, whole command", "img/s")}
Missing = Mapping[Tuple[str, str], str]


def _missing(model: str, key: Optional[str], missing: Optional[Missing]) -> str:
    why = (missing or {}).get((model, key)) if key else None
    return f"{NOT_MEASURED} ({why})" if why else NOT_MEASURED


def _cell(got: Mapping[str, float], model: str, key: Optional[str], unit: str, missing: Optional[Missing]) -> str:
    value = got.get(key) if key else None
    return format_value(value, unit) if value is not None else _missing(model, key, missing)


def figure_label(key: str, batch: int) -> str:
    """What a figure key measures, in words (the streamed rows)."""
    for row in rows(batch):
        if row.key == key:
            return row.work
    if key in DARKNET_LABELS:
        return DARKNET_LABELS[key][0]
    if key.startswith("stage_"):
        _, tag, stage, _, precision = key.split("_")
        size = 1 if tag == "b1" else batch
        return f"detection stage {dict(STAGE_NAMES)[stage]}, batch {size}, {precision}, per batch"
    split = dict(TRAIN_SPLIT)
    if key in split:
        return f"training, {split[key]}, per update"
    if key == "train_workers":
        return "training, loader workers"
    return key


def figure_text(key: str, value: float) -> str:
    """A figure with its unit (the streamed rows)."""
    if key == "train_workers":
        return f"{value:.0f}"
    unit = "img/s" if key.endswith("img_s") or "_img_s_" in key else "ms"
    return format_value(value, unit)


def markdown_table(figures: Mapping[str, Mapping[str, float]], models: Sequence[str], batch: int = 64,
                   targets: bool = True, missing: Optional[Missing] = None) -> str:
    """One markdown table, a row per model and work: ours, Darknet's GPU build, our speed over Darknet's,
    the target, our speed over the target's and whether it is met (``targets``: the run is one the targets
    are for, on a GPU at 416 with batch 64; otherwise those cells read "-"). ``missing``: (model, key) -> why
    a figure is not there (``"stopped"``, ``"budget"``), shown in its cell."""
    lines = ["| model | work | ours | Darknet GPU build | speed vs Darknet | target | vs target | met |",
             "|---|---|---|---|---|---|---|---|"]
    for model in models:
        got = figures.get(model, {})
        for row in rows(batch):
            ours = got.get(row.key)
            darknet = got.get(row.darknet) if row.darknet else None
            ratio = speed_ratio(ours, darknet, row.unit)
            dark_text = "-" if row.darknet is None else _cell(got, model, row.darknet, row.unit, missing)
            if row.darknet == "darknet_train_img_s" and got.get("darknet_train_command_img_s") is not None:
                dark_text += f" ({format_value(got['darknet_train_command_img_s'], row.unit)} whole command)"
            cells = [model, row.work, _cell(got, model, row.key, row.unit, missing), dark_text,
                     "-" if row.darknet is None else (f"{ratio:.2f}x" if ratio is not None else NOT_MEASURED),
                     *_target_cells(model, row, ours, darknet, targets)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def time_tables(figures: Mapping[str, Mapping[str, float]], models: Sequence[str], batch: int,
                precisions: Sequence[str] = ("fp32", "fp16"), missing: Optional[Missing] = None) -> str:
    """Where the time goes, two markdown tables: detection, per batch, the milliseconds of each stage (batch 1
    and ``batch``, each precision); training, per update, the milliseconds waiting for data, of the step and of
    the rest, and the loader workers."""
    lines = ["| model | detection, per batch | " + " | ".join(name for _, name in STAGE_NAMES) + " |",
             "|---|---|" + "---|" * len(STAGE_NAMES)]
    for model in models:
        got = figures.get(model, {})
        for precision in precisions:
            for tag, n in (("b1", 1), ("b", batch)):
                keys = [f"stage_{tag}_{stage}_ms_{precision}" for stage, _ in STAGE_NAMES]
                if not any(k in got for k in keys) and not any((model, k) in (missing or {}) for k in keys):
                    continue  # not part of this run (fp16 on the CPU)
                measured = any(k in got for k in keys)
                cells = []
                for key, (stage, _) in zip(keys, STAGE_NAMES):
                    if stage == "upload" and measured and key not in got:
                        cells.append("-")  # nothing to upload: the images are pre-processed where they are
                    else:
                        cells.append(_cell(got, model, key, "ms", missing))
                lines.append(f"| {model} | batch {n}, {precision} | " + " | ".join(cells) + " |")
    lines += ["", "| model | training, per update | " + " | ".join(name for _, name in TRAIN_SPLIT)
              + " | loader workers |", "|---|---|" + "---|" * (len(TRAIN_SPLIT) + 1)]
    for model in models:
        got = figures.get(model, {})
        cells = [_cell(got, model, key, "ms", missing) for key, _ in TRAIN_SPLIT]
        workers = got.get("train_workers")
        cells.append(f"{workers:.0f}" if workers is not None else _missing(model, "train_workers", missing))
        lines.append(f"| {model} | batch {batch}, end to end | " + " | ".join(cells) + " |")
    return "\n".join(lines)
