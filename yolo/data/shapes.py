"""The built-in "shapes" dataset: colored shapes on textured backgrounds, with exact labels.

Deterministic: image ``i`` of a split is drawn from ``numpy.random.default_rng([seed, split, i])``,
so the same arguments give the same files. Each box is the tight bounding box of the shape's
drawn pixels (shapes never touch, so no box is occluded). Written in the YOLO layout::

    root/images/{train,val}/00000.jpg
    root/labels/{train,val}/00000.txt      class cx cy w h (normalized)
    root/shapes.names                      class names, one per line
    root/shapes.json                       generator parameters and every file written, with its hash

It deletes nothing it did not make (:mod:`yolo.data.shapes_folder`).
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import Dict, List, Tuple, Union

import cv2
import numpy as np

from yolo.data.shapes_folder import (IN_PROGRESS, MARKER, digest, exit_on_termination, marker_params, read_marker,
                                     remove_generated, remove_stale_temp_folders, temp_folder)
from yolo.files.write_errors import check_written, writing

logger = logging.getLogger(__name__)

SHAPE_NAMES = ("circle", "square", "triangle", "cross", "star")
GENERATOR_VERSION = 1
_SPLIT_CODES = {"train": 0, "val": 1}


# ----------------------------------------------------------------------------- drawing
def _background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A low-saturation textured background: smooth blotches, optional stripes, fine grain."""
    base = rng.uniform(60, 190) + rng.uniform(-15, 15, size=3)
    grid = (h // 24 + 2, w // 24 + 2)
    # Mostly brightness blotches with a little color, so shapes stand out by saturation.
    blotch = (rng.normal(0.0, 1.0, size=(*grid, 1)) + 0.3 * rng.normal(0.0, 1.0, size=(*grid, 3))).astype(np.float32)
    blotch = cv2.resize(blotch, (w, h), interpolation=cv2.INTER_CUBIC) * rng.uniform(8, 22)
    image = base.astype(np.float32) + blotch
    if rng.random() < 0.5:
        angle = rng.uniform(0, math.pi)
        period = rng.uniform(6, 30)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        stripes = np.sin((xx * math.cos(angle) + yy * math.sin(angle)) * (2 * math.pi / period))
        image += (stripes * rng.uniform(5, 15))[..., None]
    image += rng.normal(0.0, 4.0, size=(h, w, 1)).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def _shape_color(rng: np.random.Generator) -> Tuple[int, int, int]:
    """A saturated RGB color (backgrounds are grayish, so shapes stand out by color)."""
    hsv = np.array([[[rng.integers(0, 180), rng.integers(170, 256), rng.integers(150, 256)]]], np.uint8)
    r, g, b = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0]
    return int(r), int(g), int(b)


def _polygon(cls: str, radius: float, angle: float) -> np.ndarray:
    """Vertices (float, around the origin) of a polygonal shape of circumradius ``radius``."""
    if cls == "square":
        pts = [(math.cos(angle + math.pi / 4 + k * math.pi / 2), math.sin(angle + math.pi / 4 + k * math.pi / 2))
               for k in range(4)]
    elif cls == "triangle":
        pts = [(math.cos(angle + k * 2 * math.pi / 3), math.sin(angle + k * 2 * math.pi / 3)) for k in range(3)]
    elif cls == "star":
        pts = []
        for k in range(10):
            r = 1.0 if k % 2 == 0 else 0.45
            a = angle + k * math.pi / 5
            pts.append((r * math.cos(a), r * math.sin(a)))
    elif cls == "cross":
        t = 0.33  # half arm thickness, relative
        base = [(t, 1), (-t, 1), (-t, t), (-1, t), (-1, -t), (-t, -t), (-t, -1), (t, -1), (t, -t), (1, -t),
                (1, t), (t, t)]
        c, s = math.cos(angle), math.sin(angle)
        pts = [(x * c - y * s, x * s + y * c) for x, y in (np.array(base) / math.hypot(1, t))]
    else:
        raise ValueError(f"unknown shape {cls!r}")
    return np.asarray(pts, np.float64) * radius


def _draw_mask(cls: str, h: int, w: int, cx: float, cy: float, radius: float, angle: float) -> np.ndarray:
    mask = np.zeros((h, w), np.uint8)
    if cls == "circle":
        cv2.circle(mask, (int(round(cx)), int(round(cy))), int(round(radius)), 255, thickness=-1)
    else:
        pts = _polygon(cls, radius, angle) + (cx, cy)
        cv2.fillPoly(mask, [np.round(pts).astype(np.int32)], 255)
    return mask


def render_sample(rng: np.random.Generator, size_range: Tuple[int, int] = (256, 416), max_shapes: int = 4,
                  texture: bool = True) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw one image.

    Returns:
        ``(image RGB uint8 HxWx3, boxes Float32[N,4] xyxy continuous pixels, labels Int64[N])``;
        each box is the tight box around the shape's pixels (``x2 = last column + 1``).
    """
    h, w = (int(v) for v in rng.integers(size_range[0], size_range[1] + 1, size=2))
    image = _background(rng, h, w) if texture else np.full((h, w, 3), 128, np.uint8)
    count = int(rng.integers(1, max_shapes + 1))
    taken: List[Tuple[int, int, int, int]] = []
    boxes, labels = [], []
    short = min(h, w)
    for _ in range(count):
        for _attempt in range(30):
            cls_index = int(rng.integers(0, len(SHAPE_NAMES)))
            radius = rng.uniform(0.08, 0.2) * short
            cx, cy = rng.uniform(radius + 2, w - radius - 2), rng.uniform(radius + 2, h - radius - 2)
            angle = rng.uniform(-math.pi, math.pi)
            if SHAPE_NAMES[cls_index] in ("square", "cross"):
                angle = rng.uniform(-math.pi / 9, math.pi / 9)  # keep squares from reading as diamonds
            mask = _draw_mask(SHAPE_NAMES[cls_index], h, w, cx, cy, radius, angle)
            ys, xs = np.nonzero(mask)
            if len(xs) == 0:
                continue
            box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
            gap = 4  # shapes never touch: every label stays exact
            if any(box[0] < t[2] + gap and t[0] < box[2] + gap and box[1] < t[3] + gap and t[1] < box[3] + gap
                   for t in taken):
                continue
            image[mask > 0] = _shape_color(rng)
            taken.append(box)
            boxes.append(box)
            labels.append(cls_index)
            break
    return (image, np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(labels, np.int64))


# ----------------------------------------------------------------------------- writing
def _params(num_train: int, num_val: int, seed: int, size_range: Tuple[int, int], max_shapes: int) -> dict:
    return {"version": GENERATOR_VERSION, "num_train": int(num_train), "num_val": int(num_val), "seed": int(seed),
            "size_range": [int(size_range[0]), int(size_range[1])], "max_shapes": int(max_shapes),
            "names": list(SHAPE_NAMES)}


def write_shapes_split(root: Path, split: str, count: int, seed: int, size_range: Tuple[int, int], max_shapes: int,
                files: Dict[str, str]) -> int:
    """Write ``count`` images and label files of ``split`` under ``root``; returns the box count. Each file is
    added to ``files`` (its path under ``root``: the hash of its bytes)."""
    image_dir, label_dir = root / "images" / split, root / "labels" / split
    image_dir.mkdir(parents=True, exist_ok=True)
    label_dir.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(count):
        rng = np.random.default_rng([int(seed), _SPLIT_CODES[split], i])
        image, boxes, labels = render_sample(rng, size_range, max_shapes)
        h, w = image.shape[:2]
        image_path = image_dir / f"{i:05d}.jpg"
        ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 95])
        check_written(ok, image_path)
        lines = []
        for (x1, y1, x2, y2), c in zip(boxes, labels):
            lines.append(f"{c} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} {(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}")
        label = ("\n".join(lines) + "\n").encode("utf-8")
        for path, data in ((image_path, jpeg.tobytes()), (label_dir / f"{i:05d}.txt", label)):
            with writing(path):
                path.write_bytes(data)
            files[path.relative_to(root).as_posix()] = digest(data)
        total += len(labels)
    return total


def ensure_shapes_dataset(root: Union[str, os.PathLike], num_train: int = 400, num_val: int = 80, seed: int = 0,
                          size_range: Tuple[int, int] = (256, 416), max_shapes: int = 4, force: bool = False) -> Path:
    """Generate the shapes dataset at ``root`` unless it is already there with the same parameters.

    Writes into a temporary sibling folder and renames it into place, so an interrupted run or
    a second process never sees half a dataset. A folder at ``root`` holding anything this generator did not
    write (or wrote and was changed since) is never touched: a :class:`yolo.errors.DataError`.

    Returns:
        ``root`` as a resolved path.
    """
    root = Path(root).expanduser().resolve()
    params = _params(num_train, num_val, seed, tuple(size_range), max_shapes)
    remove_stale_temp_folders(root)
    if root.exists():
        existing = read_marker(root)
        if marker_params(existing) == params and not force:
            return root
        if existing is not None and any(root.iterdir()):
            logger.info("shapes dataset at %s has other parameters; regenerating", root)
        remove_generated(root, existing)  # refuses (DataError) when anything there is not the generator's
    logger.info("generating the shapes dataset (%d train, %d val images) at %s", num_train, num_val, root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_folder(root)
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        with exit_on_termination():  # SIGTERM: the finally below removes the half-drawn folder
            tmp.mkdir()
            (tmp / IN_PROGRESS).write_text(f"{os.getpid()}\n", encoding="utf-8")
            files: Dict[str, str] = {}
            boxes = write_shapes_split(tmp, "train", num_train, seed, tuple(size_range), max_shapes, files)
            boxes += write_shapes_split(tmp, "val", num_val, seed, tuple(size_range), max_shapes, files)
            names = ("\n".join(SHAPE_NAMES) + "\n").encode("utf-8")
            (tmp / "shapes.names").write_bytes(names)
            files["shapes.names"] = digest(names)
            (tmp / MARKER).write_text(json.dumps({**params, "files": files}, indent=0) + "\n", encoding="utf-8")
            (tmp / IN_PROGRESS).unlink()
            try:
                os.rename(tmp, root)
            except OSError:
                if marker_params(read_marker(root)) != params:  # not another process finishing the same job
                    raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("shapes dataset ready: %s (%d boxes)", root, boxes)
    return root
