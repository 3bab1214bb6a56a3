"""From decoded head outputs to detections: thresholds and Darknet's NMS variants, under one
:class:`PostprocessConfig` (its defaults: :mod:`yolo.ops.postprocess_defaults`).

Boxes are ``xyxy`` (see :mod:`yolo.ops.boxes`) in network-input pixels (an image's
:meth:`yolo.ops.letterbox.LetterboxInfo.to_original` maps them back). The whole way from a model's output to a batch's detections in original-image pixels, shared by the ``Detector``
and evaluation, is :func:`yolo.inference.batch.postprocess_batch`.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch

from yolo.models.heads import nms_settings
from yolo.ops.boxes import cxcywh_to_xyxy
from yolo.ops.nms import nms
from yolo.ops.postprocess_defaults import BETA_NMS, DETECT_CONF_THRES, DETECT_IOU_THRES, MAX_DET

__all__ = [
    "PostprocessConfig",
    "FlatDetections",
    "postprocess",
    "postprocess_flat",
    "split_by_image",
]


@dataclass(frozen=True)
class PostprocessConfig:
    """The settings of :func:`postprocess` (see there) in one value, taken by everything that turns a model's
    output into detections: the Detector (every batch), evaluation, an exported graph's NMS
    (:class:`yolo.export.nms.DetectionsWithNMS`) and the sample pictures of a training run
    (:func:`yolo.models.layer_types.gaussian_yolo.postprocess_gaussian` takes the same keywords).

    The defaults are detection's (:mod:`yolo.ops.postprocess_defaults`, which holds evaluation's too, the defaults of
    :func:`yolo.evaluation.evaluate_model`); :meth:`for_model` fills in a cfg's NMS variant.
    """

    conf_thres: float = DETECT_CONF_THRES
    iou_thres: float = DETECT_IOU_THRES
    classes: Optional[Tuple[int, ...]] = None
    agnostic: bool = False
    multi_label: bool = False
    max_det: int = MAX_DET
    nms_kind: str = "default"
    beta_nms: float = BETA_NMS


    def as_kwargs(self) -> Dict[str, object]:
        """The settings as keyword arguments of :func:`postprocess`."""
        return asdict(self)

    @classmethod
    def for_model(cls, model: torch.nn.Module, **settings) -> "PostprocessConfig":
        """``settings`` for ``model`` (a Darknet model, or a DDP wrapper of one): ``nms_kind`` / ``beta_nms`` not
        given (or ``None``) are the cfg's own, from its last ``[yolo]`` section as Darknet does
        (:func:`nms_settings`)."""
        cfg_kind, cfg_beta = nms_settings(getattr(getattr(model, "module", model), "sections", ()))
        if settings.get("nms_kind") is None:
            settings["nms_kind"] = cfg_kind
        if settings.get("beta_nms") is None:
            settings["beta_nms"] = cfg_beta
        return cls(**settings)


# Most boxes for one NMS call over a whole batch (torchvision's own bound for one call of batched_nms); above
# it, one call per image.
_ONE_CALL_MAX = {"cpu": 1000, "cuda": 5000}


def _batch_nms(boxes: torch.Tensor, scores: torch.Tensor, groups: torch.Tensor, image_index: torch.Tensor,
               iou_thres: float, kind: str, beta_nms: float) -> torch.Tensor:
    """:func:`nms` over a batch whose rows are ordered by ``image_index`` (``Int64[K]``, non-decreasing;
    ``groups`` never span two images): one call for the batch when it is small, else one per image (a
    pairwise NMS over all boxes of a large batch, as at evaluation thresholds, would cost batch^2 times
    more). Returns ``Int64[M]`` kept rows by decreasing score."""
    if kind != "default" or len(boxes) <= _ONE_CALL_MAX.get(boxes.device.type, 1000):
        return nms(boxes, scores, groups, iou_thres, kind, beta_nms)
    counts = torch.bincount(image_index).tolist()  # one host sync
    starts = [0, *itertools.accumulate(counts)]
    keep = torch.cat([start + nms(boxes[start:start + n], scores[start:start + n], groups[start:start + n],
                                  iou_thres, kind, beta_nms) for start, n in zip(starts, counts) if n])
    return keep[torch.sort(scores[keep], descending=True, stable=True).indices]


class FlatDetections(NamedTuple):
    """The detections of a whole batch in one set of tensors (on the predictions' device), grouped by image
    and by decreasing score within an image.

    Attributes:
        boxes: ``Float[K, 4]`` xyxy network-input pixels. scores: ``Float[K]``. labels: ``Int64[K]``.
        image_index: ``Int64[K]`` the image (row of the batch) each detection belongs to, non-decreasing.
        num_images: ``N``, the batch size (images without detections have no rows).
    """

    boxes: torch.Tensor
    scores: torch.Tensor
    labels: torch.Tensor
    image_index: torch.Tensor
    num_images: int

    def counts(self) -> torch.Tensor:
        """``Int64[N]`` detections per image (on the device; no host sync)."""
        ones = torch.ones_like(self.image_index)
        return torch.zeros(self.num_images, dtype=torch.int64, device=ones.device).index_add_(0, self.image_index, ones)


def postprocess_flat(
    predictions: torch.Tensor,
    conf_thres: float = DETECT_CONF_THRES,
    iou_thres: float = DETECT_IOU_THRES,
    classes: Optional[Sequence[int]] = None,
    agnostic: bool = False,
    multi_label: bool = False,
    max_det: int = MAX_DET,
    nms_kind: str = "default",
    beta_nms: float = BETA_NMS,
) -> FlatDetections:
    """:func:`postprocess` for the whole batch at once, on the predictions' device: one threshold pass, one
    NMS over (image, class) groups and one per-image cut at ``max_det``, with no per-image loop (so no
    per-image host round trip on CUDA). The arguments are :func:`postprocess`'s; the result is flat
    (:class:`FlatDetections`); :func:`split_by_image` makes the per-image dicts.
    """
    if predictions.dim() != 3 or predictions.shape[-1] < 6:
        raise ValueError(f"predictions must be [N, B, 5 + C], got {tuple(predictions.shape)}")
    num_images, num_classes = predictions.shape[0], predictions.shape[-1] - 5
    # Cheap first cut on objectness for the whole batch: obj * p <= obj, so a box with
    # obj <= conf_thres can never pass.
    image_index, box_index = (predictions[..., 4] > conf_thres).nonzero(as_tuple=True)
    pred = predictions[image_index, box_index]
    if pred.dtype in (torch.float16, torch.bfloat16):
        pred = pred.float()  # thresholds and NMS in float32 for half-precision outputs
    scores_all = pred[:, 5:] * pred[:, 4:5]
    boxes = cxcywh_to_xyxy(pred[:, :4])
    if multi_label:
        row, labels = (scores_all > conf_thres).nonzero(as_tuple=True)
        boxes, scores, image_index = boxes[row], scores_all[row, labels], image_index[row]
    else:
        scores, labels = scores_all.max(dim=1)
        mask = scores > conf_thres
        boxes, scores, labels, image_index = boxes[mask], scores[mask], labels[mask], image_index[mask]
    if classes is not None:
        mask = torch.isin(labels, torch.as_tensor(list(classes), dtype=torch.int64, device=labels.device))
        boxes, scores, labels, image_index = boxes[mask], scores[mask], labels[mask], image_index[mask]
    group = image_index * (1 if agnostic else num_classes) + (0 if agnostic else labels)
    keep = _batch_nms(boxes, scores, group, image_index, iou_thres, nms_kind, beta_nms)  # by decreasing score
    # Group by image keeping the score order (a stable sort), then keep each image's first max_det.
    keep = keep[torch.sort(image_index[keep], stable=True).indices]
    flat = FlatDetections(boxes[keep].to(predictions.dtype), scores[keep].to(predictions.dtype),
                          labels[keep].to(torch.int64), image_index[keep], num_images)
    if len(keep) <= max_det:  # no image can have more
        return flat
    counts = flat.counts()
    first = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(keep), device=keep.device) - first[flat.image_index]
    top = rank < max_det
    return FlatDetections(flat.boxes[top], flat.scores[top], flat.labels[top], flat.image_index[top], num_images)


def split_by_image(flat: FlatDetections) -> List[Dict[str, torch.Tensor]]:
    """:class:`FlatDetections` -> one dict per image (``boxes``, ``scores``, ``labels``; views of the flat
    tensors; empty tensors for an image without detections). One host sync (the counts)."""
    counts = flat.counts().tolist()
    parts = zip(*(torch.split(t, counts) for t in (flat.boxes, flat.scores, flat.labels)))
    return [{"boxes": b, "scores": s, "labels": k} for b, s, k in parts]


def postprocess(
    predictions: torch.Tensor,
    conf_thres: float = DETECT_CONF_THRES,
    iou_thres: float = DETECT_IOU_THRES,
    classes: Optional[Sequence[int]] = None,
    agnostic: bool = False,
    multi_label: bool = False,
    max_det: int = MAX_DET,
    nms_kind: str = "default",
    beta_nms: float = BETA_NMS,
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
        nms_kind, beta_nms: Darknet's NMS variant (:func:`nms`; a cfg's choice: :func:`nms_settings`).

    Returns:
        ``N`` dicts with ``boxes`` ``Float[K, 4]`` xyxy input pixels, ``scores`` ``Float[K]`` and
        ``labels`` ``Int64[K]``, sorted by decreasing score; empty tensors when nothing is found.
        The whole batch is done at once (:func:`postprocess_flat`).
    """
    return split_by_image(postprocess_flat(predictions, conf_thres, iou_thres, classes, agnostic, multi_label,
                                           max_det, nms_kind, beta_nms))
