"""A batch's post-processing, the one way from a model's output to detections in original-image pixels: what the
``Detector`` returns (:meth:`yolo.inference.detector.Detector.postprocess`) and what evaluation scores
(:func:`yolo.evaluation.evaluate_model`). The two differ only in their
:class:`~yolo.inference.postprocess.PostprocessConfig` (evaluation's COCO settings: conf 0.001, NMS IoU 0.6,
every class above the threshold per box, 300 per image).

Thresholds and NMS run for the whole batch on the predictions' device (:func:`postprocess_flat`; image by image
for ``[Gaussian_yolo]`` rows, :func:`postprocess_gaussian`), the detections come to the CPU in one copy, and each
image's boxes are mapped back through its :class:`~yolo.ops.letterbox.LetterboxInfo` and clipped.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Sequence

import torch

from yolo.inference.postprocess import FlatDetections, PostprocessConfig, postprocess_flat, scale_boxes_to_original
from yolo.models.layer_types.gaussian_yolo import postprocess_gaussian
from yolo.ops.letterbox import LetterboxInfo
from yolo.ops.sizes import ImageSize

__all__ = ["detections_to_cpu", "postprocess_batch", "warn_if_not_finite"]

logger = logging.getLogger(__name__)


def warn_if_not_finite(predictions: torch.Tensor, where: str) -> bool:
    """One warning naming ``where`` when the model's output ``Float[N, B, 5+C]`` holds NaN or infinite values,
    which no threshold keeps, so "no detections" would otherwise be all the user sees. Returns whether it did.
    It waits for the device: callers check their first batch only."""
    bad = int((~torch.isfinite(predictions)).sum())
    if bad:
        logger.warning("%s: the network's output holds %s NaN or infinite value(s) (float16 overflow with --half, "
                       "or weights too large for float32): its detections are not valid", where, f"{bad:,}")
    return bool(bad)


def _flat_to_cpu(flat: FlatDetections) -> List[Dict[str, torch.Tensor]]:
    """The batch's detections to the CPU in one copy, then split per image."""
    packed = torch.cat((flat.boxes, flat.scores[:, None], flat.labels[:, None].to(flat.boxes.dtype),
                        flat.image_index[:, None].to(flat.boxes.dtype)), 1).cpu()
    counts = torch.bincount(packed[:, 6].long(), minlength=flat.num_images).tolist()
    return [{"boxes": part[:, :4], "scores": part[:, 4].contiguous(), "labels": part[:, 5].long()}
            for part in torch.split(packed, counts)]


def _dicts_to_cpu(dets: List[Dict[str, torch.Tensor]]) -> List[Dict[str, torch.Tensor]]:
    """Per-image detections (``boxes``, ``scores``, ``labels``, ``box_sigmas``) to the CPU in one copy."""
    columns = [torch.cat((d["boxes"].float(), d["scores"].float()[:, None], d["labels"].float()[:, None],
                          d["box_sigmas"].float()), 1) for d in dets]
    parts = torch.split(torch.cat(columns).cpu(), [len(c) for c in columns])
    return [{"boxes": p[:, :4], "scores": p[:, 4].contiguous(), "labels": p[:, 5].long(),
             "box_sigmas": p[:, 6:10]} for p in parts]


def detections_to_cpu(predictions: torch.Tensor, settings: PostprocessConfig,
                      gaussian: bool = False) -> List[Dict[str, torch.Tensor]]:
    """Thresholds and NMS for the whole batch on the predictions' device, then one copy to the CPU.

    Args:
        predictions: ``Float[N, B, 5 + C]`` model eval rows (``Float[N, B, 9 + C]`` with ``gaussian``: every
            row ends with the four uncertainties of a ``[Gaussian_yolo]`` head, scored by Darknet's rule,
            :func:`yolo.models.layer_types.gaussian_yolo.postprocess_gaussian`, image by image).
        settings: thresholds, NMS, class filter and ``max_det``.

    Returns:
        ``N`` dicts of CPU tensors: ``boxes`` ``Float32[K, 4]`` xyxy input pixels, ``scores`` ``Float32[K]``,
        ``labels`` ``Int64[K]`` (plus ``box_sigmas`` ``Float32[K, 4]`` with ``gaussian``), by decreasing score.
    """
    if gaussian:
        return _dicts_to_cpu(postprocess_gaussian(predictions.float(), **settings.as_kwargs()))
    return _flat_to_cpu(postprocess_flat(predictions.float(), **settings.as_kwargs()))


def postprocess_batch(predictions: torch.Tensor, settings: PostprocessConfig, placements: Sequence[LetterboxInfo],
                      original_shapes: Sequence[ImageSize], gaussian: bool = False) -> List[Dict[str, torch.Tensor]]:
    """Model output -> per-image detections in original-image pixels: :func:`detections_to_cpu`, then each
    image's boxes mapped back through its placement (``placements[i]``, the :class:`LetterboxInfo` of the
    letterbox or stretch that made input ``i``) and clipped to ``original_shapes[i] = (h, w)``.

    Returns :func:`detections_to_cpu`'s dicts with ``boxes`` ``Float32[K, 4]`` xyxy original-image pixels.
    """
    if not len(placements) == len(original_shapes) == len(predictions):
        raise ValueError(f"{len(predictions)} images, {len(placements)} placements, "
                         f"{len(original_shapes)} original shapes")
    dets = detections_to_cpu(predictions, settings, gaussian)
    for det, placement, shape in zip(dets, placements, original_shapes):
        det["boxes"] = scale_boxes_to_original(det["boxes"], placement, (int(shape[0]), int(shape[1])))
    return dets
