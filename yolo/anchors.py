"""Anchor boxes from a dataset's labels: Darknet's ``detector calc_anchors`` (src/detector.c, src/matrix.c).

The data are the label boxes' widths and heights scaled to the network input (``w * net_w``, ``h * net_h``
with ``w, h`` normalized to the image), one point per box. Darknet clusters them with k-means under the
distance ``1 - IoU`` of two boxes sharing a corner:

* **init** (``random_centers``): ``k`` distinct boxes drawn at random (Darknet seeds ``rand`` with the
  time, so its result varies from run to run; here the draw comes from a seeded generator);
* **assign** (``kmeans_expectation``): each box goes to its nearest centre, the first one on ties; the loop
  ends when no assignment changes (at most 1000 rounds; with ``k = 1`` one update comes first);
* **update** (``kmeans_maximization``): each centre becomes the mean of its boxes; a centre without boxes,
  or a coordinate that comes out exactly 0, keeps its old value;
* the centres are sorted by area, and the **mean IoU** is the average over boxes of the IoU with their
  nearest centre, in percent.

Arithmetic is float32 with sums accumulated box by box, as in Darknet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
from yolo.errors import AnchorCfgError
from yolo.files.atomic import write_text_atomic

MAX_ROUNDS = 1000


@dataclass
class AnchorResult:
    """``anchors``: Float32[k, 2] (w, h) in network-input pixels, by increasing area;
    ``assignments``: Int64[N], each box's cluster before sorting; ``rounds``: assignment rounds that
    changed something (Darknet's printed "iterations"); ``mean_iou``: percent."""

    anchors: np.ndarray
    assignments: np.ndarray
    rounds: int
    mean_iou: float

    def format(self, width: int) -> str:
        """The anchors as Darknet prints them (``anchors = ...`` line, ready to paste into a cfg)."""
        return format_anchors(self.anchors, width)


def format_anchors(anchors: np.ndarray, width: int) -> str:
    """Darknet's text: ``"%3.0f,%3.0f"`` pairs joined by ``", "`` when ``width > 32``, else ``"%2.4f,%2.4f"``
    (anchors in grid cells, for ``[region]`` heads computed with ``width = net_w / 32``)."""
    pattern = "{:3.0f},{:3.0f}" if width > 32 else "{:2.4f},{:2.4f}"
    return ", ".join(pattern.format(float(w), float(h)) for w, h in anchors)


def _distances(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """``1 - IoU`` of corner-aligned boxes: Float32[N, 2] points x Float32[k, 2] centres -> Float32[N, k]."""
    inter = np.minimum(points[:, None, 0], centres[None, :, 0]) * np.minimum(points[:, None, 1], centres[None, :, 1])
    union = (points[:, None, 0] * points[:, None, 1] + centres[None, :, 0] * centres[None, :, 1]) - inter
    return np.float32(1) - inter / union


def _update(points: np.ndarray, assignments: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Darknet's kmeans_maximization: per-cluster means, old values kept where a cluster is empty or a
    coordinate is 0."""
    sums = np.zeros_like(centres)
    np.add.at(sums, assignments, points)  # unbuffered: adds box by box in order, as Darknet's loop
    counts = np.bincount(assignments, minlength=len(centres)).astype(np.float32)
    new = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], np.float32(0))
    return np.where(new == 0, centres, new).astype(np.float32)


def kmeans_anchors(sizes: np.ndarray, k: int, seed: int = 0, init: Optional[np.ndarray] = None) -> AnchorResult:
    """Darknet's k-means of box sizes (see the module docstring).

    Args:
        sizes: Float[N, 2] box widths and heights in network-input pixels, N >= k, all positive.
        k: number of anchors.
        seed: seeds the draw of the initial centres (ignored with ``init``).
        init: Int[k] indices of the boxes to start from (Darknet draws them at random).
    """
    points = np.ascontiguousarray(sizes, dtype=np.float32).reshape(-1, 2)
    if k < 1 or len(points) < k:
        raise ValueError(f"k-means needs at least k={k} boxes, got {len(points)}")
    if not np.all(points > 0):
        raise ValueError("box widths and heights must be positive")
    if init is None:
        init = np.random.default_rng(seed).permutation(len(points))[:k]
    centres = points[np.asarray(init, dtype=np.int64)].copy()
    assignments = np.zeros(len(points), dtype=np.int64)
    if k == 1:
        centres = _update(points, assignments, centres)
    rounds = 0
    while rounds < MAX_ROUNDS:
        nearest = _distances(points, centres).argmin(1)  # first centre on ties, as Darknet's strict '<'
        if np.array_equal(nearest, assignments):
            break
        assignments = nearest
        centres = _update(points, assignments, centres)
        rounds += 1
    order = np.argsort(centres[:, 0] * centres[:, 1], kind="stable")
    anchors = centres[order]
    return AnchorResult(anchors, assignments, rounds, mean_iou(points, anchors))


def mean_iou(sizes: np.ndarray, anchors: np.ndarray) -> float:
    """Average over boxes of the IoU with the best anchor (corner-aligned), in percent."""
    points = np.asarray(sizes, dtype=np.float32).reshape(-1, 2)
    best = np.float32(1) - _distances(points, np.asarray(anchors, dtype=np.float32)).min(1)
    return float(100.0 * best.astype(np.float64).sum() / max(len(points), 1))


def label_sizes(records: Sequence, net_hw: Tuple[int, int]) -> np.ndarray:
    """Float32[N, 2] widths and heights of every label box scaled to the network input ``(h, w)``.

    ``records`` are :class:`yolo.data.dataset.ImageRecord` (xyxy boxes in original pixels with the image's
    ``width``/``height``), so the normalized size is ``box_w / image_w`` as in the label file.
    """
    net_h, net_w = net_hw
    rows = []
    for record in records:
        if len(record.boxes):
            boxes = np.asarray(record.boxes, dtype=np.float32)
            w = (boxes[:, 2] - boxes[:, 0]) / np.float32(record.width) * np.float32(net_w)
            h = (boxes[:, 3] - boxes[:, 1]) / np.float32(record.height) * np.float32(net_h)
            rows.append(np.stack([w, h], 1))
    sizes = np.concatenate(rows).astype(np.float32) if rows else np.zeros((0, 2), np.float32)
    return sizes[(sizes[:, 0] > 0) & (sizes[:, 1] > 0)]


# ------------------------------------------------------------------------------------------ cfg rewriting
_SECTION = re.compile(r"^\s*\[([^\]]+)\]")


def _key(line: str) -> Optional[str]:
    body = line.split("#")[0].split(";")[0]
    return body.split("=")[0].strip() if "=" in body else None


# Section names (lower case, as matched) of the heads whose anchors are in input pixels -> their cfg spelling.
ANCHOR_HEADS = {"yolo": "yolo", "gaussian_yolo": "Gaussian_yolo"}


def set_cfg_anchors(cfg_text: str, anchors: np.ndarray, source: str = "<cfg>", width: int = 416) -> str:
    """``cfg_text`` with ``anchors=`` (Darknet's printed values) and ``num=`` set in every ``[yolo]`` and
    ``[Gaussian_yolo]`` section.

    Every ``mask`` index must name one of the new anchors, and together the masks must use each anchor
    exactly once (as Darknet's shipped cfgs do); otherwise :class:`AnchorCfgError` names the line.
    """
    k = len(anchors)
    text_value = format_anchors(anchors, width)
    lines = cfg_text.replace("\r\n", "\n").split("\n")
    sections: List[Tuple[str, int, int]] = []  # (type, first line index, end index)
    for i, line in enumerate(lines):
        match = _SECTION.match(line)
        if match:
            if sections:
                sections[-1] = sections[-1][:2] + (i,)
            sections.append((match.group(1).strip().lower(), i, len(lines)))
    heads = [s for s in sections if s[0] in ANCHOR_HEADS]  # a network may mix them: each gets the anchors
    if not heads:
        if any(s[0] == "region" for s in sections):
            raise AnchorCfgError(f"{source}: [region] anchors are in grid cells: paste them by hand (compute them "
                                 "with --img-size set to the input size / 32, e.g. --img-size 13 for 416x416)")
        raise AnchorCfgError(f"{source}: no [yolo] or [Gaussian_yolo] section to write anchors into")
    used: List[int] = []
    out = list(lines)
    for kind, start, end in heads:
        kind = ANCHOR_HEADS[kind]
        keys = {}
        for i in range(start + 1, end):
            key = _key(lines[i])
            if key:
                keys[key] = i
        if "mask" in keys:
            raw = lines[keys["mask"]].split("#")[0].split("=", 1)[1]
            try:
                mask = [int(v) for v in raw.replace(" ", "").split(",") if v]
            except ValueError:
                raise AnchorCfgError(f"{source}:{keys['mask'] + 1}: [{kind}] mask '{raw.strip()}' is not a list "
                                     "of integers") from None
        else:
            mask = list(range(k))
        bad = [m for m in mask if not 0 <= m < k]
        if bad:
            line = keys.get("mask", start) + 1
            raise AnchorCfgError(f"{source}:{line}: [{kind}] mask {bad} refers to anchors outside 0..{k - 1} "
                                 f"of the {k} new anchors: compute {max(bad) + 1} or more, or edit the masks")
        used += mask
        for key, value in (("anchors", text_value), ("num", str(k))):
            if key in keys:
                out[keys[key]] = f"{key}={value}"
            else:
                out[start] = out[start] + f"\n{key}={value}"
    if sorted(used) != list(range(k)):
        raise AnchorCfgError(f"{source}:{heads[0][1] + 1}: the masks use anchors {sorted(used)}, "
                             f"not each of the {k} new anchors exactly once: pass -n {len(used)} or edit the masks")
    return "\n".join(out)


def write_cfg_with_anchors(cfg: Union[str, Path], anchors: np.ndarray, output: Union[str, Path],
                           width: int = 416) -> Path:
    """Write a copy of ``cfg`` with the anchors set (:func:`set_cfg_anchors`); returns ``output``."""
    cfg = Path(cfg)
    text = set_cfg_anchors(cfg.read_text(encoding="utf-8"), anchors, str(cfg), width)
    return write_text_atomic(output, text)  # whole or not at all; a device or a FIFO at ``output`` is refused


__all__ = ["AnchorCfgError", "AnchorResult", "format_anchors", "kmeans_anchors", "label_sizes", "mean_iou",
           "set_cfg_anchors", "write_cfg_with_anchors"]
