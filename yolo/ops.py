"""Box formats, network-input resizing (letterbox / stretch) with exact back-mapping, and NMS.

Conventions used throughout:

- ``xyxy``: ``(x1, y1, x2, y2)`` absolute pixels, continuous coordinates where pixel ``i`` spans
  ``[i, i + 1)`` (the torchvision convention). ``xywh``: ``(cx, cy, w, h)`` in the same pixels.
- Images are ``numpy`` ``uint8`` arrays ``H x W x 3`` (BGR as read by OpenCV unless said otherwise).
- Shapes are always given as ``(height, width)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
import torchvision

__all__ = [
    "xywh_to_xyxy",
    "xyxy_to_xywh",
    "clip_boxes",
    "box_iou",
    "LetterboxInfo",
    "letterbox",
    "letterbox_params",
    "stretch",
    "resize_image",
    "scale_boxes_to_original",
    "postprocess",
    "empty_detections",
    "NMS_KINDS",
    "nms",
    "nms_settings",
]

# Darknet fills letterbox borders with 0.5 on 0..1 data; uint8 images cannot hold 127.5, so the
# numpy helper uses 128 (the Detector fills exactly 0.5 in float, see yolo.detector).
LETTERBOX_FILL = 128

Shape = Tuple[int, int]


def _as_shape(shape: Union[int, Sequence[int]]) -> Shape:
    """``416`` or ``(h, w)`` -> ``(h, w)`` ints."""
    if isinstance(shape, int):
        return shape, shape
    h, w = shape
    return int(h), int(w)


# ------------------------------------------------------------------------------------ box formats
def xywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    """``Tensor[..., 4]`` ``(cx, cy, w, h)`` -> ``Tensor[..., 4]`` ``(x1, y1, x2, y2)``, same units."""
    cxcy, wh = boxes[..., :2], boxes[..., 2:4]
    half = wh / 2
    return torch.cat((cxcy - half, cxcy + half), dim=-1)


def xyxy_to_xywh(boxes: torch.Tensor) -> torch.Tensor:
    """``Tensor[..., 4]`` ``(x1, y1, x2, y2)`` -> ``Tensor[..., 4]`` ``(cx, cy, w, h)``, same units."""
    p1, p2 = boxes[..., :2], boxes[..., 2:4]
    return torch.cat(((p1 + p2) / 2, p2 - p1), dim=-1)


def clip_boxes(boxes: torch.Tensor, shape_hw: Shape) -> torch.Tensor:
    """Clip ``Tensor[..., 4]`` xyxy pixel boxes to an image of ``shape_hw = (h, w)``.

    Returns a new tensor: x in ``[0, w]``, y in ``[0, h]``.
    """
    h, w = shape_hw
    out = boxes.clone()
    out[..., 0::2] = out[..., 0::2].clamp(0, w)
    out[..., 1::2] = out[..., 1::2].clamp(0, h)
    return out


def box_iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    """IoU matrix ``Tensor[N, M]`` of xyxy boxes ``Tensor[N, 4]`` and ``Tensor[M, 4]``."""
    return torchvision.ops.box_iou(boxes1, boxes2)


# ------------------------------------------------------------------------ resize + back-mapping
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

    def to_original(self, boxes: torch.Tensor, original_shape_hw: Shape) -> torch.Tensor:
        """Input-pixel xyxy ``Tensor[..., 4]`` -> original-image pixels, clipped. See
        :func:`scale_boxes_to_original`."""
        return scale_boxes_to_original(boxes, self, original_shape_hw)

    def to_input(self, boxes: torch.Tensor) -> torch.Tensor:
        """Original-image xyxy ``Tensor[..., 4]`` -> network-input pixels (the inverse map)."""
        scale = boxes.new_tensor([self.scale_x, self.scale_y, self.scale_x, self.scale_y])
        pad = boxes.new_tensor([self.pad_x, self.pad_y, self.pad_x, self.pad_y])
        return boxes * scale + pad


def letterbox_params(original_shape_hw: Shape, new_shape: Union[int, Shape]) -> Tuple[Shape, Tuple[int, int]]:
    """Darknet's ``letterbox_image`` geometry.

    Returns ``((new_h, new_w), (pad_x, pad_y))``: the integer size of the resized image and the
    integer left/top offset at which it is placed. Darknet's integer arithmetic is followed exactly:
    if ``w_net / w < h_net / h`` then ``new_w = w_net, new_h = (h * w_net) // w``, otherwise
    ``new_h = h_net, new_w = (w * h_net) // h``; the image goes at
    ``((w_net - new_w) // 2, (h_net - new_h) // 2)``.
    """
    h, w = original_shape_hw
    net_h, net_w = _as_shape(new_shape)
    if h <= 0 or w <= 0:
        raise ValueError(f"cannot letterbox an image of shape {(h, w)}")
    # Darknet compares float ratios: (float)w_net / w < (float)h_net / h.
    if net_w / w < net_h / h:
        new_w, new_h = net_w, (h * net_w) // w
    else:
        new_h, new_w = net_h, (w * net_h) // h
    new_w, new_h = max(new_w, 1), max(new_h, 1)
    return (new_h, new_w), ((net_w - new_w) // 2, (net_h - new_h) // 2)


def letterbox(
    image: np.ndarray,
    new_shape: Union[int, Shape],
    fill: Union[int, Tuple[int, int, int]] = LETTERBOX_FILL,
    interpolation: int = cv2.INTER_LINEAR,
) -> Tuple[np.ndarray, LetterboxInfo]:
    """Resize keeping the aspect ratio and pad to ``new_shape`` as Darknet's ``letterbox_image``.

    Args:
        image: ``uint8`` (or float) ``H x W x C`` array, any channel order.
        new_shape: network input ``(h, w)`` or a single int for square.
        fill: border value (gray: Darknet fills with 0.5, i.e. 128 on 0..255 data).
        interpolation: OpenCV interpolation flag for the resize.

    Returns:
        ``(out, info)``: ``out`` is ``new_h x new_w x C`` of the input dtype; ``info`` maps boxes back.
    """
    h, w = image.shape[:2]
    net_h, net_w = _as_shape(new_shape)
    (rh, rw), (pad_x, pad_y) = letterbox_params((h, w), (net_h, net_w))
    resized = image if (rh, rw) == (h, w) else cv2.resize(image, (rw, rh), interpolation=interpolation)
    if resized.ndim == 2:
        resized = resized[:, :, None]
    out = np.empty((net_h, net_w, resized.shape[2]), dtype=image.dtype)
    out[...] = fill
    out[pad_y:pad_y + rh, pad_x:pad_x + rw] = resized
    info = LetterboxInfo(scale_x=rw / w, scale_y=rh / h, pad_x=float(pad_x), pad_y=float(pad_y))
    return out, info


def stretch(
    image: np.ndarray, new_shape: Union[int, Shape], interpolation: int = cv2.INTER_LINEAR
) -> Tuple[np.ndarray, LetterboxInfo]:
    """Plain resize to ``new_shape = (h, w)`` ignoring the aspect ratio (``cv2.dnn.blobFromImage``).

    Returns ``(out, info)`` like :func:`letterbox` (``info`` has zero padding).
    """
    h, w = image.shape[:2]
    net_h, net_w = _as_shape(new_shape)
    out = image if (net_h, net_w) == (h, w) else cv2.resize(image, (net_w, net_h), interpolation=interpolation)
    return out, LetterboxInfo(scale_x=net_w / w, scale_y=net_h / h)


def resize_image(
    image: np.ndarray, new_shape: Union[int, Shape], mode: str = "letterbox"
) -> Tuple[np.ndarray, LetterboxInfo]:
    """Dispatch to :func:`letterbox` (``mode="letterbox"``) or :func:`stretch` (``mode="stretch"``)."""
    if mode == "letterbox":
        return letterbox(image, new_shape)
    if mode == "stretch":
        return stretch(image, new_shape)
    raise ValueError(f"unknown resize mode {mode!r}: use 'letterbox' or 'stretch'")


def scale_boxes_to_original(
    boxes_xyxy: torch.Tensor, info: LetterboxInfo, original_shape_hw: Shape, clip: bool = True
) -> torch.Tensor:
    """Map xyxy boxes ``Tensor[..., 4]`` from network-input pixels back to original-image pixels.

    Inverse of the placement recorded in ``info``: ``x_orig = (x_in - pad_x) / scale_x``. With
    ``clip`` the result is clipped to ``original_shape_hw = (h, w)``.
    """
    pad = boxes_xyxy.new_tensor([info.pad_x, info.pad_y, info.pad_x, info.pad_y])
    scale = boxes_xyxy.new_tensor([info.scale_x, info.scale_y, info.scale_x, info.scale_y])
    out = (boxes_xyxy - pad) / scale
    return clip_boxes(out, original_shape_hw) if clip else out


# --------------------------------------------------------------------------------- post-process
def empty_detections(device: Union[str, torch.device, None] = None, dtype=torch.float32) -> Dict[str, torch.Tensor]:
    """The no-detection result: ``boxes`` ``[0, 4]``, ``scores`` ``[0]``, ``labels`` ``[0]`` int64."""
    return {
        "boxes": torch.zeros((0, 4), dtype=dtype, device=device),
        "scores": torch.zeros((0,), dtype=dtype, device=device),
        "labels": torch.zeros((0,), dtype=torch.int64, device=device),
    }


# Darknet's NMS variants, named as in a [yolo] section's ``nms_kind`` (src/parser.c parse_yolo):
# "default" is do_nms_sort (plain IoU); "greedynms" and "diounms" go through diounms_sort, which compares
# IoU - (d^2 / c^2) ** beta with the threshold (d: distance of the centres, c: diagonal of the enclosing box);
# greedynms always uses beta = 0.6 (box_diou), diounms the section's beta_nms (box_diounms).
NMS_KINDS = ("default", "greedynms", "diounms")
_GREEDY_BETA = 0.6


def nms_settings(sections: Sequence) -> Tuple[str, float]:
    """``(nms_kind, beta_nms)`` that Darknet applies for a cfg: those of its *last* layer (Darknet's
    detector reads ``net.layers[net.n - 1]``) when that is a ``[yolo]`` or ``[Gaussian_yolo]`` head, else
    ``("default", 0.6)``.

    ``sections`` are :class:`yolo.cfg.Section` objects (anything with ``type``, ``has`` and ``get_str`` /
    ``get_float``). A name Darknet does not know for ``[yolo]`` (e.g. ``cornersnms``, which only its
    ``[Gaussian_yolo]`` reads) falls back to ``default``, as in Darknet.
    """
    sections = list(sections)
    last = sections[-1] if sections else None
    if last is None or last.type not in ("yolo", "gaussian_yolo"):
        return "default", 0.6
    kind = last.get_str("nms_kind", "default").strip()
    beta = last.get_float("beta_nms", 0.6)
    return (kind if kind in NMS_KINDS else "default"), float(beta)


def _pair_distance_iou(a: np.ndarray, b: np.ndarray, beta: float) -> np.ndarray:
    """``IoU - (d^2 / c^2) ** beta`` of box pairs, xyxy ``Float64[P, 4]`` each -> ``Float64[P]`` (Darknet's
    box_diounms: ``d`` the distance of the centres, ``c`` the diagonal of the enclosing box; a pair whose
    enclosing box has no diagonal gets the plain IoU)."""
    iw = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)
    inter = iw * ih
    union = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    d2 = ((a[:, 0] + a[:, 2]) / 2 - (b[:, 0] + b[:, 2]) / 2) ** 2 + ((a[:, 1] + a[:, 3]) / 2 - (b[:, 1] + b[:, 3]) / 2) ** 2
    c2 = (np.maximum(a[:, 2], b[:, 2]) - np.minimum(a[:, 0], b[:, 0])) ** 2 + \
        (np.maximum(a[:, 3], b[:, 3]) - np.minimum(a[:, 1], b[:, 1])) ** 2
    ratio = np.divide(d2, c2, out=np.zeros_like(d2), where=c2 > 0)
    return iou - ratio ** beta


def _iou_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of xyxy ``Float64[M, 4]`` and ``Float64[N, 4]`` -> ``Float64[M, N]`` (numpy: no thread pool)."""
    iw = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = iw * ih
    union = ((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]))[:, None] + ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))[None] \
        - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


# Rows of the pairwise test done at once (memory stays O(block * boxes of a class)).
_NMS_BLOCK = 1024


def nms(boxes: torch.Tensor, scores: torch.Tensor, groups: torch.Tensor, iou_thres: float,
        kind: str = "default", beta_nms: float = 0.6) -> torch.Tensor:
    """Greedy NMS within each group (class), Darknet's ``nms_kind`` variants.

    Args:
        boxes: ``Float[K, 4]`` xyxy. scores: ``Float[K]``. groups: ``Int64[K]`` (boxes of different groups
            never suppress each other).
        iou_thres: a box is dropped when its overlap measure with a better box of its group is ``> iou_thres``.
        kind: ``"default"`` (IoU), ``"greedynms"`` (IoU - (d/c)^1.2), ``"diounms"`` (IoU - (d^2/c^2)^beta_nms).

    Returns:
        ``Int64[M]`` indices of the kept boxes, by decreasing score.
    """
    if kind not in NMS_KINDS:
        raise ValueError(f"unknown nms_kind {kind!r}; known: {', '.join(NMS_KINDS)}")
    if kind == "default":
        return torchvision.ops.batched_nms(boxes, scores, groups, iou_thres)
    beta = _GREEDY_BETA if kind == "greedynms" else float(beta_nms)
    all_boxes = boxes.detach().cpu().double()
    all_scores = scores.detach().cpu().double().numpy()
    all_groups = groups.detach().cpu().numpy()
    kept = []
    for group in np.unique(all_groups):
        idx = np.nonzero(all_groups == group)[0]
        idx = idx[np.argsort(-all_scores[idx], kind="stable")]
        exact = all_boxes[idx].numpy()
        alive = np.ones(len(idx), dtype=bool)
        for start in range(0, len(idx), _NMS_BLOCK):
            stop = min(start + _NMS_BLOCK, len(idx))
            # IoU - penalty <= IoU: only pairs whose IoU exceeds the threshold can suppress, so the
            # penalty is needed for those pairs only.
            rows, cols = np.nonzero(_iou_block(exact[start:stop], exact) > iou_thres)
            later = cols > rows + start
            rows, cols = rows[later], cols[later]
            hit = _pair_distance_iou(exact[rows + start], exact[cols], beta) > iou_thres
            suppress = np.zeros((stop - start, len(idx)), dtype=bool)
            suppress[rows[hit], cols[hit]] = True
            for r in np.nonzero(suppress.any(1))[0]:
                if alive[start + r]:
                    alive &= ~suppress[r]
        kept.append(idx[alive])
    keep = np.concatenate(kept) if kept else np.zeros((0,), dtype=np.int64)
    keep = keep[np.argsort(-all_scores[keep], kind="stable")]
    return torch.from_numpy(keep.astype(np.int64)).to(boxes.device)


def postprocess(
    predictions: torch.Tensor,
    conf_thres: float = 0.25,
    iou_thres: float = 0.45,
    classes: Optional[Sequence[int]] = None,
    agnostic: bool = False,
    multi_label: bool = False,
    max_det: int = 300,
    nms_kind: str = "default",
    beta_nms: float = 0.6,
) -> List[Dict[str, torch.Tensor]]:
    """Decoded predictions -> thresholded, NMS-filtered detections, one dict per image.

    Args:
        predictions: ``Float[N, B, 5 + C]`` model eval output: ``cx, cy, w, h`` (input pixels),
            objectness (0..1), class probabilities (0..1, not multiplied by objectness).
        conf_thres: keep a (box, class) when ``objectness * class_prob > conf_thres`` (Darknet's rule).
        iou_thres: NMS suppresses a box whose IoU with a better one of the same class is ``> iou_thres``.
        classes: keep only these class indices (``None``: all).
        agnostic: one NMS over all classes instead of per class.
        multi_label: keep every class above the threshold for a box (each as its own detection, as
            Darknet does for evaluation) instead of only the best class.
        max_det: keep at most this many detections per image (highest scores first).
        nms_kind, beta_nms: Darknet's NMS variant (:func:`nms`; a cfg's choice: :func:`nms_settings`).

    Returns:
        ``N`` dicts with ``boxes`` ``Float[K, 4]`` xyxy input pixels, ``scores`` ``Float[K]`` and
        ``labels`` ``Int64[K]``, sorted by decreasing score; empty tensors when nothing is found.
    """
    if predictions.dim() != 3 or predictions.shape[-1] < 6:
        raise ValueError(f"predictions must be [N, B, 5 + C], got {tuple(predictions.shape)}")
    class_filter = None
    if classes is not None:
        class_filter = torch.as_tensor(list(classes), dtype=torch.int64, device=predictions.device)

    results = []
    # Cheap first cut on objectness for the whole batch: obj * p <= obj, so a box with
    # obj <= conf_thres can never pass.
    candidates = predictions[..., 4] > conf_thres
    for image_pred, keep_mask in zip(predictions, candidates):
        pred = image_pred[keep_mask]
        if pred.shape[0] == 0:
            results.append(empty_detections(predictions.device, predictions.dtype))
            continue
        if pred.dtype in (torch.float16, torch.bfloat16):
            pred = pred.float()  # thresholds and NMS in float32 for half-precision outputs
        scores_all = pred[:, 5:] * pred[:, 4:5]
        boxes = xywh_to_xyxy(pred[:, :4])
        if multi_label:
            box_idx, labels = (scores_all > conf_thres).nonzero(as_tuple=True)
            boxes, scores = boxes[box_idx], scores_all[box_idx, labels]
        else:
            scores, labels = scores_all.max(dim=1)
            mask = scores > conf_thres
            boxes, scores, labels = boxes[mask], scores[mask], labels[mask]
        if class_filter is not None:
            mask = torch.isin(labels, class_filter)
            boxes, scores, labels = boxes[mask], scores[mask], labels[mask]
        if scores.numel() == 0:
            results.append(empty_detections(predictions.device, predictions.dtype))
            continue
        group = torch.zeros_like(labels) if agnostic else labels
        keep = nms(boxes, scores, group, iou_thres, nms_kind, beta_nms)[:max_det]
        results.append({
            "boxes": boxes[keep].to(predictions.dtype),
            "scores": scores[keep].to(predictions.dtype),
            "labels": labels[keep].to(torch.int64),
        })
    return results
