"""YOLOv3 training loss: target assignment and the per-head loss terms, driven by each ``[yolo]`` section.

Semantics follow Darknet's ``yolo_layer`` (the AlexeyAB line of Darknet):

* **Assignment.** Each truth goes to the anchor, among *all* anchors of the cfg, whose width/height IoU with
  the truth (both boxes centred) is best; ties go to the first anchor. The head whose ``mask`` holds that
  anchor predicts it at cell ``(floor(cx * Wg / W), floor(cy * Hg / H))``. With ``iou_thresh < 1`` the truth
  is also given to every other anchor of each head's mask whose wh-IoU exceeds ``iou_thresh``.
* **Collisions.** When several truths land on the same (image, anchor, cell) slot, the one that comes last in
  ``targets`` gives the box and objectness target (Darknet overwrites); the class target is the union of their
  classes (Darknet sets each truth's class bit on the same slot).
* **Objectness.** BCE, target 1 at assigned slots, 0 elsewhere, except that predictions whose best IoU with any
  truth of the same image exceeds ``ignore_thresh`` get no objectness loss (unless assigned). Predictions are
  decoded as in the model's eval decode (``scale_x_y``, ``new_coords``). With ``truth_thresh < 1`` a prediction
  whose best IoU exceeds ``truth_thresh`` becomes a positive for that truth (before, so assigned truths win).
* **Classes.** BCE on assigned slots; with ``label_smooth_eps = e`` the targets are ``y * (1 - e) + 0.5 * e``.
* **Box.** ``iou_loss=mse``: ``0.5 * (2 - w*h/(W*H)) * ((xy - txy)^2 + (twh_raw - twh)^2)`` summed over the four
  coordinates, where ``xy`` is the activated offset (with ``scale_x_y``), ``txy`` the truth's offset in its
  cell, ``twh = log(w / anchor)`` (``sqrt(w / (4 * anchor))`` with ``new_coords=1``). The 0.5 makes the gradient
  equal Darknet's delta ``scale * (t - x)`` (for xy, up to the sigmoid's derivative, which Darknet leaves out).
  ``iou``/``giou``/``diou``/``ciou``: ``1 - IoU variant`` between the decoded box and the truth.
* **Normalizers.** ``iou_normalizer`` scales the box term (in every mode, as Darknet does), ``obj_normalizer``
  the objectness term and ``cls_normalizer`` the class term.

Normalization: every term is summed over all elements of the batch and divided by the batch size ``N``, so the
loss is *per image*. Darknet sums deltas over its batch and divides the learning rate by the batch, which is the
same thing; so Darknet's learning rates carry over, and gradient accumulation over ``k`` sub-batches is
``sum(loss_i) / k``.

Truths whose centre lies outside the input, whose width or height is not positive, or whose values are not
finite are ignored (they are neither assigned nor used for ``ignore_thresh``). A class id outside
``[0, num_classes)`` or an image index outside the batch raises ``ValueError``: that is a data error, not
something to train through silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.ops import complete_box_iou_loss, distance_box_iou_loss, generalized_box_iou_loss

from .layers import YOLOLayer

IOU_LOSSES = ("mse", "iou", "giou", "diou", "ciou")

# exp(tw) is evaluated with tw clamped here: exp(20) is ~5e8 times the anchor, far beyond any input, and the
# clamp keeps areas finite in float32 when a diverging run produces huge logits.
_MAX_LOG_SCALE = 20.0
# Upper bound on the elements of one IoU block (images x predictions x truths) for the ignore test.
_IOU_BLOCK = 1 << 24


@dataclass
class HeadTargets:
    """The positive slots of one head, K rows, each slot unique.

    ``image``, ``anchor`` (index into the head's masked anchors), ``gy``, ``gx``: Long[K], the slot;
    ``truth``: Long[K], the row of ``targets`` that gives the slot its box target;
    ``classes``: Float[K, C], multi-hot class target (union of every truth assigned to the slot).
    """

    image: Tensor
    anchor: Tensor
    gy: Tensor
    gx: Tensor
    truth: Tensor
    classes: Tensor

    def __len__(self) -> int:
        return int(self.image.numel())


# ---------------------------------------------------------------------------------------------- box helpers
def cxcywh_to_xyxy(boxes: Tensor) -> Tensor:
    """Float[..., 4] cx, cy, w, h -> Float[..., 4] x1, y1, x2, y2 (same units)."""
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), dim=-1)


def elementwise_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """IoU of broadcastable xyxy boxes Float[..., 4] -> Float[...]; 0 where the union is empty (as Darknet)."""
    wi = (torch.minimum(boxes1[..., 2], boxes2[..., 2]) - torch.maximum(boxes1[..., 0], boxes2[..., 0])).clamp(min=0)
    hi = (torch.minimum(boxes1[..., 3], boxes2[..., 3]) - torch.maximum(boxes1[..., 1], boxes2[..., 1])).clamp(min=0)
    inter = wi * hi
    area1 = (boxes1[..., 2] - boxes1[..., 0]) * (boxes1[..., 3] - boxes1[..., 1])
    area2 = (boxes2[..., 2] - boxes2[..., 0]) * (boxes2[..., 3] - boxes2[..., 1])
    union = area1 + area2 - inter
    return torch.where(union > 0, inter / union.clamp(min=torch.finfo(union.dtype).tiny), torch.zeros_like(union))


def wh_iou(wh1: Tensor, wh2: Tensor) -> Tensor:
    """IoU of centred boxes given by widths/heights: Float[M, 2] x Float[K, 2] -> Float[M, K]."""
    inter = torch.minimum(wh1[:, None, 0], wh2[None, :, 0]) * torch.minimum(wh1[:, None, 1], wh2[None, :, 1])
    union = (wh1[:, 0] * wh1[:, 1])[:, None] + (wh2[:, 0] * wh2[:, 1])[None, :] - inter
    return torch.where(union > 0, inter / union.clamp(min=torch.finfo(union.dtype).tiny), torch.zeros_like(union))


# ----------------------------------------------------------------------------------------- target assignment
def usable_targets(targets: Tensor, batch_size: int, img_size_hw: Tuple[int, int], num_classes: int) -> Tensor:
    """Bool[M]: rows of ``targets`` (Float[M, 6] image, class, cx, cy, w, h in input pixels) that take part.

    Drops rows that are not finite, have a non-positive width or height, or a centre outside the input.
    Raises ``ValueError`` for an image index outside ``[0, batch_size)`` or a class outside ``[0, num_classes)``.
    """
    if targets.ndim != 2 or targets.shape[1] != 6:
        raise ValueError(f"targets must be Float[M, 6] (image, class, cx, cy, w, h), got shape {tuple(targets.shape)}")
    height, width = img_size_hw
    finite = torch.isfinite(targets).all(dim=1)
    image, cls = targets[:, 0], targets[:, 1]
    bad_image = finite & ((image < 0) | (image >= batch_size) | (image != image.floor()))
    if bad_image.any():
        row = int(bad_image.nonzero()[0])
        raise ValueError(f"targets row {row}: image index {image[row].item()} is not in 0..{batch_size - 1}")
    bad_class = finite & ((cls < 0) | (cls >= num_classes) | (cls != cls.floor()))
    if bad_class.any():
        row = int(bad_class.nonzero()[0])
        raise ValueError(f"targets row {row}: class {cls[row].item()} is not in 0..{num_classes - 1} "
                         f"(the cfg has classes={num_classes})")
    cx, cy, w, h = targets[:, 2:6].unbind(1)
    return finite & (w > 0) & (h > 0) & (cx >= 0) & (cx <= width) & (cy >= 0) & (cy <= height)


def _anchor_matches(targets: Tensor, keep: Tensor, head, img_size_hw: Tuple[int, int],
                    grid_hw: Tuple[int, int]) -> Tuple[Tensor, ...]:
    """Assignment of truths to this head's anchors, one row per (truth, anchor) pair.

    Returns Long tensors ``(image, anchor, gy, gx, truth, cls)``, ordered by truth row then anchor.
    """
    device = targets.device
    rows = keep.nonzero().squeeze(1)
    if rows.numel() == 0:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return (empty,) * 6
    height, width = img_size_hw
    grid_h, grid_w = grid_hw
    t = targets[rows]
    ious = wh_iou(t[:, 4:6], head.all_anchors.to(device=device, dtype=t.dtype))  # [M, num]
    best = ious.argmax(dim=1)  # first maximum, as Darknet's strict '>' scan
    mask = torch.as_tensor(list(head.mask), dtype=torch.long, device=device)
    hit = best[:, None] == mask[None, :]  # [M, A]
    if head.opts.iou_thresh < 1.0:
        hit |= ious[:, mask] > head.opts.iou_thresh
    m, anchor = hit.nonzero(as_tuple=True)  # row-major: by truth, then anchor
    t = t[m]
    gx = (t[:, 2] * grid_w / width).floor().long().clamp(0, grid_w - 1)
    gy = (t[:, 3] * grid_h / height).floor().long().clamp(0, grid_h - 1)
    return t[:, 0].long(), anchor, gy, gx, rows[m], t[:, 1].long()


def _merge_slots(image: Tensor, anchor: Tensor, gy: Tensor, gx: Tensor, truth: Tensor, cls: Tensor,
                 num_anchors: int, grid_hw: Tuple[int, int], num_classes: int) -> HeadTargets:
    """Collapse rows that share a slot: the last row wins the box, classes are united."""
    device = image.device
    if image.numel() == 0:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return HeadTargets(empty, empty, empty, empty, empty, torch.zeros(0, num_classes, device=device))
    grid_h, grid_w = grid_hw
    key = ((image * num_anchors + anchor) * grid_h + gy) * grid_w + gx
    unique, inverse = torch.unique(key, return_inverse=True)
    order = torch.arange(key.numel(), device=device)
    winner = torch.full((unique.numel(),), -1, dtype=torch.long, device=device)
    winner = winner.scatter_reduce(0, inverse, order, reduce="amax")
    classes = torch.zeros(unique.numel(), num_classes, device=device)
    classes[inverse, cls] = 1.0
    return HeadTargets(image[winner], anchor[winner], gy[winner], gx[winner], truth[winner], classes)


def assign_targets(targets: Tensor, head, grid_hw: Tuple[int, int], img_size_hw: Tuple[int, int],
                   batch_size: int) -> HeadTargets:
    """Positive slots of one ``[yolo]`` head for ``targets`` Float[M, 6] (image, class, cx, cy, w, h, pixels).

    ``grid_hw`` is the head's output grid (Hg, Wg), ``img_size_hw`` the network input (H, W). Only the truth
    assignment (best anchor plus ``iou_thresh`` extras); ``truth_thresh`` positives depend on the predictions
    and are added by :class:`YoloLoss`.
    """
    keep = usable_targets(targets, batch_size, img_size_hw, head.num_classes)
    rows = _anchor_matches(targets, keep, head, img_size_hw, grid_hw)
    return _merge_slots(*rows, head.num_anchors, grid_hw, head.num_classes)


# ------------------------------------------------------------------------------------------------- decoding
def decode_boxes(raw: Tensor, anchors: Tensor, gx: Tensor, gy: Tensor, grid_hw: Tuple[int, int],
                 img_size_hw: Tuple[int, int], scale_x_y: float, new_coords: int) -> Tensor:
    """Raw box outputs Float[..., 4] (tx, ty, tw, th) -> Float[..., 4] xyxy in input pixels.

    ``anchors`` Float[..., 2] (pixels), ``gx``/``gy`` the cell of each prediction, broadcastable to ``raw[..., 0]``.
    Same decode as the model's eval path.
    """
    grid_h, grid_w = grid_hw
    height, width = img_size_hw
    xy = raw[..., :2] if new_coords else raw[..., :2].sigmoid()
    xy = xy * scale_x_y - 0.5 * (scale_x_y - 1.0)
    if new_coords:
        wh = 4.0 * raw[..., 2:4] ** 2 * anchors
    else:
        wh = raw[..., 2:4].clamp(max=_MAX_LOG_SCALE).exp() * anchors
    cx = (gx + xy[..., 0]) * (width / grid_w)
    cy = (gy + xy[..., 1]) * (height / grid_h)
    return cxcywh_to_xyxy(torch.stack((cx, cy, wh[..., 0], wh[..., 1]), dim=-1))


def _best_truth(pred_xyxy: Tensor, truth_xyxy: Tensor, truth_image: Tensor, truth_rows: Tensor) -> Tuple[Tensor, Tensor]:
    """Best IoU of each prediction with the truths of its own image.

    ``pred_xyxy`` Float[N, P, 4]; ``truth_xyxy`` Float[T, 4] with image index Long[T] and row in ``targets``
    Long[T]. Returns (best IoU Float[N, P], row of that truth Long[N, P], -1 where the image has none).
    """
    n, p, _ = pred_xyxy.shape
    device = pred_xyxy.device
    best_iou = torch.zeros(n, p, device=device)
    best_row = torch.full((n, p), -1, dtype=torch.long, device=device)
    if truth_image.numel() == 0:
        return best_iou, best_row
    # Pad the truths to [N, Tmax] so that every image is compared only with its own truths.
    order = torch.argsort(truth_image, stable=True)
    image = truth_image[order]
    counts = torch.bincount(image, minlength=n)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(image.numel(), device=device) - starts[image]
    t_max = int(counts.max())
    padded = torch.zeros(n, t_max, 4, device=device)
    padded[image, slot] = truth_xyxy[order]
    valid = torch.zeros(n, t_max, dtype=torch.bool, device=device)
    valid[image, slot] = True
    rows = torch.full((n, t_max), -1, dtype=torch.long, device=device)
    rows[image, slot] = truth_rows[order]
    step = max(1, _IOU_BLOCK // max(1, p * t_max))
    for s in range(0, n, step):
        iou = elementwise_iou(pred_xyxy[s:s + step, :, None, :], padded[s:s + step, None, :, :])  # [n', P, T]
        iou = iou.masked_fill(~valid[s:s + step, None, :], 0.0)
        arg = iou.argmax(dim=2)  # first maximum
        best_iou[s:s + step] = iou.gather(2, arg[..., None]).squeeze(2)
        best_row[s:s + step] = rows[s:s + step].gather(1, arg)
    return best_iou, best_row


# --------------------------------------------------------------------------------------------------- losses
def _bce(x: Tensor, target: Tensor, probabilities: bool) -> Tensor:
    """Element-wise BCE; ``x`` holds logits, or probabilities when the head has ``new_coords=1``."""
    if probabilities:
        return F.binary_cross_entropy(x.clamp(0.0, 1.0), target, reduction="none")
    return F.binary_cross_entropy_with_logits(x, target, reduction="none")


def _iou_variant_loss(kind: str, pred_xyxy: Tensor, truth_xyxy: Tensor) -> Tensor:
    """Float[K] ``1 - IoU variant`` between paired xyxy boxes."""
    if kind == "giou":
        return generalized_box_iou_loss(pred_xyxy, truth_xyxy, reduction="none")
    if kind == "diou":
        return distance_box_iou_loss(pred_xyxy, truth_xyxy, reduction="none")
    if kind == "ciou":
        return complete_box_iou_loss(pred_xyxy, truth_xyxy, reduction="none")
    return 1.0 - elementwise_iou(pred_xyxy, truth_xyxy)


# ------------------------------------------------------------------------------------- per-head-type losses
HeadLossFn = Callable[[Any, Tensor, Tensor, Tensor, Tuple[int, int]], Tuple[Tensor, Tensor, Tensor, int]]
HEAD_LOSSES: Dict[type, HeadLossFn] = {}
HEAD_CHECKS: Dict[type, Callable[[Any, int], None]] = {}


def register_head_loss(head_type: type, check: Optional[Callable[[Any, int], None]] = None):
    """Register the training loss of one head type (a decorator).

    The decorated ``fn(head, out, targets, keep, img_size_hw) -> (box, obj, cls, num_positive)`` gets
    ``out`` Float[N, A, Hg, Wg, 5 + C] (float32, the head's training-mode output), ``targets`` Float[M, 6]
    (image, class, cx, cy, w, h in input pixels), ``keep`` Bool[M] (the rows :func:`usable_targets` lets
    through) and the network input ``img_size_hw`` (H, W); it returns the head's box, objectness and class
    terms *summed over the batch* (0-dim tensors) and its number of positive slots. ``check(head, index)``,
    if given, runs once when :class:`YoloLoss` is built and raises ``ValueError`` for a head it cannot train.
    Subclasses of ``head_type`` use the same loss unless they register their own.
    """
    def wrap(fn: HeadLossFn) -> HeadLossFn:
        HEAD_LOSSES[head_type] = fn
        if check is not None:
            HEAD_CHECKS[head_type] = check
        return fn
    return wrap


def _registered_type(head) -> Optional[type]:
    """The nearest class in ``type(head)``'s MRO that has a registered loss, or None."""
    return next((cls for cls in type(head).__mro__ if cls in HEAD_LOSSES), None)


class YoloLoss:
    """The training loss over every head of a model, each head by the loss registered for its type.

    ``YoloLoss(model)`` reads ``model.yolo_layers`` (the heads; :data:`HEAD_LOSSES` maps each head type to its
    loss, see :func:`register_head_loss`). The heads are read at every call, so the criterion follows the
    model across devices.

    ``loss, parts = criterion(head_outputs, targets, img_size_hw)``:

    * ``head_outputs``: list, one per head, of raw maps Float[N, A, Hg, Wg, 5 + C] (training-mode output);
    * ``targets``: Float[M, 6] rows (image index, class, cx, cy, w, h), boxes in pixels of the network input;
    * ``img_size_hw``: the network input (H, W).

    Returns the scalar loss, summed over the batch and divided by ``N`` (per image), and a dict of detached
    per-image parts ``box``, ``obj``, ``cls`` (0-dim tensors) and ``num_targets`` (int: positive slots over
    all heads). The loss is computed in float32 with autocast disabled.
    """

    def __init__(self, model):
        heads = list(model.yolo_layers)
        if not heads:
            raise ValueError("the model has no detection heads to train")
        self.losses = []
        for index, head in enumerate(heads):
            head_type = _registered_type(head)
            if head_type is None:
                known = ", ".join(sorted(t.__name__ for t in HEAD_LOSSES))
                raise ValueError(f"head {index} ({type(head).__name__}): no training loss is registered for this "
                                 f"head type (registered: {known})")
            if HEAD_CHECKS.get(head_type) is not None:
                HEAD_CHECKS[head_type](head, index)
            if head.num_classes != heads[0].num_classes:
                raise ValueError(f"head {index}: classes={head.num_classes} differs from head 0 ({heads[0].num_classes})")
            self.losses.append(HEAD_LOSSES[head_type])
        self.heads = heads

    def __call__(self, head_outputs: Sequence[Tensor], targets: Tensor,
                 img_size_hw: Union[Tuple[int, int], Sequence[int]]) -> Tuple[Tensor, Dict[str, Union[Tensor, int]]]:
        if len(head_outputs) != len(self.heads):
            raise ValueError(f"expected {len(self.heads)} head outputs, got {len(head_outputs)}")
        img_size_hw = (int(img_size_hw[0]), int(img_size_hw[1]))
        batch_size = head_outputs[0].shape[0]
        device = head_outputs[0].device
        targets = targets.to(device=device, dtype=torch.float32).reshape(-1, 6)
        num_classes = self.heads[0].num_classes
        keep = usable_targets(targets, batch_size, img_size_hw, num_classes)
        totals = {"box": [], "obj": [], "cls": []}
        num_targets = 0
        with torch.autocast(device_type=device.type, enabled=False):
            for index, (head, fn, out) in enumerate(zip(self.heads, self.losses, head_outputs)):
                _check_output_shape(index, head, out)
                box, obj, cls, count = fn(head, out.float(), targets, keep, img_size_hw)
                totals["box"].append(box)
                totals["obj"].append(obj)
                totals["cls"].append(cls)
                num_targets += int(count)
        parts = {name: torch.stack(values).sum() / batch_size for name, values in totals.items()}
        loss = parts["box"] + parts["obj"] + parts["cls"]
        report: Dict[str, Union[Tensor, int]] = {name: value.detach() for name, value in parts.items()}
        report["num_targets"] = num_targets
        return loss, report


def _check_output_shape(index: int, head, out: Tensor) -> None:
    """``out`` must be Float[N, A, Hg, Wg, 5 + C] for the head's A anchors and C classes."""
    if out.ndim != 5 or out.shape[1] != head.num_anchors or out.shape[4] != 5 + head.num_classes:
        raise ValueError(f"head {index}: output shape {tuple(out.shape)} does not match "
                         f"{head.num_anchors} anchors x (5 + {head.num_classes} classes)")


def check_yolo_head(head, index: int) -> None:
    kind = str(head.opts.iou_loss).lower()
    if kind not in IOU_LOSSES:
        raise ValueError(f"head {index}: iou_loss={head.opts.iou_loss!r} is not one of {', '.join(IOU_LOSSES)}")


@register_head_loss(YOLOLayer, check=check_yolo_head)
def yolo_head_loss(head, out: Tensor, targets: Tensor, keep: Tensor,
                   img_size_hw: Tuple[int, int]) -> Tuple[Tensor, Tensor, Tensor, int]:
    """Summed (box, obj, cls) losses of one head over the batch and its number of positive slots."""
    batch, num_anchors, grid_h, grid_w, depth = out.shape
    num_classes, opts = head.num_classes, head.opts
    device = out.device
    grid_hw = (grid_h, grid_w)
    height, width = img_size_hw
    new_coords = int(opts.new_coords)
    scale_x_y = float(opts.scale_x_y)
    anchors = head.anchors.to(device=device, dtype=torch.float32)  # [A, 2]

    # Best IoU of every prediction with the truths of its image: drives ignore_thresh and truth_thresh.
    rows = keep.nonzero().squeeze(1)
    with torch.no_grad():
        gy_grid = torch.arange(grid_h, device=device, dtype=torch.float32).view(1, 1, grid_h, 1)
        gx_grid = torch.arange(grid_w, device=device, dtype=torch.float32).view(1, 1, 1, grid_w)
        pred_xyxy = decode_boxes(out[..., :4], anchors.view(1, num_anchors, 1, 1, 2), gx_grid, gy_grid,
                                 grid_hw, img_size_hw, scale_x_y, new_coords)
        best_iou, best_row = _best_truth(pred_xyxy.view(batch, -1, 4), cxcywh_to_xyxy(targets[rows, 2:6]),
                                         targets[rows, 0].long(), rows)
        best_iou = best_iou.view(batch, num_anchors, grid_h, grid_w)
        best_row = best_row.view(batch, num_anchors, grid_h, grid_w)

    # Positives: truth_thresh matches first, then the assignment, so that assigned truths win a shared slot.
    pieces = []
    if opts.truth_thresh < 1.0:
        b, a, gy, gx = (best_iou > opts.truth_thresh).nonzero(as_tuple=True)
        row = best_row[b, a, gy, gx]
        pieces.append((b, a, gy, gx, row, targets[row, 1].long()))
    pieces.append(_anchor_matches(targets, keep, head, img_size_hw, grid_hw))
    merged = [torch.cat(column) for column in zip(*pieces)]
    pos = _merge_slots(*merged, num_anchors, grid_hw, num_classes)

    # Objectness: negatives everywhere except ignored predictions; positives at assigned slots.
    obj_target = torch.zeros_like(best_iou)
    obj_weight = (best_iou <= opts.ignore_thresh).float()
    obj_target[pos.image, pos.anchor, pos.gy, pos.gx] = 1.0
    obj_weight[pos.image, pos.anchor, pos.gy, pos.gx] = 1.0
    obj_loss = opts.obj_normalizer * (_bce(out[..., 4], obj_target, bool(new_coords)) * obj_weight).sum()

    if len(pos) == 0:
        zero = out.sum() * 0.0  # keeps the graph connected and the dtype/device right
        return zero, obj_loss, zero, 0

    p = out[pos.image, pos.anchor, pos.gy, pos.gx]  # [K, 5 + C]
    truth = targets[pos.truth, 2:6]  # [K, 4] cx, cy, w, h
    anchor_wh = anchors[pos.anchor]  # [K, 2]

    # Classes (Darknet's label smoothing pulls both 0 and 1 towards 0.5).
    cls_target = pos.classes
    eps = float(opts.label_smooth_eps)
    if eps > 0:
        cls_target = cls_target * (1.0 - eps) + 0.5 * eps
    cls_loss = opts.cls_normalizer * _bce(p[:, 5:], cls_target, bool(new_coords)).sum()

    kind = str(opts.iou_loss).lower()
    if kind == "mse":
        xy = p[:, :2] if new_coords else p[:, :2].sigmoid()
        xy = xy * scale_x_y - 0.5 * (scale_x_y - 1.0)
        cell = torch.stack((pos.gx, pos.gy), dim=1).float()
        txy = truth[:, :2] * torch.tensor([grid_w / width, grid_h / height], device=device) - cell
        if new_coords:
            twh = torch.sqrt(truth[:, 2:4] / (4.0 * anchor_wh))
        else:
            twh = torch.log(truth[:, 2:4] / anchor_wh)
        scale = 2.0 - truth[:, 2] * truth[:, 3] / (width * height)
        sq = (xy - txy).pow(2).sum(1) + (p[:, 2:4] - twh).pow(2).sum(1)
        box_loss = opts.iou_normalizer * 0.5 * (scale * sq).sum()
    else:
        pred = decode_boxes(p[:, :4], anchor_wh, pos.gx.float(), pos.gy.float(), grid_hw, img_size_hw,
                            scale_x_y, new_coords)
        box_loss = opts.iou_normalizer * _iou_variant_loss(kind, pred, cxcywh_to_xyxy(truth)).sum()
    return box_loss, obj_loss, cls_loss, len(pos)


__all__ = ["YoloLoss", "HEAD_LOSSES", "register_head_loss", "yolo_head_loss", "check_yolo_head", "HeadTargets", "assign_targets", "usable_targets", "decode_boxes", "wh_iou",
           "elementwise_iou", "cxcywh_to_xyxy", "IOU_LOSSES"]
