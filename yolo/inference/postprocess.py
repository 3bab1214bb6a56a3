"""From decoded head outputs to detections: thresholds, Darknet's NMS variants, and the map back to the
original image.

Boxes are ``xyxy`` (see :mod:`yolo.ops.boxes`) in network-input pixels until :func:`scale_boxes_to_original`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from yolo.ops.boxes import cxcywh_to_xyxy
from yolo.ops.detections import empty_detections
from yolo.ops.letterbox import LetterboxInfo
from yolo.ops.nms import nms

__all__ = [
    "PostprocessConfig",
    "postprocess",
    "scale_boxes_to_original",
]

Shape = Tuple[int, int]


@dataclass(frozen=True)
class PostprocessConfig:
    """The settings of :func:`postprocess` (see there) in one value: what a Detector applies to every batch
    (:func:`yolo.models.layer_types.gaussian_yolo.postprocess_gaussian` takes the same keywords)."""

    conf_thres: float = 0.25
    iou_thres: float = 0.45
    classes: Optional[Tuple[int, ...]] = None
    agnostic: bool = False
    multi_label: bool = False
    max_det: int = 300
    nms_kind: str = "default"
    beta_nms: float = 0.6

    def as_kwargs(self) -> Dict[str, object]:
        """The settings as keyword arguments of :func:`postprocess`."""
        return asdict(self)


def scale_boxes_to_original(
    boxes_xyxy: torch.Tensor, info: LetterboxInfo, original_shape_hw: Shape, clip: bool = True
) -> torch.Tensor:
    """Map xyxy boxes ``Float[..., 4]`` from network-input pixels back to original-image pixels.

    Inverse of the placement recorded in ``info``: ``x_orig = (x_in - pad_x) / scale_x``. With
    ``clip`` the result is clipped to ``original_shape_hw = (h, w)``.
    """
    return info.to_original(boxes_xyxy, original_shape_hw, clip)


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
        predictions: ``Float[N, B, 5 + C]`` model eval output: ``cxcywh`` boxes (input pixels),
            objectness (0..1), class probabilities (0..1, not multiplied by objectness).
        conf_thres: keep a (box, class) when ``objectness * class_prob > conf_thres`` (Darknet's rule).
        iou_thres: NMS suppresses a box whose IoU with a better one of the same class is ``> iou_thres``.
        classes: keep only these class indices (``None``: all).
        agnostic: one NMS over all classes instead of per class.
        multi_label: keep every class above the threshold for a box (each as its own detection, as
            Darknet does for evaluation) instead of only the best class.
        max_det: keep at most this many detections per image (highest scores first).
        nms_kind, beta_nms: Darknet's NMS variant (:func:`yolo.ops.nms.nms`; a cfg's choice: :func:`yolo.ops.nms.nms_settings`).

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
        boxes = cxcywh_to_xyxy(pred[:, :4])
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
