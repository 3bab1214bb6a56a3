"""Post-processing baked into an ONNX graph: :class:`DetectionsWithNMS` wraps a model so that it ends in one
ONNX ``NonMaxSuppression`` and outputs filtered detections, as :func:`yolo.inference.postprocess.postprocess` gives them."""
from __future__ import annotations

from typing import Dict, List

import torch
import torch.nn as nn

from yolo.export.compare import ArrayLike
from yolo.inference.postprocess import PostprocessOptions
from yolo.ops.boxes import torchvision_ops

NMS_OUTPUT_NAMES = ("boxes", "scores", "labels", "batch_index")
NMS_OUTPUT_COLUMNS = ("boxes [K, 4] x1, y1, x2, y2 (input pixels), scores [K], labels [K], "
                      "batch_index [K] (image of each detection)")


# Post-processing baked into an ONNX graph is the Detector's (:class:`PostprocessOptions`), with the part of it one
# ONNX NonMaxSuppression can do (:func:`check_exportable`); NMSOptions is the export's name for it.
NMSOptions = PostprocessOptions


def check_exportable(options: PostprocessOptions) -> None:
    """Raise ``ValueError`` for ``options`` an ONNX graph cannot apply: it keeps the best class per box
    (``objectness * class_prob > conf_thres``), runs plain-IoU NMS at ``iou_thres`` per class (or over all classes
    with ``agnostic``) and keeps at most ``max_det`` detections per image, sorted by score."""
    if not 0.0 <= options.conf_thres < 1.0:
        raise ValueError(f"conf_thres={options.conf_thres} must be in [0, 1)")
    if not 0.0 < options.iou_thres <= 1.0:
        raise ValueError(f"iou_thres={options.iou_thres} must be in (0, 1]")
    if options.max_det < 1:
        raise ValueError(f"max_det={options.max_det} must be positive")
    unsupported = [f"{name}={value!r}" for name, value, plain in (
        ("nms_kind", options.nms_kind, "default"), ("multi_label", options.multi_label, False),
        ("classes", options.classes, None)) if value != plain]
    if unsupported:
        raise ValueError(f"NMS in an ONNX graph is plain IoU on the best class per box over every class: "
                         f"{', '.join(unsupported)} cannot be exported (export without NMS and post-process with "
                         "yolo.Detector)")


def nms_metadata(options: PostprocessOptions) -> Dict[str, object]:
    """What an exported file records of its NMS: the thresholds and ``max_det`` (and ``agnostic`` when set)."""
    kept = {"conf_thres": options.conf_thres, "iou_thres": options.iou_thres, "max_det": options.max_det}
    return {**kept, **({"agnostic": True} if options.agnostic else {})}


class _NonMaxSuppression(torch.autograd.Function):
    """Class-agnostic NMS per image, exported as one ONNX ``NonMaxSuppression`` over the batch.

    ``boxes`` Float[N, B, 4] xyxy, ``scores`` Float[N, B] -> Int64[K, 3] rows (image, 0, box index):
    per image, boxes with score > ``conf`` in decreasing score order, at most ``max_det`` of them
    (ONNX's ``max_output_boxes_per_class`` with one class), exactly as onnxruntime orders them.
    """

    @staticmethod
    def forward(ctx, boxes, scores, iou: float, conf: float, max_det: int):
        rows = []
        for b in range(boxes.shape[0]):
            idx = (scores[b] > conf).nonzero().squeeze(1)
            keep = idx[torchvision_ops().nms(boxes[b, idx].float(), scores[b, idx].float(), iou)[:max_det]]
            rows.append(torch.stack((torch.full_like(keep, b), torch.zeros_like(keep), keep), 1))
        return torch.cat(rows) if rows else torch.zeros((0, 3), dtype=torch.int64)

    @staticmethod
    def symbolic(g, boxes, scores, iou: float, conf: float, max_det: int):
        scores = g.op("Unsqueeze", scores, g.op("Constant", value_t=torch.tensor([1], dtype=torch.int64)))
        return g.op("NonMaxSuppression", boxes, scores,
                    g.op("Constant", value_t=torch.tensor([max_det], dtype=torch.int64)),
                    g.op("Constant", value_t=torch.tensor([iou], dtype=torch.float32)),
                    g.op("Constant", value_t=torch.tensor([conf], dtype=torch.float32)))


class DetectionsWithNMS(nn.Module):
    """A model followed by :func:`yolo.inference.postprocess.postprocess`'s filtering, in traceable form.

    Input Float[N, C, H, W]; outputs ``boxes`` Float[K, 4] (xyxy input pixels), ``scores`` Float[K],
    ``labels`` Int64[K] and ``batch_index`` Int64[K] (the image of each detection), grouped by image
    and sorted by score within each image. Per-class NMS runs as one class-agnostic NMS over boxes
    shifted apart by class (the coordinate trick of ``torchvision.ops.batched_nms``, with the same
    per-image shift, so rounding matches :func:`yolo.inference.postprocess.postprocess`).
    """

    def __init__(self, model: nn.Module, options: PostprocessOptions = PostprocessOptions()):
        super().__init__()
        check_exportable(options)
        self.model = model
        self.options = options

    def forward(self, x):
        pred = self.model(x).float()
        cxcy, wh = pred[..., 0:2], pred[..., 2:4]
        boxes = torch.cat((cxcy - wh / 2, cxcy + wh / 2), -1)  # [N, B, 4]
        scores, labels = (pred[..., 5:] * pred[..., 4:5]).max(-1)  # [N, B]
        candidate = (scores > self.options.conf_thres).unsqueeze(-1)
        largest = torch.where(candidate, boxes, torch.zeros_like(boxes)).amax(dim=(1, 2), keepdim=True)
        groups = torch.zeros_like(labels) if self.options.agnostic else labels
        shifted = boxes + groups.unsqueeze(-1).to(boxes.dtype) * (largest + 1)
        sel = _NonMaxSuppression.apply(shifted, scores, float(self.options.iou_thres),
                                       float(self.options.conf_thres), int(self.options.max_det))
        image, index = sel[:, 0], sel[:, 2]
        flat = image * boxes.shape[1] + index
        return (boxes.reshape(-1, 4)[flat], scores.reshape(-1)[flat], labels.reshape(-1)[flat], image)


def split_detections(boxes: ArrayLike, scores: ArrayLike, labels: ArrayLike, batch_index: ArrayLike,
                     batch_size: int) -> List[Dict[str, torch.Tensor]]:
    """The NMS graph's flat outputs -> one dict per image (``boxes`` ``Float[K, 4]`` xyxy input pixels,
    ``scores`` ``Float[K]``, ``labels`` ``Int64[K]``), as :func:`yolo.inference.postprocess.postprocess` returns."""
    boxes, scores = torch.as_tensor(boxes).float(), torch.as_tensor(scores).float()
    labels, batch_index = torch.as_tensor(labels).long(), torch.as_tensor(batch_index).long()
    out = []
    for i in range(batch_size):
        m = batch_index == i
        out.append({"boxes": boxes[m], "scores": scores[m], "labels": labels[m]})
    return out
