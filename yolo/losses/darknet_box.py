"""Darknet's box overlap functions (src/box.c), vectorized: IoU and its variants, and ``dx_box_iou``, the
hand-written gradient Darknet's heads use for ``iou_loss=iou/giou/diou/ciou``.

Boxes are centre boxes Float[..., 4] ``(cx, cy, w, h)`` in any common unit (Darknet: fractions of the input);
shapes broadcast. Each function follows the C code step by step, including its special cases, so that
losses built on them reproduce Darknet's deltas.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _zero_where(cond: Tensor, value: Tensor) -> Tensor:
    return torch.where(cond, torch.zeros_like(value), value)


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` where ``den != 0``; callers mask the other places."""
    return num / torch.where(den == 0, torch.ones_like(den), den)


def elementwise_cxcywh_iou(a: Tensor, b: Tensor) -> Tensor:
    """Darknet's ``box_iou`` (src/box.c) of centre boxes ``a`` and ``b`` Float[..., 4] ``(cx, cy, w, h)``, pair by
    pair (shapes broadcast) -> Float[...]: intersection over union, 0 when either is 0. Not a matrix of every pair
    of xyxy boxes, as torchvision's ``box_iou`` (:mod:`yolo.ops.boxes`) is."""
    def overlap(c1, s1, c2, s2):
        return torch.minimum(c1 + s1 / 2, c2 + s2 / 2) - torch.maximum(c1 - s1 / 2, c2 - s2 / 2)

    ow = overlap(a[..., 0], a[..., 2], b[..., 0], b[..., 2])
    oh = overlap(a[..., 1], a[..., 3], b[..., 1], b[..., 3])
    inter = _zero_where((ow < 0) | (oh < 0), ow * oh)
    union = a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter
    return _zero_where((inter == 0) | (union == 0), _safe_div(inter, union))


def _enclosing(a: Tensor, b: Tensor):
    """Width and height of the smallest box holding both (Darknet's box_c)."""
    w = torch.maximum(a[..., 0] + a[..., 2] / 2, b[..., 0] + b[..., 2] / 2) - \
        torch.minimum(a[..., 0] - a[..., 2] / 2, b[..., 0] - b[..., 2] / 2)
    h = torch.maximum(a[..., 1] + a[..., 3] / 2, b[..., 1] + b[..., 3] / 2) - \
        torch.minimum(a[..., 1] - a[..., 3] / 2, b[..., 1] - b[..., 3] / 2)
    return w, h


def box_iou_kind(a: Tensor, b: Tensor, kind: str) -> Tensor:
    """Darknet's box_iou_kind: ``iou``, ``giou``, ``diou`` (with Darknet's exponent 0.6) or ``ciou``."""
    iou = elementwise_cxcywh_iou(a, b)
    if kind == "iou" or kind == "mse":
        return iou
    cw, ch = _enclosing(a, b)
    if kind == "giou":
        c = cw * ch
        union = a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - iou_intersection(a, b)
        return torch.where(c == 0, iou, iou - _safe_div(c - union, c))
    c = cw * cw + ch * ch
    dist = (a[..., 0] - b[..., 0]) ** 2 + (a[..., 1] - b[..., 1]) ** 2
    if kind == "diou":
        return torch.where(c == 0, iou, iou - torch.pow(_safe_div(dist, c), 0.6))
    if kind == "ciou":
        ar = 4 / (math.pi ** 2) * (torch.atan(b[..., 2] / b[..., 3]) - torch.atan(a[..., 2] / a[..., 3])) ** 2
        alpha = ar / (1 - iou + ar + 0.000001)
        return torch.where(c == 0, iou, iou - (_safe_div(dist, c) + alpha * ar))
    raise ValueError(f"unknown IoU kind {kind!r}")


def iou_intersection(a: Tensor, b: Tensor) -> Tensor:
    """Darknet's box_intersection (0 when the boxes do not overlap)."""
    def overlap(c1, s1, c2, s2):
        return torch.minimum(c1 + s1 / 2, c2 + s2 / 2) - torch.maximum(c1 - s1 / 2, c2 - s2 / 2)

    ow = overlap(a[..., 0], a[..., 2], b[..., 0], b[..., 2])
    oh = overlap(a[..., 1], a[..., 3], b[..., 1], b[..., 3])
    return _zero_where((ow < 0) | (oh < 0), ow * oh)


def dx_box_iou(pred: Tensor, truth: Tensor, kind: str) -> Tensor:
    """Darknet's dx_box_iou: Float[..., 4] ``(d/dx, d/dy, d/dw, d/dh)`` of the IoU variant ``kind`` w.r.t.
    the predicted centre box (the *ascent* direction: Darknet adds it to its delta as is).

    As in Darknet, ``w`` and ``h`` derivatives are not halved, and when the boxes do not overlap GIoU/DIoU/CIoU
    keep only their penalty term's gradient.
    """
    px, py, pw, ph = pred.unbind(-1)
    tx, ty, tw, th = truth.unbind(-1)
    top, bot, left, right = py - ph / 2, py + ph / 2, px - pw / 2, px + pw / 2
    p_t, p_b = torch.minimum(top, bot), torch.maximum(top, bot)
    p_l, p_r = torch.minimum(left, right), torch.maximum(left, right)
    t_t, t_b, t_l, t_r = ty - th / 2, ty + th / 2, tx - tw / 2, tx + tw / 2

    x_area = (p_b - p_t) * (p_r - p_l)
    x_hat = (t_b - t_t) * (t_r - t_l)
    ih = torch.minimum(p_b, t_b) - torch.maximum(p_t, t_t)
    iw = torch.minimum(p_r, t_r) - torch.maximum(p_l, t_l)
    inter = iw * ih
    union = x_area + x_hat - inter
    s = (px - tx) ** 2 + (py - ty) ** 2
    gc_w = torch.maximum(p_r, t_r) - torch.minimum(p_l, t_l)
    gc_h = torch.maximum(p_b, t_b) - torch.minimum(p_t, t_t)
    gc = gc_w * gc_h

    zero = torch.zeros_like(px)
    dx_t, dx_b, dx_l, dx_r = -(p_r - p_l), p_r - p_l, -(p_b - p_t), p_b - p_t
    di_t = torch.where(p_t > t_t, -iw, zero)
    di_b = torch.where(p_b < t_b, iw, zero)
    di_l = torch.where(p_l > t_l, -ih, zero)
    di_r = torch.where(p_r < t_r, ih, zero)
    du_t, du_b, du_l, du_r = dx_t - di_t, dx_b - di_b, dx_l - di_l, dx_r - di_r
    dc_t = torch.where(p_t < t_t, -gc_w, zero)
    dc_b = torch.where(p_b > t_b, gc_w, zero)
    dc_l = torch.where(p_l < t_l, -gc_h, zero)
    dc_r = torch.where(p_r > t_r, gc_h, zero)

    u2 = union * union
    pos = union > 0
    p_dt = torch.where(pos, _safe_div(union * di_t - inter * du_t, u2), zero)
    p_db = torch.where(pos, _safe_div(union * di_b - inter * du_b, u2), zero)
    p_dl = torch.where(pos, _safe_div(union * di_l - inter * du_l, u2), zero)
    p_dr = torch.where(pos, _safe_div(union * di_r - inter * du_r, u2), zero)
    # Corner selection of the prediction's min/max (Darknet's two sequential assignments leave p_db and p_dr
    # unchanged either way).
    p_dt = torch.where(top < bot, p_dt, p_db)
    p_dl = torch.where(left < right, p_dl, p_dr)

    apart = (iw <= 0) | (ih <= 0)
    if kind == "giou":
        gc2 = gc * gc
        terms = [_safe_div(gc * du - union * dc, gc2) for du, dc in
                 ((du_t, dc_t), (du_b, dc_b), (du_l, dc_l), (du_r, dc_r))]
        added = [p + torch.where(gc > 0, t, zero) for p, t in zip((p_dt, p_db, p_dl, p_dr), terms)]
        p_dt, p_db, p_dl, p_dr = [torch.where(apart, t, a) for t, a in zip(terms, added)]

    # Enclosing box of the centre boxes (for DIoU/CIoU), with its one-sided derivatives.
    c_t = torch.minimum(py - ph / 2, ty - th / 2)
    c_b = torch.maximum(py + ph / 2, ty + th / 2)
    c_l = torch.minimum(px - pw / 2, tx - tw / 2)
    c_r = torch.maximum(px + pw / 2, tx + tw / 2)
    cw, ch = c_r - c_l, c_b - c_t
    c = cw * cw + ch * ch
    one = torch.ones_like(px)
    dct_dy = torch.where(p_t < t_t, one, zero)
    dct_dh = torch.where(p_t < t_t, -0.5 * one, zero)
    dcb_dy = torch.where(p_b > t_b, one, zero)
    dcb_dh = torch.where(p_b > t_b, 0.5 * one, zero)
    dcl_dx = torch.where(p_l < t_l, one, zero)
    dcl_dw = torch.where(p_l < t_l, -0.5 * one, zero)
    dcr_dx = torch.where(p_r > t_r, one, zero)
    dcr_dw = torch.where(p_r > t_r, 0.5 * one, zero)
    dcw_dx, dcw_dw = dcr_dx - dcl_dx, dcr_dw - dcl_dw
    dch_dy, dch_dh = dcb_dy - dct_dy, dcb_dh - dct_dh

    p_dx = p_dl + p_dr
    p_dy = p_dt + p_db
    p_dw = p_dr - p_dl
    p_dh = p_db - p_dt
    if kind in ("diou", "ciou"):
        c2 = c * c
        # The derivatives of the distance penalty; d(Cw)/dy and d(Ch)/dx are 0 in Darknet.
        pen_x = _safe_div(2 * (tx - px) * c - (2 * cw * dcw_dx) * s, c2)
        pen_y = _safe_div(2 * (ty - py) * c - (2 * ch * dch_dy) * s, c2)
        pen_w = _safe_div((2 * cw * dcw_dw) * s, c2)
        pen_h = _safe_div((2 * ch * dch_dh) * s, c2)
        if kind == "ciou":
            ar_gap = torch.atan(tw / th) - torch.atan(pw / ph)
            ar_loss = 4 / (math.pi ** 2) * ar_gap * ar_gap
            alpha = ar_loss / (1 - _safe_div(inter, union) + ar_loss + 0.000001)
            pen_w = pen_w + alpha * (8 / (math.pi ** 2) * ar_gap * ph)
            pen_h = pen_h + alpha * (-8 / (math.pi ** 2) * ar_gap * pw)
        has_c = c > 0
        p_dx = torch.where(apart, pen_x, torch.where(has_c, p_dx + pen_x, p_dx))
        p_dy = torch.where(apart, pen_y, torch.where(has_c, p_dy + pen_y, p_dy))
        p_dw = torch.where(apart, pen_w, torch.where(has_c, p_dw + pen_w, p_dw))
        p_dh = torch.where(apart, pen_h, torch.where(has_c, p_dh + pen_h, p_dh))
    return torch.stack((p_dx, p_dy, p_dw, p_dh), -1)
