"""Image + box augmentation: two pipelines, chosen by the ``pipeline`` setting.

* ``"darknet"`` (what a cfg selects, :func:`augment_from_cfg`): Darknet's own detector augmentation,
  formula for formula (:mod:`yolo.data.darknet_augment`): integer crop jitter with ``resize`` zoom and
  ``letter_box``, a stretch to the network size, flip, HSV distortion, at most ``max_boxes`` truths.
* ``"darknet_opencv"``: Darknet's OpenCV build (:mod:`yolo.data.darknet_opencv_augment`), what Darknet users
  train with: OpenCV crop / resize / HSV, ``mosaic`` (with ``mosaic_bound``), ``mixup``, ``blur``,
  ``gaussian_noise``. A cfg selects it when it sets ``mosaic``, ``cutmix``, ``blur`` or ``gaussian_noise``,
  which the build without OpenCV refuses or lacks; ``augment: {pipeline: darknet_opencv}`` selects it always.
* ``"affine"`` (this framework's own, the default of :func:`augment_config` without a cfg; opt in from a
  cfg with ``augment: {pipeline: affine}`` in ``--hyp``): letterboxed crop jitter, random zoom / shift /
  rotation, OpenCV HSV, flip and a 4-image mosaic. It is not Darknet's: its geometry keeps the aspect ratio,
  it can rotate, and its mosaic differs from Darknet's (OpenCV-build) mosaic.

Images are ``uint8`` ``H x W x 3`` RGB numpy arrays; boxes are ``Float32[N, 4]`` xyxy in
continuous pixel coordinates (pixel ``i`` spans ``[i, i + 1)``); labels ``Int64[N]``.

Every geometric step is one 3x3 matrix acting on continuous pixel coordinates; the steps are
multiplied together and the image is warped once, so images and boxes move together exactly.
Randomness comes only from the ``numpy.random.Generator`` passed in, so a sample is a pure
function of (seed, epoch, index): see :func:`item_rng`.

The hyperparameters (their names, defaults and checks) are in :mod:`yolo.data.augment_hyp`.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

import cv2
import numpy as np

from yolo.ops.letterbox import (LETTERBOX_FILL, LETTERBOX_FILL_UINT8, LetterboxInfo, fit_image_darknet, letterbox,
                                letterbox_params, stretch)
from yolo.data.darknet_augment import FINISHED_IMAGES, darknet_item
from yolo.data.darknet_batched import PENDING_IMAGES
from yolo.data.darknet_opencv_augment import darknet_opencv_item
# The hyperparameters are also imported from here (where they were before their own module).
from yolo.data.augment_hyp import DEFAULT_AUGMENT, NO_AUGMENT, PIPELINES, augment_config, augment_from_cfg

__all__ = ["DEFAULT_AUGMENT", "NO_AUGMENT", "PIPELINES", "Sample", "augment_config", "augment_from_cfg",
           "augment_hsv", "box_areas", "clip_and_filter", "hflip", "item_rng", "jitter_crop_matrix",
           "letterbox_matrix", "matrix_to_letterbox", "mosaic_tile", "random_affine_matrix",
           "random_factor_or_inverse", "reduced_size", "resize_sample", "resized_boxes", "train_transform",
           "transform_boxes", "warp_image"]

Sample = Tuple[np.ndarray, np.ndarray, np.ndarray]  # image HxWx3 uint8, boxes Float32[N,4] xyxy, labels Int64[N]


def item_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator for one sample: the same (seed, epoch, index) gives the same augmentation,
    whichever worker loads it."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(epoch), int(index)])


# ------------------------------------------------------------------------------ matrices
def _translation(tx: float, ty: float) -> np.ndarray:
    return np.array([[1.0, 0.0, tx], [0.0, 1.0, ty], [0.0, 0.0, 1.0]])


def _scaling(sx: float, sy: float) -> np.ndarray:
    return np.diag([sx, sy, 1.0])


def _rotation(degrees: float) -> np.ndarray:
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def letterbox_matrix(in_hw: Tuple[int, int], out_hw: Tuple[int, int]) -> np.ndarray:
    """3x3 matrix of Darknet's letterbox placement (geometry from :func:`yolo.ops.letterbox.letterbox_params`)."""
    (rh, rw), (pad_x, pad_y) = letterbox_params(in_hw, out_hw)
    return _translation(pad_x, pad_y) @ _scaling(rw / in_hw[1], rh / in_hw[0])


def random_factor_or_inverse(rng: np.random.Generator, s: float) -> float:
    """A factor uniform in ``[1, s]`` (float64), inverted half of the time; 1 without a draw when ``s <= 1``.

    The range of Darknet's ``rand_scale(s)`` for ``s >= 1``, not its exact draws (Darknet computes in C floats,
    flips its coin with ``random_gen() % 2`` and draws even when ``s == 1``): the ``darknet`` pipeline uses
    :func:`yolo.data.darknet_random.draw_rand_scale` for those.
    """
    if s <= 1.0:
        return 1.0
    factor = rng.uniform(1.0, s)
    return factor if rng.random() < 0.5 else 1.0 / factor


def random_affine_matrix(rng: np.random.Generator, out_hw: Tuple[int, int], hyp: Mapping[str, float],
                         center: Optional[Tuple[float, float]] = None) -> np.ndarray:
    """Random rotation / zoom around ``center`` (default: the output center) and a random shift.

    Returns a 3x3 matrix acting on output-space pixel coordinates (apply after placement).
    """
    h, w = out_hw
    cx, cy = center if center is not None else (w / 2.0, h / 2.0)
    s = rng.uniform(1.0 - hyp["scale"], 1.0 + hyp["scale"]) if hyp["scale"] > 0 else 1.0
    angle = rng.uniform(-hyp["degrees"], hyp["degrees"]) if hyp["degrees"] > 0 else 0.0
    t = hyp["translate"]
    tx, ty = (rng.uniform(-t, t) * w, rng.uniform(-t, t) * h) if t > 0 else (0.0, 0.0)
    return _translation(w / 2.0 + tx, h / 2.0 + ty) @ _rotation(angle) @ _scaling(s, s) @ _translation(-cx, -cy)


def jitter_crop_matrix(rng: np.random.Generator, in_hw: Tuple[int, int], out_hw: Tuple[int, int],
                       jitter: float) -> np.ndarray:
    """Darknet crop jitter: move each side of the crop by ``U(-jitter, jitter)`` times the image side
    (outward moves pad with the fill color), then letterbox the crop into ``out_hw``."""
    h, w = in_hw
    if jitter <= 0:
        return letterbox_matrix(in_hw, out_hw)
    dw, dh = jitter * w, jitter * h
    left, right = rng.uniform(-dw, dw), rng.uniform(-dw, dw)
    top, bottom = rng.uniform(-dh, dh), rng.uniform(-dh, dh)
    crop_w, crop_h = max(w - left - right, 1.0), max(h - top - bottom, 1.0)
    crop_hw = (max(int(round(crop_h)), 1), max(int(round(crop_w)), 1))
    place = letterbox_matrix(crop_hw, out_hw)
    # Stretch the exact float crop onto the integer crop size that the letterbox geometry used.
    fit = _scaling(crop_hw[1] / crop_w, crop_hw[0] / crop_h)
    return place @ fit @ _translation(-left, -top)


# ------------------------------------------------------------------------------ apply
def warp_image(image: np.ndarray, matrix: np.ndarray, out_hw: Tuple[int, int], fill: float) -> np.ndarray:
    """Warp with a 3x3 matrix on continuous pixel coordinates (pixel centers at ``i + 0.5``).

    Strong downscales are first done with ``INTER_AREA`` so that the warp does not alias.
    """
    h_out, w_out = out_hw
    zoom = math.sqrt(abs(np.linalg.det(matrix[:2, :2])))
    if zoom < 0.5:
        h, w = image.shape[:2]
        new_w, new_h = max(int(round(w * zoom * 2)), 1), max(int(round(h * zoom * 2)), 1)
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_AREA)
        matrix = matrix @ _scaling(w / new_w, h / new_h)
    # OpenCV addresses pixel centers by integer index: index = continuous - 0.5.
    index_matrix = _translation(-0.5, -0.5) @ matrix @ _translation(0.5, 0.5)
    border = (int(round(fill)),) * 3
    return cv2.warpAffine(image, index_matrix[:2], (w_out, h_out), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=border)


def transform_boxes(boxes: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """xyxy ``Float32[N, 4]`` -> the xyxy box enclosing the four transformed corners."""
    if len(boxes) == 0:
        return boxes.reshape(0, 4).astype(np.float32)
    x1, y1, x2, y2 = boxes.T
    corners = np.stack([np.stack([x1, y1], 1), np.stack([x2, y1], 1),
                        np.stack([x1, y2], 1), np.stack([x2, y2], 1)], 1)  # N, 4, 2
    moved = corners @ matrix[:2, :2].T + matrix[:2, 2]
    return np.concatenate([moved.min(1), moved.max(1)], 1).astype(np.float32)


def clip_and_filter(boxes: np.ndarray, labels: np.ndarray, reference_area: np.ndarray,
                    region: Tuple[float, float, float, float], hyp: Mapping[str, float]
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clip xyxy boxes to ``region = (x1, y1, x2, y2)``; drop boxes that are too small or mostly cut.

    Returns ``(boxes, labels, keep)`` with ``keep`` the boolean mask used.
    """
    x1, y1, x2, y2 = region
    clipped = boxes.copy()
    clipped[:, 0::2] = clipped[:, 0::2].clip(x1, x2)
    clipped[:, 1::2] = clipped[:, 1::2].clip(y1, y2)
    w, h = clipped[:, 2] - clipped[:, 0], clipped[:, 3] - clipped[:, 1]
    visible = w * h / np.maximum(reference_area, 1e-9)
    keep = (w >= hyp["min_side"]) & (h >= hyp["min_side"]) & (visible >= hyp["min_visible"])
    return clipped[keep], labels[keep], keep


def box_areas(boxes: np.ndarray) -> np.ndarray:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def augment_hsv(image: np.ndarray, rng: np.random.Generator, hue: float, saturation: float,
                exposure: float) -> np.ndarray:
    """Darknet's color jitter on an RGB ``uint8`` image: hue shift, saturation and value factors."""
    dhue = rng.uniform(-hue, hue) if hue > 0 else 0.0
    dsat = random_factor_or_inverse(rng, saturation)
    dexp = random_factor_or_inverse(rng, exposure)
    if dhue == 0.0 and dsat == 1.0 and dexp == 1.0:
        return image
    h, s, v = cv2.split(cv2.cvtColor(image, cv2.COLOR_RGB2HSV))
    x = np.arange(256, dtype=np.float32)
    lut_h = np.mod(x + dhue * 180.0, 180.0).astype(np.uint8)  # OpenCV hue is 0..179
    lut_s = np.clip(x * dsat, 0, 255).astype(np.uint8)
    lut_v = np.clip(x * dexp, 0, 255).astype(np.uint8)
    hsv = cv2.merge((cv2.LUT(h, lut_h), cv2.LUT(s, lut_s), cv2.LUT(v, lut_v)))
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)


def hflip(image: np.ndarray, boxes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Mirror left-right: x -> width - x."""
    w = image.shape[1]
    flipped = boxes.copy()
    flipped[:, 0], flipped[:, 2] = w - boxes[:, 2], w - boxes[:, 0]
    return np.ascontiguousarray(image[:, ::-1]), flipped


def resize_sample(image: np.ndarray, boxes: np.ndarray, out_hw: Tuple[int, int], fill: float = LETTERBOX_FILL_UINT8,
                  mode: str = "letterbox", resample: str = "opencv"
                  ) -> Tuple[np.ndarray, np.ndarray, LetterboxInfo]:
    """Deterministic resize of an RGB ``uint8`` image for evaluation, boxes (xyxy pixels) mapped along: ``mode``
    ``"letterbox"`` (Darknet's ``letterbox_image``, borders ``fill``) or ``"stretch"`` (Darknet's
    ``resize_image``).

    ``resample="opencv"``: ``cv2.resize`` on ``uint8`` (:func:`yolo.ops.letterbox.letterbox`,
    :func:`yolo.ops.letterbox.stretch`), a ``uint8`` image. ``resample="darknet"``: Darknet's float resize
    (:func:`yolo.ops.letterbox.fit_image_darknet`), a ``Float32`` RGB 0..1 image, the border ``fill / 255``
    (exactly Darknet's 0.5 for the default gray 128)."""
    if resample == "darknet":
        gray = LETTERBOX_FILL if int(round(fill)) == LETTERBOX_FILL_UINT8 else float(fill) / 255.0
        out, info = fit_image_darknet(image, out_hw, mode, bgr=False, fill=gray)
    elif resample != "opencv":
        raise ValueError(f"unknown resampler {resample!r}: use 'darknet' or 'opencv'")
    elif mode == "letterbox":
        out, info = letterbox(image, out_hw, fill=int(round(fill)))
    elif mode == "stretch":
        out, info = stretch(image, out_hw)
    else:
        raise ValueError(f"unknown resize mode {mode!r}: use 'letterbox' or 'stretch'")
    scale = np.array([info.scale_x, info.scale_y, info.scale_x, info.scale_y], np.float32)
    pad = np.array([info.pad_x, info.pad_y, info.pad_x, info.pad_y], np.float32)
    return out, (boxes * scale + pad).astype(np.float32), info


def matrix_to_letterbox(matrix: np.ndarray) -> Optional[LetterboxInfo]:
    """A 3x3 placement matrix as :class:`LetterboxInfo` when it is a per-axis positive scale + shift."""
    if abs(matrix[0, 1]) > 1e-9 or abs(matrix[1, 0]) > 1e-9 or matrix[0, 0] <= 0 or matrix[1, 1] <= 0:
        return None
    return LetterboxInfo(scale_x=float(matrix[0, 0]), scale_y=float(matrix[1, 1]),
                         pad_x=float(matrix[0, 2]), pad_y=float(matrix[1, 2]))


def _single(sample: Sample, rng: np.random.Generator, out_hw: Tuple[int, int], hyp: Mapping[str, float]
            ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    image, boxes, labels = sample
    place = jitter_crop_matrix(rng, image.shape[:2], out_hw, hyp["jitter"])
    matrix = random_affine_matrix(rng, out_hw, hyp) @ place
    out = warp_image(image, matrix, out_hw, hyp["fill"])
    moved = transform_boxes(boxes, matrix)
    reference = box_areas(boxes) * abs(np.linalg.det(matrix[:2, :2]))
    h, w = out_hw
    boxes, labels, _ = clip_and_filter(moved, labels, reference, (0.0, 0.0, float(w), float(h)), hyp)
    return out, boxes, labels, matrix


def mosaic_tile(image: np.ndarray, out_hw: Tuple[int, int]) -> np.ndarray:
    """``image`` as a mosaic tile: resized to its letterbox size within ``out_hw`` (``INTER_AREA`` to reduce)."""
    (rh, rw), _ = letterbox_params(image.shape[:2], out_hw)
    return cv2.resize(image, (rw, rh), interpolation=cv2.INTER_AREA if rw < image.shape[1] else cv2.INTER_LINEAR)


def resized_boxes(boxes: np.ndarray, from_hw: Tuple[int, int], to_hw: Tuple[int, int]) -> np.ndarray:
    """Float32[N, 4] xyxy boxes of a ``from_hw`` image in the pixels of that image resized to ``to_hw``."""
    scale = np.array([to_hw[1] / from_hw[1], to_hw[0] / from_hw[0]] * 2, np.float32)
    return boxes * scale


def reduced_size(hyp: Mapping[str, Any], image_hw: Tuple[int, int], out_hw: Optional[Tuple[int, int]]
                 ) -> Tuple[int, int]:
    """The size an image can be kept at (``cache_images``) without changing the training items made from it at
    ``out_hw`` (None: at several sizes): its mosaic tile's (:func:`mosaic_tile`) where every item of the affine
    pipeline is a mosaic and the tile is smaller, since the tile of that tile is itself (an OpenCV resize to the
    same size copies); its own size otherwise, as every other path (the Darknet pipelines' crops, the affine
    single-image warp) starts from the original."""
    if out_hw is None or hyp["pipeline"] != "affine" or hyp["mosaic"] < 1:
        return tuple(image_hw)
    (rh, rw), _ = letterbox_params(image_hw, out_hw)
    return (rh, rw) if 0 < rh and 0 < rw < image_hw[1] else tuple(image_hw)


def _mosaic(samples: Sequence[Sample], rng: np.random.Generator, out_hw: Tuple[int, int],
            hyp: Mapping[str, float]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four images around a random center of a ``2H x 2W`` canvas, then a random affine back to ``H x W``."""
    h, w = out_hw
    fill = int(round(hyp["fill"]))
    canvas = np.full((2 * h, 2 * w, 3), fill, np.uint8)
    xc, yc = int(rng.uniform(0.5 * w, 1.5 * w)), int(rng.uniform(0.5 * h, 1.5 * h))
    all_boxes, all_labels, all_ref = [], [], []
    for k, (image, boxes, labels) in enumerate(samples):
        tile = mosaic_tile(image, out_hw)
        rh, rw = tile.shape[:2]
        x0 = xc - rw if k in (0, 2) else xc  # tile's top-left corner on the canvas
        y0 = yc - rh if k in (0, 1) else yc
        cx1, cy1 = max(x0, 0), max(y0, 0)
        cx2, cy2 = min(x0 + rw, 2 * w), min(y0 + rh, 2 * h)
        if cx2 <= cx1 or cy2 <= cy1:
            continue
        canvas[cy1:cy2, cx1:cx2] = tile[cy1 - y0:cy2 - y0, cx1 - x0:cx2 - x0]
        if len(boxes) == 0:
            continue
        placed = resized_boxes(boxes, image.shape[:2], (rh, rw)) + np.array([x0, y0, x0, y0], np.float32)
        ref = box_areas(placed)
        # Clip to the visible part of the tile; the final filter compares with the full area.
        placed[:, 0::2] = placed[:, 0::2].clip(cx1, cx2)
        placed[:, 1::2] = placed[:, 1::2].clip(cy1, cy2)
        all_boxes.append(placed)
        all_labels.append(labels)
        all_ref.append(ref)
    boxes = np.concatenate(all_boxes) if all_boxes else np.zeros((0, 4), np.float32)
    labels = np.concatenate(all_labels) if all_labels else np.zeros((0,), np.int64)
    ref = np.concatenate(all_ref) if all_ref else np.zeros((0,), np.float32)
    matrix = random_affine_matrix(rng, out_hw, hyp, center=(float(w), float(h)))
    out = warp_image(canvas, matrix, out_hw, hyp["fill"])
    moved = transform_boxes(boxes, matrix)
    ref = ref * abs(np.linalg.det(matrix[:2, :2]))
    boxes, labels, _ = clip_and_filter(moved, labels, ref, (0.0, 0.0, float(w), float(h)), hyp)
    return out, boxes, labels


def train_transform(load: Callable[[int], Sample], index: int, num_items: int, rng: np.random.Generator,
                    out_hw: Tuple[int, int], hyp: Mapping[str, float], pending: bool = False
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """The training pipeline for item ``index``: mosaic or single-image placement, HSV, flip.

    Args:
        load: ``load(i) -> (image RGB uint8 HxWx3, boxes Float32[N,4] xyxy pixels, labels Int64[N])``.
        index: the item to augment; mosaic draws three more items from ``rng``.
        num_items: number of items ``load`` accepts (mosaic partners are drawn from ``range(num_items)``).
        rng: the item's generator (:func:`item_rng`).
        out_hw: network input ``(h, w)``.
        hyp: augmentation hyperparameters (:func:`augment_config`).
        pending: the ``darknet`` pipeline leaves its float image steps for the training device (the image is
            then a :class:`yolo.data.darknet_batched.PendingImage`); the other pipelines ignore it.

    Returns:
        ``(image, boxes, labels, matrix)``: ``out_hw`` RGB image, xyxy boxes in its pixels, labels,
        and the 3x3 original -> input matrix (``None`` for mosaics).
    """
    matrix: Optional[np.ndarray]
    if hyp["pipeline"] == "darknet":
        return darknet_item(load, index, num_items, rng, out_hw, hyp, PENDING_IMAGES if pending else FINISHED_IMAGES)
    if hyp["pipeline"] == "darknet_opencv":
        return darknet_opencv_item(load, index, num_items, rng, out_hw, hyp)
    if hyp["mosaic"] > 0 and rng.random() < hyp["mosaic"]:
        partners = rng.integers(0, num_items, size=3)
        image, boxes, labels = _mosaic([load(index)] + [load(int(i)) for i in partners], rng, out_hw, hyp)
        matrix = None
    else:
        image, boxes, labels, matrix = _single(load(index), rng, out_hw, hyp)
    image = augment_hsv(image, rng, hyp["hue"], hyp["saturation"], hyp["exposure"])
    if hyp["flip"] > 0 and rng.random() < hyp["flip"]:
        image, boxes = hflip(image, boxes)
        if matrix is not None:
            matrix = _translation(float(out_hw[1]), 0.0) @ _scaling(-1.0, 1.0) @ matrix
    return image, boxes.astype(np.float32), labels.astype(np.int64), matrix
