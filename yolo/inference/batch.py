"""A batch's post-processing, the one way from a model's output to detections in original-image pixels: what the
``Detector`` returns (:meth:`yolo.inference.detector.Detector.postprocess`) and what evaluation scores
(:func:`yolo.evaluation.evaluate_model`). The two differ only in their
:class:`~yolo.inference.postprocess.PostprocessConfig` (evaluation's COCO settings: conf 0.001, NMS IoU 0.6,
every class above the threshold per box, 300 per image).

Thresholds and NMS run for the whole batch on the predictions' device (:func:`postprocess_flat`; image by image
for ``[Gaussian_yolo]`` rows, :func:`postprocess_gaussian`), the detections come to the CPU in one copy, and the
boxes are mapped back through their images' :class:`~yolo.ops.letterbox.LetterboxInfo` and clipped, all in one
pass (:func:`boxes_to_original`).
"""
from __future__ import annotations

import logging
from typing import Dict, List, Sequence, Tuple

import torch

from yolo.inference.postprocess import FlatDetections, PostprocessConfig, postprocess_flat
from yolo.models.layer_types.gaussian_yolo import postprocess_gaussian
from yolo.ops.letterbox import LetterboxInfo
from yolo.ops.sizes import ImageSize

__all__ = ["boxes_to_original", "detections_to_cpu", "postprocess_batch", "warn_if_not_finite"]

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


# A batch's detections on the CPU are one packed tensor, a row per detection: box (4), score, label, then a
# [Gaussian_yolo] box's four uncertainties; and the number of rows of each image.
def _flat_to_cpu(flat: FlatDetections) -> Tuple[torch.Tensor, List[int]]:
    """The batch's detections to the CPU in one copy: ``(packed Float32[K, 6], per-image counts)``."""
    packed = torch.cat((flat.boxes, flat.scores[:, None], flat.labels[:, None].to(flat.boxes.dtype),
                        flat.image_index[:, None].to(flat.boxes.dtype)), 1).cpu()
    counts = torch.bincount(packed[:, 6].long(), minlength=flat.num_images).tolist()
    return packed[:, :6], counts


def _dicts_to_cpu(dets: List[Dict[str, torch.Tensor]]) -> Tuple[torch.Tensor, List[int]]:
    """Per-image detections (``boxes``, ``scores``, ``labels``, ``box_sigmas``) to the CPU in one copy:
    ``(packed Float32[K, 10], per-image counts)``."""
    columns = [torch.cat((d["boxes"].float(), d["scores"].float()[:, None], d["labels"].float()[:, None],
                          d["box_sigmas"].float()), 1) for d in dets]
    return torch.cat(columns).cpu(), [len(c) for c in columns]


def _split(packed: torch.Tensor, counts: List[int]) -> List[Dict[str, torch.Tensor]]:
    """The packed rows -> one dict per image (views, but ``scores``)."""
    return [{"boxes": part[:, :4], "scores": part[:, 4].contiguous(), "labels": part[:, 5].long(),
             **({"box_sigmas": part[:, 6:10]} if part.shape[1] > 6 else {})}
            for part in torch.split(packed, counts)]


def _packed_on_cpu(predictions: torch.Tensor, settings: PostprocessConfig,
                   gaussian: bool) -> Tuple[torch.Tensor, List[int]]:
    if gaussian:
        return _dicts_to_cpu(postprocess_gaussian(predictions.float(), **settings.as_kwargs()))
    return _flat_to_cpu(postprocess_flat(predictions.float(), **settings.as_kwargs()))


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
    return _split(*_packed_on_cpu(predictions, settings, gaussian))


def postprocess_batch(predictions: torch.Tensor, settings: PostprocessConfig, placements: Sequence[LetterboxInfo],
                      original_shapes: Sequence[ImageSize], gaussian: bool = False) -> List[Dict[str, torch.Tensor]]:
    """Model output -> per-image detections in original-image pixels: :func:`detections_to_cpu`, then each
    image's boxes mapped back through its placement (``placements[i]``, the :class:`LetterboxInfo` of the
    letterbox or stretch that made input ``i``) and clipped to ``original_shapes[i] = (h, w)``, the whole batch
    in one pass (:func:`boxes_to_original`).

    Returns :func:`detections_to_cpu`'s dicts with ``boxes`` ``Float32[K, 4]`` xyxy original-image pixels.
    """
    if not len(placements) == len(original_shapes) == len(predictions):
        raise ValueError(f"{len(predictions)} images, {len(placements)} placements, "
                         f"{len(original_shapes)} original shapes")
    packed, counts = _packed_on_cpu(predictions, settings, gaussian)
    packed[:, :4] = boxes_to_original(packed[:, :4], counts, placements, original_shapes)
    return _split(packed, counts)
