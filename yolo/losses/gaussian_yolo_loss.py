"""Training loss of a ``[Gaussian_yolo]`` head, equal to Darknet's src/gaussian_yolo_layer.c delta.

Convention: for the loss returned here (summed over the batch), ``-d(loss)/d(head input)`` is exactly Darknet's
``l.delta``; the head input is the conv output viewed as Float[N, A, H, W, 9+C] (channel order in
:mod:`yolo.models.layer_types.gaussian_yolo`). Darknet applies its deltas to the *raw* inputs without the logistic's
derivative, so:

* **Objectness and classes** are binary cross-entropies on the logits, whose gradient ``p - t`` is Darknet's
  ``t - p``. Objectness: target 0 with weight ``obj_normalizer`` everywhere, weight 0 where a prediction that
  holds some class above 0.25 has an IoU above ``ignore_thresh`` with a truth of its image, target 1 at the
  positive slots. Classes at positive slots: target ``1 * (1 - e) + 0.5 * e`` for every class of a truth
  assigned there, ``0.5 * e`` for the others (``e = label_smooth_eps``).
* **Box and uncertainties** (8 entries) use a surrogate: ``sum(-D * x) + const`` with ``D`` Darknet's
  closed-form delta (detached), so that its gradient is exactly ``-D``; its *value* is ``0.5 * sum(D^2)``,
  half of Darknet's cost over these entries. With ``iou_loss=mse`` D is the gradient of the Gaussian negative
  log-likelihood ``dx^2 / (2 sigma^2) + log(sigma + 0.3)`` (times ``0.5 * (2 - w*h)``, Darknet's
  ``normal / (normal + 1e-9)`` factor, ``iou_normalizer`` for the coordinates and ``uc_normalizer`` for the
  sigmas), taken w.r.t. the activated values; with ``iou``/``giou``/``diou``/``ciou`` the coordinates' D is
  Darknet's ``dx_box_iou`` (:mod:`yolo.losses.darknet_box`) times ``iou_normalizer``. Non-finite values become 0 and
  ``max_delta`` clips. Truths sharing a slot add their box deltas, which are then divided by the number of
  classes whose delta at that slot is positive (Darknet's averages_gaussian_yolo_deltas).

Positives: each truth goes to the anchor (among all of the cfg) whose centred box overlaps it best; if that anchor
is in this head's mask, to cell ``(int(x * W), int(y * H))`` (``yolo_point`` moves the point to a corner); with
``iou_thresh < 1`` also to every other anchor of the mask whose ``iou_thresh_kind`` overlap exceeds it. With
``truth_thresh < 1`` a prediction whose best IoU exceeds it is a positive for that truth.

Darknet's CPU path passes the delta on as it is; its CUDA path multiplies it by ``delta_normalizer``, which is
applied here (default 1). ``objectness_smooth``, ``counters_per_class`` and ``map`` are refused for training.
At most ``max`` truths per image take part (the first ones), as Darknet's truth buffer holds ``max`` rows.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from yolo.losses.darknet_box import box_iou_kind, dx_box_iou, elementwise_cxcywh_iou
from yolo.losses.registry import register_head_loss
from yolo.losses.targets import anchors_on, darknet_truth_rows, padded_truths, slot_index, to_device
from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer

SIGMA_CONST = 0.3  # Darknet's sigma_const: the Gaussian's normalizer uses sigma + 0.3
EPSILON = 1e-9
CLASS_MATCH = 0.25  # a prediction counts for ignore_thresh only if some class probability exceeds this


def check_gaussian_yolo_head(head: GaussianYOLOLayer, index: int) -> None:
    """Raise ``ValueError`` for options whose training semantics this loss does not reproduce."""
    opts = head.opts
    if opts.objectness_smooth:
        raise ValueError(f"{opts.where}: [Gaussian_yolo] objectness_smooth=1 is not supported for training")
    if opts.counters_per_class is not None:
        raise ValueError(f"{opts.where}: [Gaussian_yolo] counters_per_class is not supported for training")
    if opts.map:
        raise ValueError(f"{opts.where}: [Gaussian_yolo] map={opts.map} is not supported for training")


def _box_delta(act: Tensor, truth: Tensor, anchor_wh: Tensor, gi: Tensor, gj: Tensor, grid_hw: Tuple[int, int],
               img_size_hw: Tuple[int, int], opts) -> Tensor:
    """Darknet's delta_gaussian_yolo_box for K (slot, truth) pairs.

    ``act`` Float[K, 8] the activated box entries at the slot; ``truth`` Float[K, 4] normalized centre boxes;
    ``anchor_wh`` Float[K, 2] pixels; ``gi``/``gj`` Float[K] the cell. Returns Float[K, 8] in Darknet's channel
    order. All float32, with float64 exactly where Darknet's C expressions promote to double, so that the
    nearly cancelling terms of the uncertainty delta round as in Darknet.
    """
    f64 = torch.float64
    grid_h, grid_w = grid_hw
    height, width = img_size_hw
    x0, s0, x1, s1, x2, s2, x3, s3 = act.unbind(1)
    tx_, ty_, tw_, th_ = truth.unbind(1)
    pw = (torch.exp(x2.to(f64)) * anchor_wh[:, 0].to(f64) / width).float()
    ph = (torch.exp(x3.to(f64)) * anchor_wh[:, 1].to(f64) / height).float()
    px = (gi + x0) / grid_w
    py = (gj + x1) / grid_h
    tx = tx_ * grid_w - gi
    ty = ty_ * grid_h - gj
    if opts.yolo_point == "left_top":
        px, py = px + pw / 2, py + ph / 2
        tx, ty = (tx_ - tw_ / 2) * grid_w - gi, (ty_ - th_ / 2) * grid_h - gj
    elif opts.yolo_point == "right_bottom":
        px, py = px - pw / 2, py - ph / 2
        tx, ty = (tx_ + tw_ / 2) * grid_w - gi, (ty_ + th_ / 2) * grid_h - gj
    tw = torch.log((tw_ * width / anchor_wh[:, 0]).to(f64)).float()
    th = torch.log((th_ * height / anchor_wh[:, 1]).to(f64)).float()
    scale = 2 - tw_ * th_

    mus = torch.stack((x0, x1, x2, x3), 1)
    sigmas = torch.stack((s0, s1, s2, s3), 1)
    in_exp = (torch.stack((tx, ty, tw, th), 1) - mus) / sigmas
    in_exp2 = in_exp * in_exp
    shifted = sigmas + torch.tensor(SIGMA_CONST, dtype=torch.float32)
    normal = (torch.exp(in_exp2.to(f64) * -0.5) / (math.sqrt(math.pi * 2.0) * shifted.to(f64))).float()
    temp = (0.5 / (normal + torch.tensor(EPSILON, dtype=torch.float32)).to(f64) * normal.to(f64)
            * scale.to(f64)[:, None]).float()
    d_mu = ((temp * in_exp).to(f64) * (1.0 / sigmas.to(f64))).float()
    d_sigma = (temp.to(f64) * ((in_exp2 / sigmas).to(f64) - 1.0 / shifted.to(f64))).float()
    if opts.iou_loss != "mse":
        pred = torch.stack((px, py, torch.where(pw == 0, torch.ones_like(pw), pw),
                            torch.where(ph == 0, torch.ones_like(ph), ph)), 1)
        d = dx_box_iou(pred, truth, opts.iou_loss)
        dx, dy, dw, dh = d.unbind(1)
        if opts.yolo_point == "left_top":
            dx, dy = dx - dw / 2, dy - dh / 2
        elif opts.yolo_point == "right_bottom":
            dx, dy = dx + dw / 2, dy + dh / 2
        d_mu = torch.stack((dx, dy, (dw.to(f64) * torch.exp(x2.to(f64))).float(),
                            (dh.to(f64) * torch.exp(x3.to(f64))).float()), 1)
    d_mu = d_mu * torch.tensor(opts.iou_normalizer, dtype=torch.float32)
    d_sigma = d_sigma * torch.tensor(opts.uc_normalizer, dtype=torch.float32)
    delta = torch.stack((d_mu, d_sigma), 2).reshape(-1, 8)  # interleave: x, sx, y, sy, w, sw, h, sh
    delta = torch.where(torch.isfinite(delta), delta, torch.zeros_like(delta))
    if math.isfinite(opts.max_delta):
        delta = delta.clamp(-opts.max_delta, opts.max_delta)
    return delta


def gaussian_yolo_loss(head: GaussianYOLOLayer, out: Tensor, targets: Tensor, keep: Tensor,
                       img_size_hw: Tuple[int, int]) -> Tuple[Tensor, Tensor, Tensor, int]:
    """Summed (box, obj, cls) terms of one [Gaussian_yolo] head over the batch, and its number of positive slots.

    ``out`` Float[N, A, H, W, 9+C] raw head map (training-mode output); ``targets`` Float[M, 6] (image, class,
    cx, cy, w, h in input pixels) with ``keep`` Bool[M] the usable rows; ``img_size_hw`` the input (H, W).
    The ``box`` term holds the four coordinates and their four uncertainties.
    """
    opts = head.opts
    batch, num_anchors, grid_h, grid_w, _ = out.shape
    num_classes = head.num_classes
    device, host = out.device, targets.device
    height, width = img_size_hw
    all_anchors = head.all_anchors.to(device=device, dtype=torch.float64)  # [total, 2] pixels
    host_anchors = anchors_on(head, host).double()
    mask = to_device(torch.as_tensor(head.mask, dtype=torch.long), device)
    host_mask = torch.as_tensor(head.mask, dtype=torch.long, device=host)

    with torch.no_grad():
        act32 = head.activate(out.detach())  # Darknet's layer output
        act = act32.double()
        pred = head.boxes(act, img_size_hw, normalized=True)  # [N, A, H, W, 4]

        # The truths, where the targets are (the CPU in training: no wait for the GPU).
        rows = darknet_truth_rows(targets, keep, opts.max_boxes)
        truth_px = targets[rows].double()
        image = truth_px[:, 0].long()
        cls_id = truth_px[:, 1].long()
        tbox = torch.stack((truth_px[:, 2] / width, truth_px[:, 3] / height, truth_px[:, 4] / width,
                            truth_px[:, 5] / height), 1)

        # Objectness: 0 everywhere (weight obj_normalizer); ignored where a class-matching prediction overlaps
        # a truth above ignore_thresh; truth_thresh positives come from the best IoU of any prediction.
        # Each image's truths are padded to the largest count; the padding's IoU 0 comes after them, so it
        # never wins over a truth; an image without truths has no ignored or truth_thresh predictions.
        obj_weight = torch.full((batch, num_anchors, grid_h, grid_w), opts.obj_normalizer, device=device,
                                dtype=torch.float64)
        obj_target = torch.zeros_like(obj_weight)
        class_match = (act[..., 9:] > CLASS_MATCH).any(-1)
        boxes, index, valid = (to_device(v, device) for v in padded_truths(tbox, image, batch))
        ious = elementwise_cxcywh_iou(pred.unsqueeze(-2), boxes.view(batch, 1, 1, 1, -1, 4))  # [N, A, H, W, Tmax]
        ious = torch.where(valid.view(batch, 1, 1, 1, -1), ious, 0.0)
        best_iou, best_t = ious.max(-1)
        has_truths = valid.any(1).view(batch, 1, 1, 1)
        ignore = class_match & (best_iou > opts.ignore_thresh) & has_truths
        obj_weight = torch.where(ignore, 0.0, obj_weight)

        # Positive (slot, truth, anchor) rows, in the order Darknet visits them: the truth_thresh ones (they
        # depend on the predictions: found on the device, a sync; an IoU is at most 1, so with truth_thresh >= 1,
        # every shipped cfg, there are none), then each truth's anchors (the truths alone decide: found where
        # the targets are).
        pos_b, pos_a, pos_j, pos_i, pos_t, pos_n = [], [], [], [], [], []
        if opts.truth_thresh < 1.0 and rows.numel():
            b, a, j, i = ((best_iou > opts.truth_thresh) & has_truths).nonzero(as_tuple=True)
            for lst, v in zip((pos_b, pos_a, pos_j, pos_i, pos_t, pos_n),
                              (b, a, j, i, index[b, best_t[b, a, j, i]], mask[a])):
                lst.append(v)

        if rows.numel():
            gi = (tbox[:, 0] * grid_w).long()
            gj = (tbox[:, 1] * grid_h).long()
            if opts.yolo_point == "left_top":
                gi = ((tbox[:, 0] - tbox[:, 2] / 2) * grid_w).clamp(min=0).long()
                gj = ((tbox[:, 1] - tbox[:, 3] / 2) * grid_h).clamp(min=0).long()
            elif opts.yolo_point == "right_bottom":
                gi = ((tbox[:, 0] + tbox[:, 2] / 2) * grid_w).clamp(min=0).long()
                gj = ((tbox[:, 1] + tbox[:, 3] / 2) * grid_h).clamp(min=0).long()
            gi, gj = gi.clamp(0, grid_w - 1), gj.clamp(0, grid_h - 1)
            anchor_boxes = torch.cat((torch.zeros_like(host_anchors), host_anchors / torch.tensor(
                [width, height], device=host, dtype=torch.float64)), 1)  # [total, 4] centred, normalized
            centred = torch.cat((torch.zeros_like(tbox[:, :2]), tbox[:, 2:]), 1)
            best_n = elementwise_cxcywh_iou(anchor_boxes[None], centred[:, None]).argmax(1)  # [T], first maximum
            in_mask = best_n[:, None] == host_mask[None, :]  # [T, A]
            if opts.iou_thresh < 1.0:
                extra = box_iou_kind(anchor_boxes[host_mask][None], centred[:, None], opts.iou_thresh_kind)
                in_mask |= extra > opts.iou_thresh
            t, a = in_mask.nonzero(as_tuple=True)
            for lst, v in zip((pos_b, pos_a, pos_j, pos_i, pos_t, pos_n),
                              (image[t], a, gj[t], gi[t], t, host_mask[a])):
                lst.append(to_device(v, pos_b[0].device) if pos_b else v)  # beside the truth_thresh rows, if any

        delta_box = torch.zeros(batch, num_anchors, grid_h, grid_w, 8, device=device)
        cls_written = torch.zeros(batch, num_anchors, grid_h, grid_w, dtype=torch.bool, device=device)
        cls_target = torch.zeros(batch, num_anchors, grid_h, grid_w, num_classes, device=device,
                                 dtype=torch.float64)
        num_positive = 0
        written = torch.zeros(0, dtype=torch.long, device=device)  # the slots with class terms, flat and sorted
        if pos_b and sum(p.numel() for p in pos_b):
            b, a, j, i, t, n = (torch.cat(p) for p in (pos_b, pos_a, pos_j, pos_i, pos_t, pos_n))
            slot = slot_index(b, a, j, i, num_anchors, (grid_h, grid_w))
            written = torch.unique(slot)  # where the targets are unless truth_thresh positives joined
            num_positive = int(written.numel())
            b, a, j, i, t, n, slot, written = (to_device(v, device) for v in (b, a, j, i, t, n, slot, written))
            tbox_d, cls_d = to_device(tbox, device), to_device(cls_id, device)
            delta = _box_delta(act32[b, a, j, i, :8], tbox_d[t].float(), all_anchors[n].float(), i.float(),
                               j.float(), (grid_h, grid_w), img_size_hw, opts)
            flat = delta_box.view(-1, 8)
            flat.index_add_(0, slot, delta)
            obj_target[b, a, j, i] = 1.0
            obj_weight[b, a, j, i] = opts.obj_normalizer
            cls_written[b, a, j, i] = True
            cls_target[b, a, j, i, cls_d[t]] = 1.0  # the union of the classes assigned to the slot
        eps = opts.label_smooth_eps
        if eps:
            cls_target = cls_target * (1 - eps) + 0.5 * eps
        # Darknet divides a slot's box deltas by the number of classes whose delta there is positive.
        probs = act32[..., 9:]
        positive_classes = ((cls_target.float() - probs > 0) & cls_written[..., None]).sum(-1)
        delta_box = delta_box / positive_classes.clamp(min=1)[..., None].float()

    box_value = 0.5 * (delta_box ** 2).sum()
    box = -(delta_box * out[..., :8]).sum()
    box = box - box.detach() + box_value
    obj = (obj_weight.float() * F.binary_cross_entropy_with_logits(out[..., 8], obj_target.float(),
                                                                    reduction="none")).sum()
    # The class terms of the written slots, gathered in flat order (the order a cls_written mask lists them).
    cls = F.binary_cross_entropy_with_logits(out[..., 9:].reshape(-1, num_classes)[written],
                                             cls_target.reshape(-1, num_classes)[written].float(), reduction="sum")
    scale = opts.delta_normalizer
    return box * scale, obj * scale, cls * scale, num_positive


register_head_loss(GaussianYOLOLayer, check=check_gaussian_yolo_head)(gaussian_yolo_loss)
