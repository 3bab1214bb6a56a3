"""Training loss of a ``[detection]`` head (YOLOv1), equal to Darknet's src/detection_layer.c delta.

**Convention.** For the terms returned by :func:`detection_loss` (summed over the batch), ``-d(loss)/d(x)`` is
exactly Darknet's ``l.delta``, where ``x`` is the head input Float[N, K] (the [connected] output, before the
class softmax). :class:`yolo.losses.yolo_loss.YoloLoss` divides the sum by the batch, so for its per-image loss
``-N * d(loss)/d(x) == delta``. Darknet's backward adds ``l.delta`` to the input's delta unchanged: with
``softmax=1`` it does *not* go through the softmax's Jacobian, and ``class_scale * (t - p)`` is then the
negative gradient of ``class_scale * (logsumexp(x) - t . x)`` (the softmax cross-entropy), which is the term used.

**Truth** (Darknet's ``fill_truth_region``): a grid Float[N, side*side, 1 + C + 4] with per cell ``is_obj``, the
class one-hot and the box ``(x, y, w, h)``: x, y the centre's offset within the cell (0..1), w, h relative to the
image. Each box goes to the cell ``(int(x * side), int(y * side))`` of its centre; the *first* box of a cell
(in ``targets`` order) owns it, later ones are dropped; boxes narrower or lower than 0.001 of the image are dropped.

**Terms**, with ``p`` the layer output (x, class block softmaxed when ``softmax=1``), per image:

* every confidence: ``0.5 * noobject_scale * p^2``;
* in a cell with an object, the *responsible* box: the first one with the largest IoU with the truth (boxes
  compared as ``(x / side, y / side, w, h)``, squared w, h when ``sqrt=1``); when no box overlaps it, the first
  one with the smallest RMSE of the four values. ``forced=1``: box 1 for a truth of area < 0.1, else box 0.
  Its confidence term becomes ``0.5 * object_scale * (p - 1)^2`` (``rescore=1``: the target is that IoU, a
  constant), and it gets ``0.5 * coord_scale * |box - t|^2`` with ``t = (x, y, w, h)`` of the truth
  (``sqrt=1``: ``sqrt(w), sqrt(h)``);
* in a cell with an object, the class term: ``class_scale * CE`` with ``softmax=1`` (above), else
  ``0.5 * class_scale * |p - onehot|^2``.

Refused for training (:func:`check_detection_head`): ``random`` (Darknet picks the responsible box with C's
``rand()`` during the first 64000 images) and ``forced=1`` with ``num=1`` (Darknet indexes box 1 of one).
One guard departs from Darknet where it misbehaves: when no box overlaps the truth and every RMSE is at least 20,
Darknet's index stays -1 and it writes into the previous cell's values; here the smallest RMSE is taken anyway.
A centre on the right/bottom edge stays in the last cell (Darknet writes outside the grid).
"""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from yolo.losses.darknet_box import elementwise_cxcywh_iou
from yolo.losses.registry import register_head_loss
from yolo.losses.targets import to_device
from yolo.models.layer_types.detection import DetectionLayer, DetectionTrainOptions, detection_train_options

MIN_SIZE = 0.001  # fill_truth_region drops boxes narrower or lower than this (fraction of the image)
FORCED_AREA = 0.1  # forced=1: truths under this area go to box 1, the others to box 0
RMSE_LIMIT = 20.0  # Darknet's initial best_rmse


def check_detection_head(head: DetectionLayer, index: int) -> None:
    """Raise ``ValueError`` (with the cfg line) for a [detection] head whose options this loss cannot reproduce."""
    opts = getattr(head, "train_opts", None)
    if opts is None:
        raise ValueError(f"head {index}: [detection] head built without its training options")
    if opts.random:
        raise ValueError(f"{opts.where}: [detection] random={opts.random:g} picks the responsible box at random "
                         "(C rand()) during the first 64000 images: not reproduced, set random=0")
    if opts.forced and head.num < 2:
        raise ValueError(f"{opts.where}: [detection] forced=1 with num={head.num}: Darknet would use box 1 of one")


def darknet_truth_grid(targets: Tensor, keep: Tensor, batch: int, side: int, num_classes: int,
                       img_size_hw: Tuple[int, int]) -> Tensor:
    """Darknet's per-cell truth (``fill_truth_region``): Float[N, side*side, 1 + C + 4] (module docstring).

    ``targets`` Float[M, 6] (image, class, cx, cy, w, h in input pixels), ``keep`` Bool[M] the usable rows.
    """
    height, width = img_size_hw
    cells = side * side
    grid = torch.zeros(batch * cells, 1 + num_classes + 4, device=targets.device)
    x, y = targets[:, 2] / width, targets[:, 3] / height
    w, h = targets[:, 4] / width, targets[:, 5] / height
    rows = (keep & (w >= MIN_SIZE) & (h >= MIN_SIZE)).nonzero().squeeze(1)
    if rows.numel() == 0:
        return grid.reshape(batch, cells, -1)
    col = (x[rows] * side).long().clamp(0, side - 1)
    row = (y[rows] * side).long().clamp(0, side - 1)
    cell = targets[rows, 0].long() * cells + row * side + col
    # The first box of a cell owns it: the smallest row index per cell.
    first = torch.full((batch * cells,), rows.numel(), dtype=torch.long, device=targets.device)
    first = first.scatter_reduce(0, cell, torch.arange(rows.numel(), device=targets.device), reduce="amin")
    owner = first[first < rows.numel()]
    r, c = rows[owner], cell[owner]
    grid[c, 0] = 1.0
    grid[c, 1 + targets[r, 1].long()] = 1.0
    grid[c, 1 + num_classes:] = torch.stack((x[r] * side - col[owner], y[r] * side - row[owner], w[r], h[r]), 1)
    return grid.reshape(batch, cells, -1)


def responsible_boxes(boxes: Tensor, truth_box: Tensor, side: int, sqrt: bool, forced: bool) -> Tuple[Tensor, Tensor]:
    """For each cell, Darknet's responsible box and its IoU with the truth (no gradient).

    ``boxes`` Float[N, cells, B, 4] raw box outputs, ``truth_box`` Float[N, cells, 4] (cell offsets, image-relative
    w, h). Returns (Long[N, cells] box index, Float[N, cells] IoU of that box).
    """
    scale = to_device(torch.tensor([side, side, 1.0, 1.0]), boxes.device)
    pred = boxes / scale
    if sqrt:
        pred = torch.cat((pred[..., :2], pred[..., 2:] * pred[..., 2:]), -1)
    truth = (truth_box / scale).unsqueeze(2)
    iou = elementwise_cxcywh_iou(pred, truth)  # [N, cells, B]
    rmse = ((pred - truth) ** 2).sum(-1).sqrt()
    # Darknet's scan: the first largest IoU when some box overlaps, else the first smallest RMSE.
    best = torch.where((iou > 0).any(-1), iou.argmax(-1), rmse.argmin(-1))
    if forced:
        best = torch.where(truth_box[..., 2] * truth_box[..., 3] < FORCED_AREA, 1, 0)
    return best, iou.gather(-1, best.unsqueeze(-1)).squeeze(-1)


def detection_loss(head: DetectionLayer, out: Tensor, targets: Tensor, keep: Tensor,
                   img_size_hw: Tuple[int, int]) -> Tuple[Tensor, Tensor, Tensor, int]:
    """Summed (box, obj, cls) terms of one [detection] head over the batch, and its number of object cells.

    Args:
        head: the :class:`DetectionLayer` (with ``train_opts`` from :func:`detection_train_options`).
        out: Float[N, side*side*(5*num + C)] the head's training-mode output (its input, raw), float32.
        targets: Float[M, 6] (image, class, cx, cy, w, h in input pixels); ``keep`` Bool[M] the usable rows.
        img_size_hw: the network input (H, W) in pixels.
    """
    opts: DetectionTrainOptions = head.train_opts
    n, s, b, k = out.shape[0], head.side, head.num, head.num_classes
    cells = s * s
    logits = out[:, :cells * k].reshape(n, cells, k)
    conf = out[:, cells * k:cells * (k + b)].reshape(n, cells, b)
    boxes = out[:, cells * (k + b):cells * (k + b + 4 * b)].reshape(n, cells, b, 4)

    with torch.no_grad():
        # The truth grid and its object cells depend on the targets alone: built where they are (the CPU in
        # training, no wait for the GPU).
        host_truth = darknet_truth_grid(targets, keep, n, s, k, img_size_hw)
        image, cell = (to_device(v, out.device) for v in (host_truth[..., 0] > 0).nonzero(as_tuple=True))
        truth = to_device(host_truth, out.device)
        onehot, truth_box = truth[..., 1:1 + k], truth[..., 1 + k:]
        best, best_iou = responsible_boxes(boxes.detach(), truth_box, s, head.sqrt, bool(opts.forced))
        slot = best[image, cell]
        obj_target = torch.zeros_like(conf)
        obj_weight = torch.full_like(conf, opts.noobject_scale)
        obj_target[image, cell, slot] = best_iou[image, cell] if opts.rescore else 1.0
        obj_weight[image, cell, slot] = opts.object_scale
        box_target = truth_box[image, cell]
        if head.sqrt:
            box_target = torch.cat((box_target[:, :2], box_target[:, 2:].sqrt()), 1)

    obj = (0.5 * obj_weight * (conf - obj_target) ** 2).sum()
    box = 0.5 * opts.coord_scale * ((boxes[image, cell, slot] - box_target) ** 2).sum()
    scores, labels = logits[image, cell], onehot[image, cell]
    if head.softmax:  # gradient softmax(x) - t: Darknet's delta, which skips the softmax's Jacobian
        cls = opts.class_scale * (torch.logsumexp(scores, -1) - (labels * scores).sum(-1)).sum()
    else:
        cls = 0.5 * opts.class_scale * ((scores - labels) ** 2).sum()
    return box, obj, cls, int(image.numel())


@register_head_loss(DetectionLayer, check=check_detection_head)
def detection_head_loss(head: DetectionLayer, out: Tensor, targets: Tensor, keep: Tensor,
                        img_size_hw: Tuple[int, int]) -> Tuple[Tensor, Tensor, Tensor, int]:
    """The registered per-head loss: :func:`detection_loss`."""
    return detection_loss(head, out, targets, keep, img_size_hw)


__all__ = ["DetectionTrainOptions", "check_detection_head", "darknet_truth_grid", "detection_loss",
           "detection_train_options", "responsible_boxes"]
