"""COCO's JSON side (evaluation, the detect tool's results.json): category tables and the conversions to COCO's dicts.

Inside the package classes are contiguous indices ``0..C-1`` and boxes are xyxy pixels. COCO's JSON
uses category ids (1..90 with gaps for the 80 COCO classes) and corner ``xywh`` boxes
(``[x_min, y_min, width, height]``); the conversions here are the only place where that happens.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from yolo.ops.boxes import xyxy_to_xywh

__all__ = [
    "COCO_NAMES",
    "COCO91_IDS",
    "ImageId",
    "as_numpy",
    "xyxy_to_coco_xywh",
    "coco_category_ids",
    "coco_image_ids",
    "ground_truth_to_coco",
    "detections_to_coco_results",
]

ImageId = Union[int, str]

# The 80 COCO class names in Darknet's coco.names order, and their official COCO category ids.
COCO_NAMES = (
    "person", "bicycle", "car", "motorbike", "aeroplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "sofa",
    "pottedplant", "bed", "diningtable", "toilet", "tvmonitor", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
    "scissors", "teddy bear", "hair drier", "toothbrush",
)
COCO91_IDS = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32,
    33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
    60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
)
# The same classes as spelled in COCO's own annotation files (Darknet renamed a few).
_COCO_ALIASES = {"motorcycle": "motorbike", "airplane": "aeroplane", "couch": "sofa", "potted plant": "pottedplant",
                 "dining table": "diningtable", "tv": "tvmonitor"}


def coco_category_ids(names: Sequence[str]) -> List[int]:
    """COCO category ids for contiguous classes ``0..C-1``.

    The 80 COCO classes (Darknet or COCO spelling, in order) get the official ids (1..90 with gaps),
    so a results JSON can be scored against COCO's own annotation files; any other dataset gets
    ``1..C``.
    """
    canonical = [_COCO_ALIASES.get(n.strip().lower(), n.strip().lower()) for n in names]
    if tuple(canonical) == COCO_NAMES:
        return list(COCO91_IDS)
    return list(range(1, len(names) + 1))


def coco_image_ids(file_names: Sequence[str]) -> Tuple[List[int], bool]:
    """Integer COCO image ids for images named ``file_names`` (in a stable order) and whether they are an index.

    COCO's ids are integers (pycocotools sorts them and matches results to ``images[].id``) and COCO's own file
    names are the id (``000000000009.jpg`` is image 9): when every file stem is a number and no two are equal,
    those numbers are the ids. Otherwise the ids are ``1..N`` in the given order (``True`` is returned: the
    caller then writes which file each id is)."""
    stems = [Path(name).stem for name in file_names]
    if stems and all(s.isdigit() for s in stems) and len({int(s) for s in stems}) == len(stems):
        return [int(s) for s in stems], False
    return list(range(1, len(stems) + 1)), True


def as_numpy(x: Any, dtype) -> np.ndarray:
    """A tensor (any device) or array-like as a numpy array of ``dtype``."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def xyxy_to_coco_xywh(boxes: Any) -> np.ndarray:
    """``[K, 4]`` xyxy (tensor or array) -> float64 ``[K, 4]`` COCO corner ``xywh`` ``[x_min, y_min, w, h]``."""
    return xyxy_to_xywh(torch.from_numpy(as_numpy(boxes, np.float64).reshape(-1, 4))).numpy()


def ground_truth_to_coco(
    ground_truth: Iterable[Mapping[str, Any]],
    names: Sequence[str],
    category_ids: Optional[Sequence[int]] = None,
) -> Dict[str, Any]:
    """Per-image ground truth -> a COCO-format dataset dict for ``pycocotools.coco.COCO``.

    Args:
        ground_truth: one dict per image: ``image_id`` (int), ``file_name``, ``height``, ``width``,
            ``boxes`` ``Float[K, 4]`` xyxy original pixels, ``labels`` ``Int64[K]`` in ``0..C-1``.
        names: class names, index = contiguous label.
        category_ids: COCO id of each class (default :func:`coco_category_ids`).

    Every image is listed, with or without boxes. Annotation ids start at 1 (COCOeval treats a
    matched id of 0 as "no match"); ``area`` is the box area and ``iscrowd`` is 0.
    """
    category_ids = list(category_ids) if category_ids is not None else coco_category_ids(names)
    if len(category_ids) != len(names):
        raise ValueError(f"{len(category_ids)} category ids for {len(names)} class names")
    images, annotations = [], []
    for gt in ground_truth:
        image_id = gt["image_id"]
        images.append({"id": image_id, "file_name": str(gt.get("file_name", image_id)),
                       "height": int(gt["height"]), "width": int(gt["width"])})
        xywh = xyxy_to_coco_xywh(gt["boxes"])
        labels = as_numpy(gt["labels"], np.int64).reshape(-1)
        for box, label in zip(xywh, labels):
            if not 0 <= label < len(names):
                raise ValueError(f"image {image_id} ({gt.get('file_name', '?')}): class {label} outside "
                                 f"0..{len(names) - 1}")
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": int(category_ids[label]), "bbox": [float(v) for v in box],
                                "area": float(box[2] * box[3]), "iscrowd": 0})
    return {
        "info": {"description": "ground truth converted from per-image boxes"},
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": [{"id": int(cid), "name": str(name), "supercategory": ""}
                       for cid, name in zip(category_ids, names)],
    }


def detections_to_coco_results(
    image_id: ImageId, boxes_xywh: np.ndarray, scores: np.ndarray, labels: np.ndarray, category_ids: Sequence[int]
) -> List[Dict[str, Any]]:
    """One image's detections -> COCO results entries ``{image_id, category_id, bbox [x, y, w, h], score}``.

    ``boxes_xywh`` ``[D, 4]`` are COCO corner ``xywh`` (see :func:`xyxy_to_coco_xywh`), ``labels``
    contiguous ``0..C-1``, mapped through ``category_ids``."""
    categories = np.asarray(category_ids, dtype=np.int64)[as_numpy(labels, np.int64).reshape(-1)].tolist()
    boxes = as_numpy(boxes_xywh, np.float64).reshape(-1, 4).tolist()  # tolist: Python floats, fast
    return [{"image_id": image_id, "category_id": c, "bbox": box, "score": s}
            for box, s, c in zip(boxes, as_numpy(scores, np.float64).reshape(-1).tolist(), categories)]
