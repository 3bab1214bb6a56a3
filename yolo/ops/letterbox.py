"""Fitting an image to the network input, the one path for detection, evaluation and the data pipeline.

Two modes, as Darknet: ``letterbox`` (``letterbox_image``: keep the aspect ratio, centre, fill the border
with gray 0.5) and ``stretch`` (``resize_image``: resize to the input size, as OpenCV's ``blobFromImage``).
Two resamplers (:data:`RESAMPLERS`): ``darknet``, Darknet's own float resize (:mod:`yolo.ops.darknet_resize`,
what ``detector test`` and ``detector map`` feed the network; :func:`fit_image_darknet`), and ``opencv``,
``cv2.resize`` bilinear on ``uint8`` (as OpenCV DNN's ``blobFromImage``; :func:`fit_image`, also the data
pipeline's). Both place the image as :func:`placement` says and record it as a :class:`LetterboxInfo`, which
maps boxes back exactly.

The border: Darknet fills 0.5 on its 0..1 float images. A float canvas gets exactly 0.5
(:func:`yolo.inference.preprocess.preprocess`, the Detector's input). A ``uint8`` image cannot hold
0.5 * 255 = 127.5, so on ``uint8`` the gray is :data:`LETTERBOX_FILL_UINT8` = 128, i.e. 0.50196 after the
division by 255 (1/510 off).

Images are ``numpy`` ``H x W x C`` arrays (BGR as read by OpenCV unless said otherwise); shapes are
``(height, width)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple, Union

import cv2
import numpy as np
import torch

from yolo.ops.boxes import clip_boxes
from yolo.ops.darknet_resize import darknet_resize_image
from yolo.ops.sizes import ImageSize

__all__ = [
    "RESAMPLERS",
    "LETTERBOX_FILL",
    "LETTERBOX_FILL_UINT8",
    "RESIZE_MODES",
    "LetterboxInfo",
    "letterbox_params",
    "placement",
    "fit_image",
    "fit_image_darknet",
    "letterbox",
    "stretch",
    "resize_image",
]

RESIZE_MODES = ("letterbox", "stretch")
# How the image is resampled to the input: Darknet's float resize_image, or OpenCV's uint8 INTER_LINEAR.
RESAMPLERS = ("darknet", "opencv")

# Darknet's letterbox border (src/image.c letterbox_image: fill_image(boxed, .5)) on 0..1 data.
LETTERBOX_FILL = 0.5
# The same gray on 0..255 ``uint8``, where 0.5 * 255 = 127.5 does not exist: rounded half up to 128.
# (Darknet's network only ever sees its float 0.5; the uint8 border is ours, for uint8 data pipelines.)
LETTERBOX_FILL_UINT8 = int(LETTERBOX_FILL * 255 + 0.5)


@dataclass(frozen=True)
class LetterboxInfo:
    """How an original image was placed into the network input.

    A point ``x`` of the original image lands at ``x * scale_x + pad_x`` in the network input
    (likewise for y). ``scale_x = resized_w / original_w``, so this holds for letterbox (equal-ish
    scales, non-zero pad) and stretch (independent scales, zero pad) alike.

    Attributes:
        scale_x, scale_y: resized size over original size, per axis.
        pad_x, pad_y: left / top offset (input pixels) of the resized image in the input.
    """

    scale_x: float
    scale_y: float
    pad_x: float = 0.0
    pad_y: float = 0.0

    def to_original(self, boxes: torch.Tensor, original_shape_hw: ImageSize, clip: bool = True) -> torch.Tensor:
        """Input-pixel xyxy ``Float[..., 4]`` -> original-image pixels: ``x_orig = (x_in - pad_x) / scale_x``;
        with ``clip`` clipped to ``original_shape_hw = (h, w)``."""
        pad = boxes.new_tensor([self.pad_x, self.pad_y, self.pad_x, self.pad_y])
        scale = boxes.new_tensor([self.scale_x, self.scale_y, self.scale_x, self.scale_y])
        out = (boxes - pad) / scale
        return clip_boxes(out, original_shape_hw) if clip else out

    def to_input(self, boxes: torch.Tensor) -> torch.Tensor:
        """Original-image xyxy ``Float[..., 4]`` -> network-input pixels (the inverse map)."""
        scale = boxes.new_tensor([self.scale_x, self.scale_y, self.scale_x, self.scale_y])
        pad = boxes.new_tensor([self.pad_x, self.pad_y, self.pad_x, self.pad_y])
        return boxes * scale + pad


def letterbox_params(original_shape_hw: ImageSize, new_shape: ImageSize) -> Tuple[ImageSize, Tuple[int, int]]:
    """Darknet's ``letterbox_image`` geometry.

    Returns ``((new_h, new_w), (pad_x, pad_y))``: the integer size of the resized image and the
    integer left/top offset at which it is placed. Darknet's integer arithmetic is followed exactly:
    if ``w_net / w < h_net / h`` then ``new_w = w_net, new_h = (h * w_net) // w``, otherwise
    ``new_h = h_net, new_w = (w * h_net) // h``; the image goes at
    ``((w_net - new_w) // 2, (h_net - new_h) // 2)``.
    """
    h, w = original_shape_hw
    net_h, net_w = new_shape
    if h <= 0 or w <= 0:
        raise ValueError(f"cannot letterbox an image of shape {(h, w)}")
    # Darknet compares float ratios: (float)w_net / w < (float)h_net / h.
    if net_w / w < net_h / h:
        new_w, new_h = net_w, (h * net_w) // w
    else:
        new_h, new_w = net_h, (w * net_h) // h
    new_w, new_h = max(new_w, 1), max(new_h, 1)
    return (new_h, new_w), ((net_w - new_w) // 2, (net_h - new_h) // 2)


def placement(shape_hw: ImageSize, new_shape: ImageSize,
              mode: str = "letterbox") -> Tuple[ImageSize, Tuple[int, int], LetterboxInfo]:
    """Where ``mode`` puts an image of ``shape_hw`` in an input of ``new_shape`` (both ``(h, w)``):
    ``((rh, rw), (pad_x, pad_y), info)``, the resized size, its integer top-left offset and the
    :class:`LetterboxInfo`."""
    h, w = shape_hw
    if mode == "letterbox":
        (rh, rw), (pad_x, pad_y) = letterbox_params((h, w), new_shape)
    elif mode == "stretch":
        (rh, rw), (pad_x, pad_y) = tuple(new_shape), (0, 0)
    else:
        raise ValueError(f"unknown resize mode {mode!r}: use 'letterbox' or 'stretch'")
    info = LetterboxInfo(scale_x=rw / w, scale_y=rh / h, pad_x=float(pad_x), pad_y=float(pad_y))
    return (rh, rw), (pad_x, pad_y), info


def fit_image(image: np.ndarray, new_shape: ImageSize, mode: str = "letterbox",
              interpolation: int = cv2.INTER_LINEAR) -> Tuple[np.ndarray, LetterboxInfo]:
    """Resize ``image`` (``H x W x C``, any dtype and channel order) with ``cv2.resize`` as ``mode`` places it
    in the input (the ``opencv`` resampler).

    Returns ``(resized, info)``: ``resized`` is the image content only (``new_h x new_w x C``; no border),
    to be put at ``(info.pad_x, info.pad_y)`` of the ``new_shape`` input; the image itself when the size
    does not change.
    """
    (rh, rw), _, info = placement(image.shape[:2], new_shape, mode)
    resized = image if (rh, rw) == image.shape[:2] else cv2.resize(image, (rw, rh), interpolation=interpolation)
    return resized, info


def fit_image_darknet(image: np.ndarray, new_shape: ImageSize, mode: str = "letterbox", bgr: bool = True,
                      fill: float = LETTERBOX_FILL) -> Tuple[np.ndarray, LetterboxInfo]:
    """Darknet's ``resize_image`` (``stretch``) or ``letterbox_image`` (``letterbox``) of a ``uint8``
    ``H x W x 3`` image (BGR, or RGB with ``bgr=False``): the ``darknet`` resampler.

    Returns ``(out, info)``: ``out`` is the ``Float32`` RGB 0..1 input ``new_h x new_w x 3``, Darknet's floats
    (:func:`yolo.ops.darknet_resize.darknet_resize_image`) on a border of ``fill`` (Darknet's 0.5).
    """
    (rh, rw), (px, py), info = placement(image.shape[:2], new_shape, mode)
    out = torch.full((*new_shape, 3), float(fill), dtype=torch.float32) if (rh, rw) != tuple(new_shape) \
        else torch.empty((*new_shape, 3), dtype=torch.float32)
    darknet_resize_image(image, (rh, rw), bgr=bgr, out=out[py:py + rh, px:px + rw])
    return out.numpy(), info


def _darknet_gray(dtype: np.dtype) -> float:
    """Darknet's border gray in the units of ``dtype``: 0.5 on floats (0..1), 128 on integers (0..255)."""
    return LETTERBOX_FILL if np.issubdtype(dtype, np.floating) else LETTERBOX_FILL_UINT8


def letterbox(
    image: np.ndarray,
    new_shape: ImageSize,
    fill: Union[None, float, Tuple[float, ...]] = None,
    interpolation: int = cv2.INTER_LINEAR,
) -> Tuple[np.ndarray, LetterboxInfo]:
    """Resize keeping the aspect ratio and pad to ``new_shape`` as Darknet's ``letterbox_image``.

    Args:
        image: ``uint8`` (or float) ``H x W x C`` array, any channel order.
        new_shape: network input ``(h, w)``.
        fill: border value in the image's units; default Darknet's gray (0.5 on float images, 128 on
            ``uint8``, see the module docstring).
        interpolation: OpenCV interpolation flag for the resize.

    Returns:
        ``(out, info)``: ``out`` is ``new_h x new_w x C`` of the input dtype; ``info`` maps boxes back.
    """
    net_h, net_w = new_shape
    resized, info = fit_image(image, (net_h, net_w), "letterbox", interpolation)
    if resized.ndim == 2:
        resized = resized[:, :, None]
    out = np.empty((net_h, net_w, resized.shape[2]), dtype=image.dtype)
    out[...] = _darknet_gray(image.dtype) if fill is None else fill
    x, y = int(info.pad_x), int(info.pad_y)
    out[y:y + resized.shape[0], x:x + resized.shape[1]] = resized
    return out, info


def stretch(
    image: np.ndarray, new_shape: ImageSize, interpolation: int = cv2.INTER_LINEAR
) -> Tuple[np.ndarray, LetterboxInfo]:
    """Plain resize to ``new_shape = (h, w)`` ignoring the aspect ratio (``cv2.dnn.blobFromImage``).

    Returns ``(out, info)`` like :func:`letterbox` (``info`` has zero padding).
    """
    return fit_image(image, new_shape, "stretch", interpolation)


def resize_image(
    image: np.ndarray, new_shape: ImageSize, mode: str = "letterbox"
) -> Tuple[np.ndarray, LetterboxInfo]:
    """:func:`letterbox` (``mode="letterbox"``) or :func:`stretch` (``mode="stretch"``) on a ``uint8`` image."""
    if mode == "letterbox":
        return letterbox(image, new_shape)
    if mode == "stretch":
        return stretch(image, new_shape)
    raise ValueError(f"unknown resize mode {mode!r}: use 'letterbox' or 'stretch'")
