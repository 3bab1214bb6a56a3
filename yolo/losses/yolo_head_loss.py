"""Training loss of a ``[yolo]`` head, whose gradient is Darknet's ``delta`` (registered for :class:`YOLOLayer`;
:class:`yolo.losses.yolo_loss.YoloLoss` sums it over the heads).

**Convention.** Darknet's [yolo] ``delta`` is the *negative* gradient, w.r.t. the layer's input (the previous
conv's output), of a loss *summed* over the batch; its CUDA backward (what Darknet users train with) adds
``loss_scale * delta_normalizer * delta``, and ``loss_scale`` is undone in the update (half-precision guard).
Our loss is *per image*, so for every element of the head input ``x`` of a batch of ``N`` images::

    -N * d(loss) / d(x) == delta_normalizer * delta

Darknet divides its learning rate by the batch, so its learning rates carry over, and gradient accumulation over
``k`` sub-batches is ``sum(loss_i) / k``. (tests/test_loss_darknet.py checks this against Darknet itself.)

**What Darknet's delta is** (src/yolo_layer.c, ``process_batch``; ``p`` is the layer's output: logistic x, y,
objectness and classes unless ``new_coords=1``, where the conv before applied it, then x, y scaled by
``scale_x_y``; w, h raw):

* *Every prediction*: objectness ``obj_normalizer * (0 - p)``. When the best IoU with a truth of its image
  exceeds ``ignore_thresh`` *and some class probability of the prediction exceeds 0.25*, it is 0 (with
  ``objectness_smooth``: the larger of that and ``obj_normalizer * (iou - p)``). When the best IoU exceeds
  ``truth_thresh``, the prediction becomes a positive of that truth (objectness ``1 - p``, or ``iou^2 - p``
  with ``objectness_smooth``), with class and box deltas as below.
* *Every truth*, in order: its best anchor among all anchors (centred-box IoU) and, with ``iou_thresh < 1``,
  every other anchor whose ``iou_thresh_kind`` IoU exceeds it, in this head's ``mask``, at cell
  ``(int(y * Hg), int(x * Wg))`` (:func:`darknet_assignments`). Each such write *adds* its box delta,
  *overwrites* the objectness delta with ``m * obj_normalizer * (1 - p)`` (so the last truth of a slot wins;
  with ``objectness_smooth`` only a zero delta is written), and sets classes: the first write of a slot sets
  every class to ``y - p`` (label smoothing ``y * (1 - eps) + eps / 2``; ``focal_loss``: Darknet's focal form),
  a later one only its own class, so classes of colliding truths unite.
* *Box*: ``iou_loss=mse``: ``(2 - w*h) * iou_normalizer * m * (t - p)`` for x, y, w, h (t: the truth's
  offset in its cell, ``log(w / anchor)``, or ``sqrt(w / (4 * anchor))`` with ``new_coords=1``); note that for
  x, y this is w.r.t. the logit *without* the sigmoid's derivative. Other ``iou_loss``: Darknet's closed-form
  ``dx_box_iou`` (:mod:`yolo.losses.darknet_box`), w and h multiplied by ``exp(tw)`` (not with ``new_coords=1``), times
  ``iou_normalizer * m``, clipped to ``max_delta``.
* ``m`` is the truth's class multiplier from ``counters_per_class`` (max count / count, capped at
  ``max_delta``), else 1. Darknet applies ``cls_normalizer`` only then, to the truth's class delta.
* With ``iou_thresh < 1`` every slot with an objectness delta has its box delta divided by its number of
  positive class deltas.
* ``random`` and ``resize`` change the network's input size, not this loss; ``show_details=0`` changes only
  Darknet's printed cost (to ``sum(delta^2)``), not the delta.

**Surrogate terms.** The x/y rule and ``dx_box_iou`` are not the gradient of any simple loss, so the delta is
built in closed form (without autograd) and each term is ``value + s - s.detach()`` with the surrogate
``s = -(x * delta_normalizer * delta).sum()``: its gradient is exactly the delta, and its *value* is Darknet's
cost (``show_details=1``, the default): ``box`` is the sum of squared box deltas for ``mse``, else
``iou_normalizer * sum(1 - IoU)`` over the assignments (``1 - GIoU`` for ``giou``; Darknet divides that by its
count, the fourth value a head returns); ``obj``/``cls`` are the sums of squared deltas (times
``obj_normalizer`` for the IoU losses). ``delta_normalizer`` scales the gradient, not the value, as in Darknet.

Truths whose centre lies outside the input, whose width or height is not positive, or whose values are not
finite are ignored. A class id outside ``[0, num_classes)`` or an image index outside the batch raises
``ValueError``: that is a data error, not something to train through silently. Two guards depart from Darknet
only where it would misbehave: a centre exactly on the right/bottom edge stays in the last cell (Darknet
writes outside the grid), and ``exp(tw)`` is evaluated with ``tw <= 20``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from yolo.losses.darknet_box import box_iou_kind as darknet_iou_kind
from yolo.losses.darknet_box import dx_box_iou
from yolo.losses.registry import register_head_loss
from yolo.losses.targets import darknet_assignments, padded_truths, slot_index, to_device
from yolo.models.heads import cell_grid
from yolo.models.layer_types.yolo_head import YOLOLayer, yolo_activation, yolo_boxes

IOU_LOSSES = ("mse", "iou", "giou", "diou", "ciou")

# exp(tw) is evaluated with tw clamped here: exp(20) is ~5e8 times the anchor, far beyond any input, and the
# clamp keeps areas finite in float32 when a diverging run produces huge logits.
_MAX_LOG_SCALE = 20.0
# Upper bound on the elements of one IoU block (images x predictions x truths) for the ignore test.
_IOU_BLOCK = 1 << 24


@dataclass
class YoloLossOptions:
    """The ``[yolo]`` options the loss reads, with Darknet's defaults; ``class_multipliers`` Float[C] or None
    comes from ``counters_per_class`` (max count / count, capped at ``max_delta``, as Darknet's parser)."""

    ignore_thresh: float
    truth_thresh: float
    iou_thresh: float
    iou_thresh_kind: str
    scale_x_y: float
    new_coords: int
    iou_loss: str
    iou_normalizer: float
    obj_normalizer: float
    cls_normalizer: float
    delta_normalizer: float
    max_delta: float
    label_smooth_eps: float
    objectness_smooth: int
    focal_loss: int
    class_multipliers: Optional[Tensor]

    @classmethod
    def of(cls, head) -> "YoloLossOptions":
        opts = head.opts
        get = lambda key, default: getattr(opts, key, default)  # noqa: E731  (heads built before an option existed)
        max_delta = float(get("max_delta", float("inf")))
        counters = str(get("counters_per_class", "") or "").strip()
        multipliers = None
        if counters:
            try:
                counts = [max(1, int(float(v))) for v in counters.split(",") if v.strip()]
            except ValueError:
                raise ValueError(f"counters_per_class={counters!r}: expected comma-separated integers") from None
            if len(counts) != head.num_classes:
                raise ValueError(f"counters_per_class has {len(counts)} values but classes={head.num_classes}")
            top = max(counts)
            multipliers = torch.tensor([min(top / c, max_delta) for c in counts], dtype=torch.float32)
        kind = str(get("iou_thresh_kind", "iou")).lower()
        return cls(float(opts.ignore_thresh), float(opts.truth_thresh), float(opts.iou_thresh),
                   kind if kind in ("iou", "giou", "diou", "ciou") else "iou",  # Darknet falls back to iou
                   float(opts.scale_x_y), int(opts.new_coords), str(opts.iou_loss).lower(),
                   float(opts.iou_normalizer), float(opts.obj_normalizer), float(opts.cls_normalizer),
                   float(get("delta_normalizer", 1.0)), max_delta, float(opts.label_smooth_eps),
                   int(get("objectness_smooth", 0)), int(get("focal_loss", 0)), multipliers)


def check_yolo_head(head, index: int) -> None:
    """Refuses a ``[yolo]`` head whose options the loss cannot train (``ValueError`` naming the option)."""
    kind = str(head.opts.iou_loss).lower()
    if kind not in IOU_LOSSES:
        raise ValueError(f"head {index}: iou_loss={head.opts.iou_loss!r} is not one of {', '.join(IOU_LOSSES)}")
    try:
        YoloLossOptions.of(head)
    except ValueError as exc:
        raise ValueError(f"head {index}: {exc}") from None


def _corners(boxes: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Left, right, top, bottom and area of centre boxes Float[..., 4], as Darknet computes them."""
    x, y, w, h = boxes.unbind(-1)
    return x - w / 2, x + w / 2, y - h / 2, y + h / 2, w * h


def _best_truths(pred: Tensor, boxes: Tensor, valid: Tensor) -> Tuple[Tensor, Tensor]:
    """Best Darknet IoU (:func:`yolo.losses.darknet_box.elementwise_cxcywh_iou`) of predictions Float[N, P, 4] with their image's truths Float[N, T, 4]
    and the first truth reaching it (0 when none overlaps, as Darknet's strict ``>`` scan from 0)."""
    n, p, _ = pred.shape
    t = boxes.shape[1]
    best = torch.zeros(n, p, device=pred.device)
    arg = torch.zeros(n, p, dtype=torch.long, device=pred.device)
    pl, pr, pt, pb, pa = (v[:, :, None] for v in _corners(pred))
    tl, tr, tt, tb, ta = (v[:, None, :] for v in _corners(boxes))
    step = max(1, _IOU_BLOCK // max(1, p * t))
    for s in range(0, n, step):  # blocks of images bound the memory of the [n', P, T] IoU table
        k = slice(s, s + step)
        ow = torch.minimum(pr[k], tr[k]) - torch.maximum(pl[k], tl[k])
        oh = torch.minimum(pb[k], tb[k]) - torch.maximum(pt[k], tt[k])
        inter = torch.where((ow < 0) | (oh < 0), 0.0, ow * oh)
        union = pa[k] + ta[k] - inter
        iou = torch.where((inter == 0) | (union == 0) | ~valid[k, None, :], 0.0, inter / union)
        best[k], arg[k] = iou.max(dim=2)
    arg = torch.where(best > 0, arg, torch.zeros_like(arg))
    return best, arg


def _class_delta_full(act_cls: Tensor, cls: Tensor, o: YoloLossOptions, mult: Tensor) -> Tensor:
    """Darknet's ``delta_yolo_class`` on a slot with no class delta yet: Float[K, C] for classes Long[K]."""
    onehot = F.one_hot(cls, act_cls.shape[-1]).to(act_cls.dtype)
    if o.focal_loss:
        pt = act_cls.gather(1, cls[:, None]) + 1e-15
        grad = -(1 - pt) * (2 * pt * torch.log(pt) + pt - 1)
        return (onehot - act_cls) * (0.5 * grad)
    y = onehot * (1 - o.label_smooth_eps) + 0.5 * o.label_smooth_eps if o.label_smooth_eps else onehot
    delta = y - act_cls
    if o.class_multipliers is not None:
        delta = delta * torch.where(onehot > 0, (mult * o.cls_normalizer)[:, None], torch.ones_like(delta))
    return delta


def _objectness_writes(d_obj: Tensor, p_obj: Tensor, tt_s: Tensor, tt_iou: Tensor, w_s: Tensor, w_mult: Tensor,
                       o: YoloLossOptions) -> Tensor:
    """Objectness deltas Float[S] (flat slots) after pass 1's ``d_obj``: ``truth_thresh`` positives at slots
    ``tt_s`` (IoU ``tt_iou``), then the assignments at ``w_s`` in order (class multipliers ``w_mult``): the
    last one of a slot wins; with ``objectness_smooth`` only a zero delta is written, by the first one.

    ``d_obj``, ``p_obj``, ``tt_s`` and ``tt_iou`` are on the maps' device; ``w_s`` and ``w_mult`` may be on the
    CPU, where the writers are sorted out (``unique``) without waiting for the GPU."""
    device = d_obj.device
    d_obj = d_obj.clone()
    if tt_s.numel():
        target = tt_iou * tt_iou if o.objectness_smooth else torch.ones_like(tt_iou)
        d_obj[tt_s] = o.obj_normalizer * (target - p_obj[tt_s])
    if w_s.numel():
        uniq, inv = torch.unique(w_s, return_inverse=True)
        pos = torch.arange(w_s.numel(), device=w_s.device)
        if o.objectness_smooth:
            pick = torch.full((uniq.numel(),), w_s.numel(), dtype=torch.long, device=w_s.device)
            pick = pick.scatter_reduce(0, inv, pos, reduce="amin")
        else:
            pick = torch.full((uniq.numel(),), -1, dtype=torch.long, device=w_s.device)
            pick = pick.scatter_reduce(0, inv, pos, reduce="amax")
        slots, mult = to_device(uniq, device), to_device(w_mult[pick], device)
        written = mult * o.obj_normalizer * (1 - p_obj[slots])
        if o.objectness_smooth:  # only where the delta is still zero (a test on the device, not a compaction)
            written = torch.where(d_obj[slots] == 0, written, d_obj[slots])
        d_obj[slots] = written
    return d_obj


def _class_writes(p_cls: Tensor, slots: Tensor, cls: Tensor, mult: Tensor, tt_iou: Tensor,
                  o: YoloLossOptions) -> Tuple[Tensor, Tensor]:
    """Class deltas of the written slots, Darknet's ``delta_yolo_class`` applied writer by writer.

    ``p_cls`` Float[S, C] the class outputs of every flat slot; ``slots``, ``cls``, ``mult`` Long/Float[K] the
    writers in order (the ``truth_thresh`` ones first, their IoUs ``tt_iou``). Returns the written slots
    Long[U] and their class deltas Float[U, C], both on ``p_cls``'s device: the first writer of a slot sets
    every class, a later one only its own class (a class delta is then already non-zero, which is Darknet's
    test). The writers may be on the CPU, where who came first is found without waiting for the GPU."""
    device = p_cls.device
    uniq, inv = torch.unique(slots, return_inverse=True)
    pos = torch.arange(slots.numel(), device=slots.device)
    first = torch.full((uniq.numel(),), slots.numel(), dtype=torch.long, device=slots.device)
    first = first.scatter_reduce(0, inv, pos, reduce="amin")
    later = torch.ones(slots.numel(), dtype=torch.bool, device=slots.device)
    later[first] = False
    tt_first = torch.nonzero(first < tt_iou.numel()).squeeze(1) if o.objectness_smooth else None
    rows, c, later_mult = inv[later], cls[later], mult[later]
    uniq, first, f_cls, f_mult = (to_device(v, device) for v in (uniq, first, cls[first], mult[first]))
    rows, c, later_mult = (to_device(v, device) for v in (rows, c, later_mult))
    p = p_cls[uniq]
    delta = _class_delta_full(p, f_cls, o, f_mult)
    if tt_first is not None:  # a truth_thresh writer then sets its class to iou^2 - p
        r = to_device(tt_first, device)
        delta[r, f_cls[r]] = f_mult[r] * (tt_iou[first[r]] ** 2 - p[r, f_cls[r]])
    y1 = 1.0 * (1 - o.label_smooth_eps) + 0.5 * o.label_smooth_eps if o.label_smooth_eps else 1.0
    delta[rows, c] = (y1 - p[rows, c]) * later_mult
    return uniq, delta


@register_head_loss(YOLOLayer, check=check_yolo_head)
def yolo_head_loss(head, out: Tensor, targets: Tensor, keep: Tensor,
                   img_size_hw: Tuple[int, int]) -> Tuple[Tensor, Tensor, Tensor, int]:
    """Darknet's [yolo] loss of one head, summed over the batch (see the module docstring).

    Builds Darknet's ``delta`` Float[N, A, Hg, Wg, 5 + C] in closed form, then returns surrogate terms whose
    gradient w.r.t. ``out`` is ``-delta * delta_normalizer`` and whose values are Darknet's cost terms.
    The last value is Darknet's ``count``: the (truth, anchor) assignments of this head.

    ``targets`` Float[M, 6] and ``keep`` Bool[M] may be on the CPU while ``out`` is on a GPU: what depends on
    the targets alone (their order per image, the assignments, which writer of a slot comes first or last) is
    worked out where they are, and only index tensors go to the GPU, so the loss does not wait for the GPU
    (except for ``truth_thresh < 1``, whose positives depend on the predictions).
    """
    o = YoloLossOptions.of(head)
    batch, num_anchors, grid_h, grid_w, depth = out.shape
    device, host = out.device, targets.device
    height, width = img_size_hw
    net_wh = to_device(torch.tensor([width, height], dtype=torch.float32), device)
    all_anchors = head.all_anchors.to(device=device, dtype=torch.float32) / net_wh  # [total, 2] normalized
    mask = to_device(torch.as_tensor(list(head.mask), dtype=torch.long), device)
    mult_all = o.class_multipliers.to(host) if o.class_multipliers is not None else None

    with torch.no_grad():
        act = yolo_activation(out.detach(), o.scale_x_y, o.new_coords)  # Darknet's layer output [N, A, H, W, K]
        pred = yolo_boxes(act, all_anchors[mask].view(1, num_anchors, 1, 1, 2),
                          cell_grid(grid_h, grid_w, device, torch.float32), (grid_h, grid_w), o.new_coords,
                          max_log_scale=_MAX_LOG_SCALE)

        # The truths, where the targets are: in their order in `targets` (Darknet's order per image).
        rows = keep.nonzero().squeeze(1)
        t_img = targets[rows, 0].long()
        t_cls = targets[rows, 1].long()
        host_wh = torch.tensor([width, height], device=host, dtype=torch.float32)
        t_box = targets[rows, 2:6] / torch.cat((host_wh, host_wh))  # normalized x, y, w, h
        t_mult = mult_all[t_cls] if mult_all is not None else torch.ones_like(t_box[:, 0])
        boxes, index, valid = padded_truths(t_box, t_img, batch)
        # Pass 2's assignments (truth by truth: best anchor over all anchors, then the iou_thresh extras, in
        # this head's mask) depend on the truths alone.
        w_t, w_a, w_j, w_i = darknet_assignments(t_box, head, o.iou_thresh, o.iou_thresh_kind, img_size_hw,
                                                 (grid_h, grid_w))
        w_b = t_img[w_t]
        count = int(w_t.numel())
        box_d, mult_d = to_device(t_box, device), to_device(t_mult, device)

        # Pass 1 (every prediction): objectness target 0, ignore_thresh, truth_thresh.
        best_iou, best_t = _best_truths(pred.view(batch, -1, 4), to_device(boxes, device), to_device(valid, device))
        best_iou = best_iou.view(batch, num_anchors, grid_h, grid_w)
        best_t = to_device(index, device).gather(1, best_t).view(batch, num_anchors, grid_h, grid_w)  # into rows
        p_obj = act[..., 4]
        d_obj = o.obj_normalizer * (0 - p_obj)
        # Darknet's ignore test counts a truth only when some class probability of the prediction exceeds 0.25.
        match_iou = torch.where((act[..., 5:] > 0.25).any(-1), best_iou, torch.zeros_like(best_iou))
        ignored = match_iou > o.ignore_thresh
        if o.objectness_smooth:
            d_obj = torch.where(ignored, torch.maximum(d_obj, o.obj_normalizer * (match_iou - p_obj)), d_obj)
        else:
            d_obj = torch.where(ignored, torch.zeros_like(d_obj), d_obj)

        # Writers: (slot, truth, anchor) triples that set box/objectness/class deltas, in Darknet's order: the
        # truth_thresh positives, then the assignments. The positives depend on the predictions: they are found
        # on the maps' device (off the CPU a sync), where the assignments then join them. With truth_thresh >= 1
        # (every shipped cfg) only an IoU above 1 makes one, which is rounding, for a prediction equal to a truth
        # to float precision: the CPU looks for them as Darknet does; a GPU, whose rounding is not Darknet's
        # anyway, takes it that there are none and saves the sync.
        tt_b = tt_a = tt_j = tt_i = tt_t = torch.zeros(0, dtype=torch.long, device=host)
        tt_iou = torch.zeros(0, device=device)
        if (o.truth_thresh < 1.0 or device == host) and t_box.numel():
            tt_b, tt_a, tt_j, tt_i = (best_iou > o.truth_thresh).nonzero(as_tuple=True)
            tt_t = best_t[tt_b, tt_a, tt_j, tt_i]
            tt_iou = best_iou[tt_b, tt_a, tt_j, tt_i]
            w_t, w_a, w_j, w_i, w_b, t_cls, t_mult = (to_device(v, device)
                                                      for v in (w_t, w_a, w_j, w_i, w_b, t_cls, t_mult))

        # Box deltas add up over every writer of a slot.
        all_b = torch.cat((tt_b, w_b))
        all_a = torch.cat((tt_a, w_a))
        all_j = torch.cat((tt_j, w_j))
        all_i = torch.cat((tt_i, w_i))
        all_t = torch.cat((tt_t, w_t))
        all_s = slot_index(all_b, all_a, all_j, all_i, num_anchors, (grid_h, grid_w))
        b_d, a_d, j_d, i_d, t_d, s_d = (to_device(v, device) for v in (all_b, all_a, all_j, all_i, all_t, all_s))
        anchors_px = head.all_anchors.to(device=device, dtype=torch.float32)[mask]
        box_delta, w_iou = _box_deltas(out.detach(), act, pred, b_d, a_d, j_d, i_d, box_d[t_d], mult_d[t_d],
                                       anchors_px[a_d], net_wh, o)
        delta = torch.zeros_like(act)
        flat = delta.view(-1, depth)
        flat[:, :4].index_add_(0, s_d, box_delta)

        # Objectness: truth_thresh slots, then the assignments.
        tt_s = slot_index(tt_b, tt_a, tt_j, tt_i, num_anchors, (grid_h, grid_w))
        w_s = slot_index(w_b, w_a, w_j, w_i, num_anchors, (grid_h, grid_w))
        flat[:, 4] = _objectness_writes(d_obj.reshape(-1), act[..., 4].reshape(-1), to_device(tt_s, device),
                                        tt_iou, w_s, t_mult[w_t], o)

        # Classes: the first writer of a slot sets every class; later writers set only their own class.
        if all_s.numel():
            uniq, cls_delta = _class_writes(act.reshape(-1, depth)[:, 5:], all_s, t_cls[all_t], t_mult[all_t],
                                            tt_iou, o)
            flat[uniq, 5:] = cls_delta
            if o.iou_thresh < 1.0:
                # Darknet averages the box delta of every slot with an objectness delta over its positive classes
                # (class deltas are non-zero only at written slots); dividing by 1 elsewhere changes nothing.
                n_pos = (cls_delta > 0).sum(1)
                avg = (flat[uniq, 4] != 0) & (n_pos > 0)
                flat[uniq, :4] = flat[uniq, :4] / torch.where(avg, n_pos, 1)[:, None].float()

        # Values: Darknet's cost terms (show_details=1): the squared deltas, and for the IoU losses the
        # summed 1 - IoU (1 - GIoU for giou) of the assignments with obj_normalizer on the rest. Box and class
        # deltas are non-zero only at written slots.
        written = to_device(torch.unique(all_s), device)
        if o.iou_loss == "mse":
            box_value = flat[written, :4].pow(2).sum()
            rest_scale = 1.0
        else:
            box_value = o.iou_normalizer * (1 - w_iou[tt_b.numel():]).sum()
            rest_scale = o.obj_normalizer
        obj_value = rest_scale * flat[:, 4].pow(2).sum()
        cls_value = rest_scale * flat[written, 5:].pow(2).sum()
        if o.delta_normalizer != 1.0:
            delta.mul_(o.delta_normalizer)
    box, obj, cls = _DeltaGradient.apply(out, delta, box_value, obj_value, cls_value)
    return box, obj, cls, count


class _DeltaGradient(torch.autograd.Function):
    """Returns the three values unchanged; backward gives ``out`` the gradient ``-delta``, its box channels
    (0..3) scaled by the first value's incoming gradient, objectness (4) by the second's, classes by the third's.

    This is the surrogate ``value + s - s.detach()`` with ``s = -(out * delta).sum()`` for each term, without
    the extra passes over the whole output that spelling it out would take."""

    @staticmethod
    def forward(ctx, out: Tensor, delta: Tensor, box: Tensor, obj: Tensor, cls: Tensor):
        ctx.save_for_backward(delta)
        return box.clone(), obj.clone(), cls.clone()

    @staticmethod
    def backward(ctx, g_box: Tensor, g_obj: Tensor, g_cls: Tensor):
        (delta,) = ctx.saved_tensors
        num_classes = delta.shape[-1] - 5
        scale = torch.cat((g_box.reshape(1).expand(4), g_obj.reshape(1), g_cls.reshape(1).expand(num_classes)))
        return -delta * scale.to(delta.dtype), None, None, None, None


def _box_deltas(raw: Tensor, act: Tensor, pred: Tensor, b: Tensor, a: Tensor, j: Tensor, i: Tensor,
                truth: Tensor, mult: Tensor, anchor_px: Tensor, net_wh: Tensor,
                o: YoloLossOptions) -> Tuple[Tensor, Tensor]:
    """Darknet's ``delta_yolo_box`` for K writers at slots (b, a, j, i) Long[K]: Float[K, 4] box deltas and
    Float[K] the IoU (GIoU for ``iou_loss=giou``) that Darknet's cost uses. ``truth`` Float[K, 4] normalized
    centre boxes, ``mult`` Float[K] their class multipliers, ``anchor_px`` Float[K, 2] the slots' anchors in
    pixels, ``net_wh`` the input (W, H)."""
    p_act = act[b, a, j, i]  # [K, K5]
    p_box = pred[b, a, j, i]  # [K, 4]
    scale = 2 - truth[:, 2] * truth[:, 3]
    iou = darknet_iou_kind(p_box, truth, "giou" if o.iou_loss == "giou" else "iou")
    if o.iou_loss == "mse":
        grid_h, grid_w = act.shape[2], act.shape[3]
        txy = torch.stack((truth[:, 0] * grid_w - i.float(), truth[:, 1] * grid_h - j.float()), 1)
        size = truth[:, 2:4] * net_wh  # truth w, h in input pixels, as Darknet's truth.w * net.w
        twh = torch.sqrt(size / (4 * anchor_px)) if o.new_coords else torch.log(size / anchor_px)
        target = torch.cat((txy, twh), 1)
        return (scale * o.iou_normalizer * mult)[:, None] * (target - p_act[:, :4]), iou
    p_box = p_box.clone()
    p_box[:, 2:4] = torch.where(p_box[:, 2:4] == 0, torch.ones_like(p_box[:, 2:4]), p_box[:, 2:4])
    d = dx_box_iou(p_box, truth, o.iou_loss)
    if not o.new_coords:
        d[:, 2:4] = d[:, 2:4] * raw[b, a, j, i, 2:4].clamp(max=_MAX_LOG_SCALE).exp()
    d = d * (o.iou_normalizer * mult)[:, None]
    d = torch.where(torch.isfinite(d), d, torch.zeros_like(d))
    if math.isfinite(o.max_delta):
        d = d.clamp(-o.max_delta, o.max_delta)
    return d, iou


__all__ = ["yolo_head_loss", "check_yolo_head", "YoloLossOptions", "IOU_LOSSES"]
