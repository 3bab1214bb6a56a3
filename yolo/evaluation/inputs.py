"""What the :class:`~yolo.evaluation.evaluator.Evaluator` takes, checked: each image's ground truth when it is
built and each batch of detections in ``process``, so that a missing key, a wrong shape or a NaN box is a
``ValueError`` naming the image rather than an IndexError in the confusion matrix or a NaN box that COCOeval
scores as a perfect match."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from yolo.ops.coco import ImageId, as_numpy


def require_keys(entry: Any, keys: Sequence[str], where: str) -> None:
    """A ValueError naming ``where`` unless ``entry`` is a mapping holding every one of ``keys``."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: a {type(entry).__name__}, not a dict")
    missing = [key for key in keys if key not in entry]
    if missing:
        raise ValueError(f"{where}: no {', '.join(repr(k) for k in missing)} (needs {', '.join(keys)})")


def _as_array(value: Any, dtype, where: str, key: str) -> np.ndarray:
    """``value`` (tensor or array-like) as a numpy array of ``dtype``; a ValueError naming ``where`` and ``key``
    for what is not numbers."""
    try:
        return as_numpy(value, dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} '{key}' is not an array of numbers: {exc}") from None


def box_array(value: Any, where: str) -> np.ndarray:
    """Boxes as float64 ``[K, 4]``: a ValueError naming ``where`` for any other shape (empty ones are ``[0, 4]``)."""
    boxes = _as_array(value, np.float64, where, "boxes")
    if boxes.size == 0:
        return boxes.reshape(0, 4)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"{where} 'boxes' have shape {list(boxes.shape)}, not [K, 4] (xyxy)")
    return boxes


def flat_array(value: Any, dtype, where: str, key: str) -> np.ndarray:
    """Scores or labels as a flat array of ``dtype``; ``[K, 1]`` is taken as ``[K]``, as before these checks."""
    return _as_array(value, dtype, where, key).reshape(-1)


def _first_not_finite(values: np.ndarray) -> Optional[int]:
    """The index of the first row (or entry) of ``values`` holding NaN or infinity, None when all are finite."""
    if values.size == 0:
        return None
    bad = ~np.isfinite(values.reshape(len(values), -1)).all(1)
    return int(np.argmax(bad)) if bad.any() else None


def _not_finite_message(boxes: np.ndarray, scores: Optional[np.ndarray], where: str) -> Optional[str]:
    """What is NaN or infinite among ``boxes`` (then ``scores``), for a message about ``where``; None when nothing."""
    i = _first_not_finite(boxes)
    if i is not None:
        return f"{where} box {i} is not finite: {boxes[i].tolist()}"
    i = _first_not_finite(scores) if scores is not None else None
    if i is not None:
        return f"{where} score {i} is not finite: {scores[i]}"
    return None


def check_finite_detections(batch: Sequence[Tuple[ImageId, int, np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """A ValueError naming the first image whose detection boxes or scores hold NaN or infinity (COCOeval would
    score such boxes as perfect matches). One ``isfinite`` over the whole batch; the search only when it fails."""
    if not batch:
        return
    values = np.concatenate([np.concatenate((boxes, scores[:, None]), 1) for _, _, boxes, scores, _ in batch])
    if np.isfinite(values).all():
        return
    for image_id, _, boxes, scores, _ in batch:
        message = _not_finite_message(boxes, scores, f"image {image_id!r}: detection")
        if message:
            raise ValueError(message)


def checked_ground_truth(entry: Any, position: int, num_classes: int) -> Dict[str, Any]:
    """One image's ground truth checked, its ``boxes`` as float64 ``[K, 4]`` and ``labels`` as int64 ``[K]``; a
    ValueError naming the image (id and file name, or its position) and the key for anything else."""
    require_keys(entry, ("image_id",), f"ground-truth entry {position}")
    where = f"image {entry['image_id']} ({entry.get('file_name', '?')})"
    require_keys(entry, ("image_id", "height", "width", "boxes", "labels"), where)
    boxes = box_array(entry["boxes"], f"{where}: ground-truth")
    labels = flat_array(entry["labels"], np.int64, f"{where}: ground-truth", "labels")
    if len(boxes) != len(labels):
        raise ValueError(f"{where}: ground truth holds {len(boxes)} boxes and {len(labels)} labels")
    bad = labels[(labels < 0) | (labels >= num_classes)]
    if bad.size:
        raise ValueError(f"{where}: class {int(bad[0])} outside 0..{num_classes - 1} ({num_classes} names)")
    message = _not_finite_message(boxes, None, f"{where}: ground-truth")
    if message:
        raise ValueError(message)
    return {**entry, "boxes": boxes, "labels": labels}


__all__ = ["box_array", "check_finite_detections", "checked_ground_truth", "flat_array", "require_keys"]
