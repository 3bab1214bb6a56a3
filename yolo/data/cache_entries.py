"""A label cache's entries are untrusted input: each one is checked before its labels are used.

A cache file lies beside the labels, where anyone who can edit the labels can edit it too (or a tool, a merge, a
disk error can damage it). What the scan would never have written (a class id beyond the class count, a box
outside the image, ``"labels": "garbage"``, a size of -5) makes the entry invalid, and the scan reads that
image and its label file again instead, as if the entry were not there.

One entry (written by :func:`yolo.data.yolo_layout.scan_yolo`)::

    fp        list: the image's and the label file's fingerprint (compared by the scan)
    shape     [height, width] of the image, or None when it is unusable
    reason    None, or why the image is unusable (a text)
    labels    [[class, cx, cy, w, h], ...] normalized 0..1, as :func:`yolo.data.validation.parse_label_lines`
              returns them (boxes inside the image)
    problems  [[path, reason, line, kind, code, count], ...] (:meth:`yolo.data.validation.Problem.to_json`)
"""
from __future__ import annotations

import math
from typing import Any

from yolo.files.images import MIN_IMAGE_SIDE

# The largest image side OpenCV decodes (2^20); a cached size above it was not written by a scan.
MAX_SIDE = 1 << 20
PROBLEM_KINDS = ("image", "file", "box", "orphan")
# The most entries one problem stands for (the lines of a list file).
MAX_COUNT = 1 << 31
# Rounding of the normalized values (float32 in the scan, written as JSON numbers).
_SLACK = 1e-5


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _valid_shape(shape: Any, reason: Any) -> bool:
    if shape is None:
        return isinstance(reason, str)
    return (isinstance(shape, (list, tuple)) and len(shape) == 2 and all(_is_int(v) for v in shape)
            and all(MIN_IMAGE_SIDE <= v <= MAX_SIDE for v in shape) and reason is None)


def _valid_label(row: Any, num_classes: int) -> bool:
    if not (isinstance(row, list) and len(row) == 5 and all(_is_number(v) for v in row)):
        return False
    cls, cx, cy, w, h = row
    if cls != int(cls) or not 0 <= cls < num_classes or w <= 0 or h <= 0:
        return False
    return (cx - w / 2 >= -_SLACK and cy - h / 2 >= -_SLACK and cx + w / 2 <= 1 + _SLACK
            and cy + h / 2 <= 1 + _SLACK)


def _valid_problem(row: Any) -> bool:
    if not (isinstance(row, list) and len(row) == 6):
        return False
    path, reason, line, kind, code, count = row
    return (isinstance(path, str) and isinstance(reason, str) and (line is None or (_is_int(line) and line >= 1))
            and kind in PROBLEM_KINDS and isinstance(code, str) and _is_int(count) and 1 <= count <= MAX_COUNT)


def valid_entry(entry: Any, num_classes: int) -> bool:
    """Whether ``entry`` (one image's cached scan result) is one the scan could have written for a dataset of
    ``num_classes`` classes (see the module's docstring)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("fp"), list):
        return False
    labels, problems = entry.get("labels"), entry.get("problems")
    return (_valid_shape(entry.get("shape"), entry.get("reason"))
            and isinstance(labels, list) and all(_valid_label(row, num_classes) for row in labels)
            and isinstance(problems, list) and all(_valid_problem(row) for row in problems))


__all__ = ["valid_entry"]
