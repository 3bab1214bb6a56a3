"""From a model's eval rows to detections: the one entry point :func:`postprocess`, under one
:class:`PostprocessOptions` (its defaults: :mod:`yolo.ops.postprocess_defaults`). What the ``Detector`` returns
(:meth:`yolo.inference.detector.Detector.postprocess`), what evaluation scores (:func:`yolo.evaluation.evaluate_model`)
and what a training run draws differ only in their config (evaluation's COCO settings: conf 0.001, NMS IoU 0.6,
every class above the threshold per box, 300 per image).

The way, for the whole batch at once: thresholds, Darknet's NMS variant and the ``max_det`` cut on the
predictions' device (:func:`threshold_and_nms`, no loop over images), one copy of the kept rows to the CPU, then,
given each image's placement, the boxes mapped back to the original image and clipped (:func:`boxes_to_original`).
Boxes are ``xyxy`` (see :mod:`yolo.ops.boxes`).
"""
from __future__ import annotations

import itertools
import logging
import warnings
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch

from yolo.models.heads import has_gaussian_heads, nms_settings
from yolo.models.layer_types.gaussian_yolo import NUM_BOX_ENTRIES as GAUSSIAN_BOX_ENTRIES
from yolo.ops.boxes import cxcywh_to_xyxy
from yolo.ops.letterbox import LetterboxInfo
from yolo.ops.nms import nms
from yolo.ops.postprocess_defaults import BETA_NMS, DETECT_CONF_THRES, DETECT_IOU_THRES, MAX_DET
from yolo.ops.sizes import ImageSize

__all__ = [
    "PostprocessOptions",
    "FlatDetections",
    "boxes_to_original",
    "postprocess",
    "threshold_and_nms",
    "warn_if_not_finite",
]

logger = logging.getLogger(__name__)

# Names kept working for code written before the rename (one word per concept: what a caller chooses is "options").
_RENAMED = {"PostprocessConfig": "PostprocessOptions"}


def __getattr__(name: str):
    if name in _RENAMED:
        warnings.warn(f"yolo.inference.postprocess.{name} is now {_RENAMED[name]}", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class PostprocessOptions:
    """How a model's eval rows become detections (:func:`postprocess`), in one value, taken by everything that
    does it: the Detector (every batch), evaluation, an exported graph's NMS
    (:class:`yolo.export.nms.DetectionsWithNMS`) and the sample pictures of a training run.

    Attributes:
        conf_thres: keep a (box, class) when ``objectness * class_prob > conf_thres`` (Darknet's rule).
        iou_thres: NMS suppresses a box whose IoU with a better one of the same class is ``> iou_thres``.
        classes: keep only these class indices (``None``: all).
        agnostic: one NMS over all classes instead of per class.
        multi_label: keep every class above the threshold for a box (each as its own detection, as
            Darknet does for evaluation) instead of only the best class.
        max_det: keep at most this many detections per image (highest scores first).
        nms_kind, beta_nms: Darknet's NMS variant (:func:`yolo.ops.nms.nms`; a cfg's choice: :func:`nms_settings`).
        gaussian: the rows are a ``[Gaussian_yolo]`` model's, ``Float[N, B, 9 + C]``: each ends with the four
            uncertainties of its box, and a class scores ``objectness * class_prob * (1 - mean of the four)``
            (Darknet's get_gaussian_yolo_detections); the detections carry them as ``box_sigmas``.

    The defaults are detection's (:mod:`yolo.ops.postprocess_defaults`, which holds evaluation's too, the defaults of
    :func:`yolo.evaluation.evaluate_model`); :meth:`for_model` fills in what a model decides.
    """

    conf_thres: float = DETECT_CONF_THRES
    iou_thres: float = DETECT_IOU_THRES
    classes: Optional[Tuple[int, ...]] = None
    agnostic: bool = False
    multi_label: bool = False
    max_det: int = MAX_DET
    nms_kind: str = "default"
    beta_nms: float = BETA_NMS
    gaussian: bool = False

    @classmethod
    def for_model(cls, model: torch.nn.Module, **settings) -> "PostprocessOptions":
        """``settings`` for ``model`` (a Darknet model, a DDP wrapper of one, or an exported file's model):
        ``nms_kind`` / ``beta_nms`` not given (or ``None``) are the cfg's own, from its last ``[yolo]`` section as
        Darknet does (:func:`nms_settings`); ``gaussian`` is whether it has ``[Gaussian_yolo]`` heads."""
        net = getattr(model, "module", model)
        cfg_kind, cfg_beta = nms_settings(getattr(net, "sections", ()))
        if settings.get("nms_kind") is None:
            settings["nms_kind"] = cfg_kind
        if settings.get("beta_nms") is None:
            settings["beta_nms"] = cfg_beta
        settings.setdefault("gaussian", has_gaussian_heads(getattr(net, "yolo_layers", ())))
        return cls(**settings)


def warn_if_not_finite(predictions: torch.Tensor, where: str) -> bool:
    """One warning naming ``where`` when the model's output ``Float[N, B, 5+C]`` holds NaN or infinite values,
    which no threshold keeps, so "no detections" would otherwise be all the user sees. Returns whether it did.
    It waits for the device: callers check their first batch only."""
    bad = int((~torch.isfinite(predictions)).sum())
    if bad:
        logger.warning("%s: the network's output holds %s NaN or infinite value(s) (float16 overflow with --half, "
                       "or weights too large for float32): its detections are not valid", where, f"{bad:,}")
    return bool(bad)


class FlatDetections(NamedTuple):
    """The detections of a whole batch in one set of tensors (on the predictions' device), grouped by image
    and by decreasing score within an image.

    Attributes:
        boxes: ``Float[K, 4]`` xyxy network-input pixels. scores: ``Float[K]``. labels: ``Int64[K]``.
        image_index: ``Int64[K]`` the image (row of the batch) each detection belongs to, non-decreasing.
        num_images: ``N``, the batch size (images without detections have no rows).
        box_sigmas: ``Float[K, 4]`` the uncertainties of a ``[Gaussian_yolo]`` box (sigma_tx, sigma_ty, sigma_tw,
            sigma_th), ``None`` for other rows.
    """

    boxes: torch.Tensor
    scores: torch.Tensor
    labels: torch.Tensor
    image_index: torch.Tensor
    num_images: int
    box_sigmas: Optional[torch.Tensor] = None

    def counts(self) -> torch.Tensor:
        """``Int64[N]`` detections per image (on the device; no host sync)."""
        ones = torch.ones_like(self.image_index)
        return torch.zeros(self.num_images, dtype=torch.int64, device=ones.device).index_add_(0, self.image_index, ones)

    def rows(self, keep: torch.Tensor) -> "FlatDetections":
        """The detections ``keep`` (indices or a mask) selects."""
        return FlatDetections(self.boxes[keep], self.scores[keep], self.labels[keep], self.image_index[keep],
                              self.num_images, None if self.box_sigmas is None else self.box_sigmas[keep])


# Most boxes for one NMS call over a whole batch (torchvision's own bound for one call of batched_nms); above
# it, one call per image.
_ONE_CALL_MAX = {"cpu": 1000, "cuda": 5000}


def _batched_nms_rows(boxes: torch.Tensor, scores: torch.Tensor, groups: torch.Tensor, image_index: torch.Tensor,
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


def threshold_and_nms(predictions: torch.Tensor, config: PostprocessOptions) -> FlatDetections:
    """Eval rows -> the batch's kept detections, on the predictions' device: one threshold pass, one NMS over
    (image, class) groups and one per-image cut at ``config.max_det``, with no loop over images (so no per-image
    host round trip on CUDA).

    Args:
        predictions: ``Float[N, B, 5 + C]`` model eval rows: ``cxcywh`` boxes (input pixels), objectness (0..1),
            class probabilities (0..1, not multiplied by objectness); ``Float[N, B, 9 + C]`` with
            ``config.gaussian``: then each row ends with its box's four uncertainties.
        config: the thresholds, NMS and filters (:class:`PostprocessOptions`).

    Returns:
        :class:`FlatDetections` in ``predictions``' dtype (thresholds and NMS in float32 for half precision).
    """
    entries = GAUSSIAN_BOX_ENTRIES if config.gaussian else 5  # box, objectness (and the four uncertainties)
    if predictions.dim() != 3 or predictions.shape[-1] < entries + 1:
        raise ValueError(f"predictions must be [N, B, {entries} + C], got {tuple(predictions.shape)}")
    num_images, num_classes = predictions.shape[0], predictions.shape[-1] - entries
    # Cheap first cut on objectness for the whole batch: every score is at most the objectness.
    image_index, box_index = (predictions[..., 4] > config.conf_thres).nonzero(as_tuple=True)
    pred = predictions[image_index, box_index]
    if pred.dtype in (torch.float16, torch.bfloat16):
        pred = pred.float()  # thresholds and NMS in float32 for half-precision outputs
    scores_all = pred[:, 5:5 + num_classes] * pred[:, 4:5]
    sigmas = pred[:, 5 + num_classes:] if config.gaussian else None
    if config.gaussian:  # Darknet's Gaussian score: the box's certainty counts too
        scores_all = scores_all * (1.0 - sigmas.mean(1, keepdim=True))
    boxes = cxcywh_to_xyxy(pred[:, :4])
    if config.multi_label:
        row, labels = (scores_all > config.conf_thres).nonzero(as_tuple=True)
        scores = scores_all[row, labels]
    else:
        scores, labels = scores_all.max(dim=1)
        row = (scores > config.conf_thres).nonzero().squeeze(1)
        scores, labels = scores[row], labels[row]
    found = FlatDetections(boxes[row], scores, labels, image_index[row], num_images,
                           None if sigmas is None else sigmas[row])
    if config.classes is not None:
        found = found.rows(torch.isin(found.labels, torch.as_tensor(list(config.classes), dtype=torch.int64,
                                                                    device=found.labels.device)))
    group = found.image_index * (1 if config.agnostic else num_classes) + (0 if config.agnostic else found.labels)
    keep = _batched_nms_rows(found.boxes, found.scores, group, found.image_index, config.iou_thres, config.nms_kind,
                             config.beta_nms)  # by decreasing score
    # Group by image keeping the score order (a stable sort), then keep each image's first max_det.
    kept = found.rows(keep[torch.sort(found.image_index[keep], stable=True).indices])
    kept = FlatDetections(kept.boxes.to(predictions.dtype), kept.scores.to(predictions.dtype),
                          kept.labels.to(torch.int64), kept.image_index, num_images,
                          None if kept.box_sigmas is None else kept.box_sigmas.to(predictions.dtype))
    if len(kept.labels) <= config.max_det:  # no image can have more
        return kept
    counts = kept.counts()
    first = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(kept.labels), device=keep.device) - first[kept.image_index]
    return kept.rows(rank < config.max_det)


def boxes_to_original(boxes: torch.Tensor, counts: Sequence[int], placements: Sequence[LetterboxInfo],
                      original_shapes: Sequence[ImageSize]) -> torch.Tensor:
    """The boxes of a whole batch mapped back to their images in one pass: ``boxes`` ``Float[K, 4]`` xyxy
    network-input pixels, the first ``counts[0]`` of image 0 and so on; each through its image's placement
    (``(x - pad) / scale``) and clipped to its ``original_shapes[i] = (h, w)``. The same float32 operations as
    :meth:`LetterboxInfo.to_original` image by image, so the same values, without a loop over images."""
    per_image = boxes.new_tensor([[p.pad_x, p.pad_y, p.pad_x, p.pad_y, p.scale_x, p.scale_y, p.scale_x, p.scale_y,
                                   w, h, w, h] for p, (h, w) in zip(placements, original_shapes)])
    rows = per_image.repeat_interleave(torch.as_tensor(list(counts), dtype=torch.int64), dim=0)
    out = (boxes - rows[:, 0:4]) / rows[:, 4:8]
    return torch.minimum(out.clamp_(min=0), rows[:, 8:12])


def postprocess(predictions: torch.Tensor, config: PostprocessOptions = PostprocessOptions(),
                placements: Optional[Sequence[LetterboxInfo]] = None,
                original_shapes: Optional[Sequence[ImageSize]] = None) -> List[Dict[str, torch.Tensor]]:
    """Model output -> per-image detections on the CPU: :func:`threshold_and_nms` for the whole batch on the
    predictions' device (half precision in float32), one copy of the kept rows to the CPU and, given
    ``placements``, each image's boxes mapped back through its placement (``placements[i]``, the
    :class:`LetterboxInfo` of the letterbox or stretch that made input ``i``) and clipped to
    ``original_shapes[i] = (h, w)``, the whole batch in one pass (:func:`boxes_to_original`).

    Args:
        predictions: ``Float[N, B, 5 + C]`` model eval rows (``Float[N, B, 9 + C]`` with ``config.gaussian``).
        config: thresholds, NMS, class filter and ``max_det`` (:class:`PostprocessOptions`).
        placements, original_shapes: one per image, or both ``None`` (boxes stay in network-input pixels).

    Returns:
        ``N`` dicts of CPU tensors, by decreasing score: ``boxes`` ``Float32[K, 4]`` xyxy (original-image pixels
        given ``placements``, else network-input pixels), ``scores`` ``Float32[K]``, ``labels`` ``Int64[K]``, plus
        ``box_sigmas`` ``Float32[K, 4]`` with ``config.gaussian``; empty tensors when nothing is found. (Float64
        rows give float64 values.)
    """
    if (placements is None) != (original_shapes is None) or \
            placements is not None and not len(placements) == len(original_shapes) == len(predictions):
        raise ValueError(f"{len(predictions)} images, {'no' if placements is None else len(placements)} placements, "
                         f"{'no' if original_shapes is None else len(original_shapes)} original shapes")
    flat = threshold_and_nms(predictions.to(torch.promote_types(predictions.dtype, torch.float32)), config)
    # The batch's detections to the CPU in one copy, a row per detection: box (4), score, label, [Gaussian_yolo]
    # uncertainties (4), image.
    columns = (flat.boxes, flat.scores[:, None], flat.labels[:, None].to(flat.boxes.dtype),
               *(() if flat.box_sigmas is None else (flat.box_sigmas,)), flat.image_index[:, None].to(flat.boxes.dtype))
    packed = torch.cat(columns, 1).cpu()
    counts = torch.bincount(packed[:, -1].long(), minlength=flat.num_images).tolist()
    if placements is not None:
        packed[:, :4] = boxes_to_original(packed[:, :4], counts, placements, original_shapes)
    return [{"boxes": part[:, :4], "scores": part[:, 4].contiguous(), "labels": part[:, 5].long(),
             **({"box_sigmas": part[:, 6:10]} if flat.box_sigmas is not None else {})}
            for part in torch.split(packed, counts)]
