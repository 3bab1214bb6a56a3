""":class:`DarknetMapEvaluator`: Darknet's ``detector map`` over one dataset split, fed by the evaluation loop.

    darknet = DarknetMapEvaluator(names, dataset.ground_truth(), points=0)
    metrics = evaluate_model(model, loader, evaluator, darknet_map=darknet)   # the same forward passes
    metrics["darknet_map"]                    # DarknetMapReport.as_dict(); darknet.report.text() as Darknet prints

Each batch's model rows become Darknet's detections (:mod:`yolo.evaluation.darknet_detections`: threshold 0.005,
Darknet's NMS at 0.45, boxes relative to the original image); :func:`yolo.evaluation.darknet_map.darknet_map`
scores them against the truths, in the dataset's image order (Darknet's valid list order).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from yolo.evaluation.darknet_detections import darknet_detections, darknet_row_order, head_grids
from yolo.evaluation.darknet_map import DarknetMapReport, ImageDetections, ImageTruths, darknet_map
from yolo.evaluation.inputs import checked_ground_truth
from yolo.models.heads import nms_settings
from yolo.models.layer_types.yolo_head import YOLOLayer
from yolo.ops.coco import ImageId
from yolo.ops.letterbox import LetterboxInfo

__all__ = ["DarknetMapEvaluator", "check_darknet_map_model"]

F32 = np.float32


def check_darknet_map_model(model: torch.nn.Module) -> None:
    """A ValueError unless every head of ``model`` is a ``[yolo]`` head (the detections of ``[region]``,
    ``[Gaussian_yolo]`` and ``[detection]`` heads are made otherwise by Darknet and are not reproduced here)."""
    heads = getattr(getattr(model, "module", model), "yolo_layers", ())
    if not heads or not all(type(h) is YOLOLayer for h in heads):
        kinds = sorted({type(h).__name__ for h in heads}) or ["none"]
        raise ValueError(f"Darknet's mAP is computed for [yolo] heads only; this model's heads: {', '.join(kinds)}")


def _truths(entry: Mapping[str, Any]) -> ImageTruths:
    """A ground-truth entry (xyxy original pixels) as Darknet's label boxes: cx, cy, w, h fractions, float32."""
    boxes = np.asarray(entry["boxes"], np.float64).reshape(-1, 4)
    w, h = float(entry["width"]), float(entry["height"])
    rel = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2 / w, (boxes[:, 1] + boxes[:, 3]) / 2 / h,
                    (boxes[:, 2] - boxes[:, 0]) / w, (boxes[:, 3] - boxes[:, 1]) / h], 1)
    return ImageTruths(rel.astype(F32), np.asarray(entry["labels"], np.int64).reshape(-1))


class DarknetMapEvaluator:
    """Darknet's ``detector map`` report over one split (reset / process / evaluate).

    Args:
        names: class names (the mean is over all of them, as Darknet's).
        ground_truth: one dict per image in the split's order (``dataset.ground_truth()``: ``image_id``,
            ``height``, ``width``, ``boxes`` xyxy original pixels, ``labels``).
        points, iou_thresh, thresh: Darknet's ``-points`` (0), ``-iou_thresh`` (0.5), ``-thresh`` (0.25).
    """

    def __init__(self, names: Sequence[str], ground_truth: Iterable[Mapping[str, Any]], points: int = 0,
                 iou_thresh: float = 0.5, thresh: float = 0.25):
        self.names = [str(n) for n in names]
        self.points, self.iou_thresh, self.thresh = int(points), float(iou_thresh), float(thresh)
        entries = [checked_ground_truth(g, n, len(self.names)) for n, g in enumerate(ground_truth)]
        self._ids: List[ImageId] = [_key(g["image_id"]) for g in entries]
        self._truths = {i: _truths(g) for i, g in zip(self._ids, entries)}
        self.report: Optional[DarknetMapReport] = None
        self.reset()

    def reset(self) -> None:
        """Forget every processed image."""
        self._detections: Dict[ImageId, ImageDetections] = {}
        self.report = None

    def process(self, image_ids: Sequence[ImageId], predictions: torch.Tensor, placements: Sequence[LetterboxInfo],
                original_shapes: Sequence[Tuple[int, int]], input_hw: Tuple[int, int], model: torch.nn.Module) -> None:
        """Record one batch from the model's eval output.

        Args:
            predictions: ``Float[N, B, 5 + C]`` the output of ``model`` (which has just run on this batch).
            placements, original_shapes: each image's placement in the input and its ``(h, w)``.
            input_hw: the network input's ``(h, w)``.
        """
        input_hw = (int(input_hw[0]), int(input_hw[1]))
        order = darknet_row_order(head_grids(model, input_hw))
        if len(order) != predictions.shape[1]:
            raise ValueError(f"the heads' grids give {len(order)} rows, the model's output {predictions.shape[1]}")
        kind, beta = nms_settings(getattr(getattr(model, "module", model), "sections", ()))
        for image_id, rows, placement, shape in zip(image_ids, predictions, placements, original_shapes):
            key = _key(image_id)
            if key not in self._truths:
                raise KeyError(f"image id {image_id!r} is not in the ground truth")
            self._detections[key] = darknet_detections(rows, order, placement, tuple(shape), input_hw, kind, beta)

    def state(self) -> Dict[ImageId, ImageDetections]:
        """The processed detections (picklable), to merge across processes."""
        return dict(self._detections)

    def merge(self, states: Iterable[Mapping[ImageId, ImageDetections]]) -> None:
        for state in states:
            self._detections.update(state)

    def evaluate(self) -> DarknetMapReport:
        """The report over the processed images (all of the split's when none was processed), in its order."""
        ids = [i for i in self._ids if i in self._detections] if self._detections else self._ids
        self.report = darknet_map([self._detections.get(i, ImageDetections.empty()) for i in ids],
                                  [self._truths[i] for i in ids], self.names, self.points, self.iou_thresh,
                                  self.thresh)
        return self.report


def _key(image_id: Any) -> ImageId:
    return image_id.item() if isinstance(image_id, torch.Tensor) else image_id

