"""Training loss of a ``[region]`` head (YOLOv2), equal to Darknet's src/region_layer.c delta.

Convention: for the loss returned here (summed over the batch), ``-d(loss)/d(head input)`` is exactly Darknet's
``l.delta`` (the head input is the conv output, viewed as Float[N, A, H, W, 5+C]). Every term is a plain loss whose
gradient is that delta: Darknet's region deltas are gradients of squared errors and of a softmax cross-entropy.

Per image, with boxes normalized to the input (cx, cy, w, h in 0..1), cell ``(i, j)`` of a ``W x H`` grid, anchor
``n`` with ``(bw, bh)`` in grid cells (``absolute`` is read but has no effect: Darknet compiles DOABS=1), and the
prediction ``x = (i + sigmoid(tx)) / W``, ``y = (j + sigmoid(ty)) / H``, ``w = exp(tw) * bw / W``,
``h = exp(th) * bh / H``:

* **No object.** Every prediction: ``0.5 * noobject_scale * sigmoid(to)^2``, dropped where the prediction's best
  IoU with a truth of its image exceeds ``thresh``. ``classfix=-1``: the target is that best IoU instead, never
  dropped; ``classfix=1`` (``2``): such predictions also get the class term of that truth, scaled by 1 (by the
  objectness).
* **Prior** (only while fewer than 12800 images have been seen, Darknet's ``*net.seen < 12800``, counting the
  current batch): every prediction is pulled to its anchor at the cell centre,
  ``0.5 * 0.01 * ((sigmoid(tx) - .5)^2 + (sigmoid(ty) - .5)^2 + tw^2 + th^2)``.
* **Truths.** Each truth goes to cell ``(int(x * W), int(y * H))`` and to the anchor whose box (``bias_match=1``:
  the anchor, else the current prediction there), centred on the truth, overlaps it best (first maximum).
  That slot gets ``0.5 * coord_scale * ((sigmoid(tx) - tx*)^2 + (sigmoid(ty) - ty*)^2 + (tw - tw*)^2 +
  (th - th*)^2)`` with ``tx* = x * W - i``, ``tw* = log(w * W / bw)``; objectness
  ``0.5 * object_scale * (sigmoid(to) - 1)^2`` (``rescore=1``: the target is the IoU of the prediction with the
  truth, a constant); and the class term ``class_scale * CE(softmax(classes), one-hot)`` (``softmax=0``: Darknet
  leaves the class outputs raw, ``0.5 * class_scale * (c - one-hot)^2``; ``focal_loss=1``: the cross-entropy
  weighted by Darknet's constant factor ``0.5 * (1 - pt) * (1 - pt - 2 pt log pt)``). When several truths land
  on one slot, the last one in ``targets`` sets all of the slot's terms (Darknet overwrites).

At most ``max`` truths per image take part (the first ones), as Darknet's truth buffer holds ``max`` rows.
``tree`` (hierarchical softmax) and ``map`` are refused for training.
"""
from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from yolo.losses.darknet_box import elementwise_cxcywh_iou
from yolo.losses.registry import register_head_loss
from yolo.losses.targets import darknet_truth_rows, last_writers, padded_truths, slot_index, to_device
from yolo.models.layer_types.region import RegionLayer, RegionTrainOptions

PRIOR_IMAGES = 12800  # Darknet pulls predictions to their anchors while seen < 12800 images
PRIOR_SCALE = 0.01


def check_region_head(head: RegionLayer, index: int) -> None:
    """Raise ``ValueError`` for a [region] head whose options this loss cannot reproduce."""
    opts = getattr(head, "train_opts", None)
    if opts is None:
        raise ValueError(f"head {index}: [region] head built without its training options")
    for key in ("tree", "map"):
        if getattr(opts, key):
            raise ValueError(f"{opts.where}: [region] {key}={getattr(opts, key)} is not supported for training")
    if opts.focal_loss and not head.softmax:
        raise ValueError(f"{opts.where}: [region] focal_loss=1 needs softmax=1 for training")


def _class_loss(logits: Tensor, labels: Tensor, weight: Tensor, softmax: bool, focal: bool) -> Tensor:
    """Summed class term over K slots: ``logits`` Float[K, C], ``labels`` Long[K], ``weight`` Float[K]."""
    if logits.shape[0] == 0:
        return logits.sum() * 0.0
    onehot = F.one_hot(labels, logits.shape[1]).to(logits.dtype)
    if not softmax:
        return (weight[:, None] * 0.5 * (logits - onehot) ** 2).sum()
    log_p = torch.log_softmax(logits, dim=1)
    ce = -(onehot * log_p).sum(1)
    if focal:
        # Darknet scales the softmax delta by alpha * grad, grad = -(1 - pt) * (2 pt log pt + pt - 1), alpha = 0.5,
        # computed from the current probability: a constant factor of the cross-entropy's gradient.
        with torch.no_grad():
            pt = log_p.exp().gather(1, labels[:, None]).squeeze(1) + 1e-15
            factor = 0.5 * -(1 - pt) * (2 * pt * torch.log(pt) + pt - 1)
        weight = weight * factor
    return (weight * ce).sum()


def region_loss(head: RegionLayer, out: Tensor, targets: Tensor, keep: Tensor, img_size_hw: Tuple[int, int],
                seen: int) -> Tuple[Tensor, Tensor, Tensor, int]:
    """Summed (box, obj, cls) terms of one [region] head over the batch, and its number of positive slots.

    Args:
        head: the :class:`RegionLayer` (with ``train_opts`` from
            :func:`yolo.models.layer_types.region.region_train_options`).
        out: Float[N, A, H, W, 5+C] raw head map (training-mode output), float32.
        targets: Float[M, 6] (image, class, cx, cy, w, h in input pixels); ``keep`` Bool[M] the usable rows.
        img_size_hw: the network input (H, W) in pixels.
        seen: images trained on so far *including this batch* (Darknet's ``*net.seen`` at the forward pass);
            below 12800 the prior term is on.
    """
    opts: RegionTrainOptions = head.train_opts
    batch, num_anchors, grid_h, grid_w, _ = out.shape
    device, host = out.device, targets.device
    height, width = img_size_hw
    bias = head.anchors_cells.to(device=device, dtype=torch.float32)  # [A, 2] in grid cells
    sig_xy = torch.sigmoid(out[..., 0:2])
    sig_obj = torch.sigmoid(out[..., 4])

    with torch.no_grad():
        pred = head.region_boxes(out)  # [N, A, H, W, 4] normalized centre boxes
        # The truths, where the targets are (the CPU in training: no wait for the GPU).
        rows = darknet_truth_rows(targets, keep, opts.max_boxes)
        truth = targets[rows]
        image = truth[:, 0].long()
        cls_id = truth[:, 1].long()
        tbox = torch.stack((truth[:, 2] / width, truth[:, 3] / height, truth[:, 4] / width, truth[:, 5] / height), 1)

        # Best IoU of every prediction with the truths of its own image (first maximum, as the strict '>' scan),
        # over each image's truths padded to the largest count: the padding's IoU 0 comes after them, so it
        # never wins over a truth, and an image without truths gets IoU 0 and class 0.
        boxes, index, valid = padded_truths(tbox, image, batch)
        pad_cls = torch.where(valid, cls_id[index], 0) if rows.numel() else torch.zeros_like(index)
        boxes, pad_cls = to_device(boxes, device), to_device(pad_cls, device)
        ious = elementwise_cxcywh_iou(pred.unsqueeze(-2), boxes.view(batch, 1, 1, 1, -1, 4))  # [N, A, H, W, Tmax]
        ious = torch.where(to_device(valid, device).view(batch, 1, 1, 1, -1), ious, 0.0)
        best_iou, arg = ious.max(-1)
        best_cls = pad_cls.gather(1, arg.view(batch, -1)).view_as(arg)

        # Objectness: target 0 (classfix=-1: the best IoU), weight noobject_scale, 0 where ignored.
        obj_target = torch.zeros_like(sig_obj)
        obj_weight = torch.full_like(sig_obj, opts.noobject_scale)
        cls_weight = torch.zeros_like(sig_obj)
        cls_target = best_cls.clone()
        if opts.classfix == -1:
            obj_target = best_iou.clone()
        else:
            matched = best_iou > opts.thresh
            obj_weight = torch.where(matched, 0.0, obj_weight)
            if opts.classfix > 0:
                matched_weight = opts.class_scale * (sig_obj if opts.classfix == 2 else 1.0)
                cls_weight = torch.where(matched, matched_weight, cls_weight)

        # Box: the prior term everywhere while seen < 12800, else nothing, before the truths' slots.
        box_target = torch.zeros_like(out[..., :4])
        box_target[..., :2] = 0.5
        box_weight = torch.full_like(sig_obj, PRIOR_SCALE if seen < PRIOR_IMAGES else 0.0)

        # Truths -> slots: cell of the centre, best anchor by centred IoU; the last truth on a slot wins.
        # With bias_match=1 (every shipped cfg) the anchor depends on the truths alone and this runs where they
        # are; with bias_match=0 it depends on the predictions and the slots are sorted out on the device.
        num_positive = 0
        # The written slots Long[U] (flat, sorted) where the targets are; None when only the device knows them.
        written = torch.zeros(0, dtype=torch.long, device=host) if opts.bias_match else None
        if rows.numel():
            gi = (tbox[:, 0] * grid_w).long().clamp(0, grid_w - 1)
            gj = (tbox[:, 1] * grid_h).long().clamp(0, grid_h - 1)
            if opts.bias_match:
                host_bias = head.host_anchors_cells if host.type == "cpu" and bias.device != host else bias.to(host)
                shape = (host_bias / torch.tensor([grid_w, grid_h], device=host)).expand(len(rows), -1, -1)
            else:
                image, gj, gi, tbox, cls_id = (to_device(v, device) for v in (image, gj, gi, tbox, cls_id))
                shape = pred[image, :, gj, gi, 2:4]  # [T, A, 2] predicted w, h at the truth's cell
            zeros = torch.zeros_like(shape)
            centred = torch.cat((zeros, shape), -1)
            t_centred = torch.cat((torch.zeros_like(tbox[:, :2]), tbox[:, 2:]), 1)[:, None, :]
            anchor = elementwise_cxcywh_iou(centred, t_centred).argmax(1)  # first maximum; 0 when every IoU is 0

            unique, _, winner = last_writers(slot_index(image, anchor, gj, gi, num_anchors, (grid_h, grid_w)))
            written = unique if opts.bias_match else None
            b, a, j, i, t, c = (to_device(v, device) for v in (image[winner], anchor[winner], gj[winner],
                                                                gi[winner], tbox[winner], cls_id[winner]))
            box_target[b, a, j, i] = torch.stack((t[:, 0] * grid_w - i, t[:, 1] * grid_h - j,
                                                  torch.log(t[:, 2] * grid_w / bias[a, 0]),
                                                  torch.log(t[:, 3] * grid_h / bias[a, 1])), 1)
            box_weight[b, a, j, i] = opts.coord_scale
            obj_target[b, a, j, i] = elementwise_cxcywh_iou(pred[b, a, j, i], t) if opts.rescore else 1.0
            obj_weight[b, a, j, i] = opts.object_scale
            cls_target[b, a, j, i] = c
            cls_weight[b, a, j, i] = opts.class_scale
            num_positive = int(unique.numel())

    coords = torch.cat((sig_xy, out[..., 2:4]), -1)
    box = (box_weight * 0.5 * ((coords - box_target) ** 2).sum(-1)).sum()
    obj = (obj_weight * 0.5 * (sig_obj - obj_target) ** 2).sum()
    num_classes = out.shape[-1] - 5
    if opts.classfix > 0 or written is None:
        # The slots with a class term depend on the predictions: found on the device.
        has_cls = cls_weight != 0
        cls = _class_loss(out[..., 5:][has_cls], cls_target[has_cls], cls_weight[has_cls], head.softmax,
                          bool(opts.focal_loss))
    else:
        # Only the truths' slots (sorted, as a mask would list them) have a class term, unless class_scale=0.
        slots = to_device(written if opts.class_scale != 0 else written[:0], device)
        cls = _class_loss(out[..., 5:].reshape(-1, num_classes)[slots], cls_target.reshape(-1)[slots],
                          cls_weight.reshape(-1)[slots], head.softmax, bool(opts.focal_loss))
    return box, obj, cls, num_positive


@register_head_loss(RegionLayer, check=check_region_head, images_seen=True)
def region_head_loss(head: RegionLayer, out: Tensor, targets: Tensor, keep: Tensor,
                     img_size_hw: Tuple[int, int], images_seen: int = 0) -> Tuple[Tensor, Tensor, Tensor, int]:
    """The registered per-head loss: :func:`region_loss` with ``seen``, the criterion's ``images_seen``."""
    return region_loss(head, out, targets, keep, img_size_hw, seen=int(images_seen))
