"""YOLO loss: assignment and loss values against a plain-Python reference of Darknet's rules.

The reference below loops over truths, anchors and every prediction slot with Python floats; the
vectorized loss in ``yolo.losses`` must agree with it on small random cases over several seeds.
"""
import math
from typing import List

import pytest
import torch
from torch import nn

from yolo.losses.registry import HEAD_CHECKS, HEAD_LOSSES, register_head_loss
from yolo.losses.targets import assign_targets
from yolo.losses.yolo_head_loss import check_yolo_head, yolo_head_loss
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.heads import HeadOptions

from conftest import asset

IMG_HW = (64, 96)
NUM_CLASSES = 3
# Three heads like yolov3 (strides 32, 16, 8), anchors scaled to the small input.
ANCHORS = [(3, 4), (5, 9), (11, 8), (10, 20), (20, 15), (19, 38), (36, 28), (48, 60), (90, 62)]
MASKS = [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
STRIDES = [32, 16, 8]


class FakeHead:
    """Carries the attributes the loss reads from a model's [yolo] head."""

    def __init__(self, mask, anchors=ANCHORS, num_classes=NUM_CLASSES, **opts):
        self.all_anchors = torch.tensor(anchors, dtype=torch.float32)
        self.mask = list(mask)
        self.anchors = self.all_anchors[self.mask]
        self.num_anchors = len(self.mask)
        self.num_classes = num_classes
        self.opts = HeadOptions(**opts)


@pytest.fixture(autouse=True)
def fake_heads_train_with_the_yolo_loss():
    """While a test runs, the fake heads train with the [yolo] loss; afterwards the loss registry is as it was
    (so neither they nor a test's own head types stay registered for other tests)."""
    saved = dict(HEAD_LOSSES), dict(HEAD_CHECKS)
    register_head_loss(FakeHead, check=check_yolo_head)(yolo_head_loss)
    yield
    for registry, before in zip((HEAD_LOSSES, HEAD_CHECKS), saved):
        registry.clear()
        registry.update(before)


class FakeModel:
    def __init__(self, heads):
        self.yolo_layers = heads


def make_heads(**opts) -> List[FakeHead]:
    return [FakeHead(mask, **opts) for mask in MASKS]


def grids(img_hw=IMG_HW):
    return [(img_hw[0] // s, img_hw[1] // s) for s in STRIDES]


def random_targets(gen: torch.Generator, batch: int, count: int, img_hw=IMG_HW) -> torch.Tensor:
    """Random truths, plus collisions (same cell, other class), bad boxes and boxes outside the input."""
    h, w = img_hw
    image = torch.randint(0, batch, (count,), generator=gen).float()
    cls = torch.randint(0, NUM_CLASSES, (count,), generator=gen).float()
    cx = torch.rand(count, generator=gen) * w
    cy = torch.rand(count, generator=gen) * h
    bw = torch.rand(count, generator=gen) * w * 0.9 + 1
    bh = torch.rand(count, generator=gen) * h * 0.9 + 1
    t = torch.stack((image, cls, cx, cy, bw, bh), dim=1)
    # Near-copies of some rows: same slot, another class -> exercises "later wins" and class union.
    dup = t[: count // 3].clone()
    dup[:, 1] = (dup[:, 1] + 1) % NUM_CLASSES
    dup[:, 2:4] += 0.3
    dup[:, 4:6] *= 1.02
    bad = torch.tensor([
        [0, 0, -5.0, 10.0, 10.0, 10.0],   # centre left of the input
        [0, 1, 10.0, h + 3.0, 10.0, 10.0],  # centre below the input
        [0, 2, 10.0, 10.0, 0.0, 12.0],    # zero width
        [0, 2, 10.0, 10.0, 12.0, -1.0],   # negative height
        [0, 1, float("nan"), 10.0, 5.0, 5.0],
    ])
    bad[:, 0] = batch - 1
    rows = torch.cat((t, dup, bad))
    return rows[torch.randperm(rows.shape[0], generator=gen)]


# ------------------------------------------------------------------------------ plain-Python reference
def ref_wh_iou(w1, h1, w2, h2):
    inter = min(w1, w2) * min(h1, h2)
    union = w1 * h1 + w2 * h2 - inter
    return inter / union if union > 0 else 0.0


def ref_usable(row, img_hw):
    _, _, cx, cy, w, h = row
    if not all(math.isfinite(v) for v in row):
        return False
    return w > 0 and h > 0 and 0 <= cx <= img_hw[1] and 0 <= cy <= img_hw[0]


def ref_assignment(targets, heads, grid_list, img_hw):
    """{(head, image, anchor, gy, gx): [truth row, set of classes]}: Darknet's loop, truth by truth."""
    slots = {}
    height, width = img_hw
    for t, row in enumerate(targets.tolist()):
        if not ref_usable(row, img_hw):
            continue
        b, c, cx, cy, w, h = row
        for hi, head in enumerate(heads):
            grid_h, grid_w = grid_list[hi]
            ious = [ref_wh_iou(w, h, aw, ah) for aw, ah in head.all_anchors.tolist()]
            best_n, best = 0, 0.0
            for n, iou in enumerate(ious):
                if iou > best:
                    best, best_n = iou, n
            gx = min(int(cx / width * grid_w), grid_w - 1)
            gy = min(int(cy / height * grid_h), grid_h - 1)
            for a, n in enumerate(head.mask):
                extra = head.opts.iou_thresh < 1.0 and n != best_n and ious[n] > head.opts.iou_thresh
                if n == best_n or extra:
                    key = (hi, int(b), a, gy, gx)
                    if key in slots:
                        slots[key][0] = t
                        slots[key][1].add(int(c))
                    else:
                        slots[key] = [t, {int(c)}]
    return slots


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


# Darknet's box functions on centre boxes (x, y, w, h), transcribed from src/box.c.
def dn_overlap(x1, w1, x2, w2):
    return min(x1 + w1 / 2, x2 + w2 / 2) - max(x1 - w1 / 2, x2 - w2 / 2)


def dn_inter(a, b):
    w, h = dn_overlap(a[0], a[2], b[0], b[2]), dn_overlap(a[1], a[3], b[1], b[3])
    return 0.0 if w < 0 or h < 0 else w * h


def dn_iou(a, b):
    i = dn_inter(a, b)
    u = a[2] * a[3] + b[2] * b[3] - i
    return 0.0 if i == 0 or u == 0 else i / u


def dn_enclosing(a, b):
    w = max(a[0] + a[2] / 2, b[0] + b[2] / 2) - min(a[0] - a[2] / 2, b[0] - b[2] / 2)
    h = max(a[1] + a[3] / 2, b[1] + b[3] / 2) - min(a[1] - a[3] / 2, b[1] - b[3] / 2)
    return w, h


def dn_giou(a, b):
    w, h = dn_enclosing(a, b)
    c, iou = w * h, dn_iou(a, b)
    u = a[2] * a[3] + b[2] * b[3] - dn_inter(a, b)
    return iou if c == 0 else iou - (c - u) / c


def dn_dx_iou(p, t, kind):
    """Darknet's dx_box_iou: (dx, dy, dw, dh)."""
    top, bot, left, right = p[1] - p[3] / 2, p[1] + p[3] / 2, p[0] - p[2] / 2, p[0] + p[2] / 2
    pt, pb, pl, pr = min(top, bot), max(top, bot), min(left, right), max(left, right)
    tt, tb, tl, tr = t[1] - t[3] / 2, t[1] + t[3] / 2, t[0] - t[2] / 2, t[0] + t[2] / 2
    X = (pb - pt) * (pr - pl)
    Xhat = (tb - tt) * (tr - tl)
    Ih = min(pb, tb) - max(pt, tt)
    Iw = min(pr, tr) - max(pl, tl)
    I = Iw * Ih
    U = X + Xhat - I
    S = (p[0] - t[0]) ** 2 + (p[1] - t[1]) ** 2
    gcw = max(pr, tr) - min(pl, tl)
    gch = max(pb, tb) - min(pt, tt)
    gC = gcw * gch
    dX = {"t": -(pr - pl), "b": pr - pl, "l": -(pb - pt), "r": pb - pt}
    dI = {"t": -Iw if pt > tt else 0.0, "b": Iw if pb < tb else 0.0,
          "l": -Ih if pl > tl else 0.0, "r": Ih if pr < tr else 0.0}
    dU = {k: dX[k] - dI[k] for k in dX}
    dC = {"t": -gcw if pt < tt else 0.0, "b": gcw if pb > tb else 0.0,
          "l": -gch if pl < tl else 0.0, "r": gch if pr > tr else 0.0}
    d = {k: ((U * dI[k]) - (I * dU[k])) / (U * U) if U > 0 else 0.0 for k in dX}
    if not top < bot:
        d["t"] = d["b"]
    if not left < right:
        d["l"] = d["r"]
    if kind == "giou":
        if gC > 0:
            d = {k: d[k] + ((gC * dU[k]) - (U * dC[k])) / (gC * gC) for k in d}
        if Iw <= 0 or Ih <= 0:
            d = {k: ((gC * dU[k]) - (U * dC[k])) / (gC * gC) for k in d}
    Cw, Ch = dn_enclosing(p, t)
    C = Cw * Cw + Ch * Ch
    dcw_dx = (1.0 if pr > tr else 0.0) - (1.0 if pl < tl else 0.0)
    dcw_dw = (0.5 if pr > tr else 0.0) - (-0.5 if pl < tl else 0.0)
    dch_dy = (1.0 if pb > tb else 0.0) - (1.0 if pt < tt else 0.0)
    dch_dh = (0.5 if pb > tb else 0.0) - (-0.5 if pt < tt else 0.0)
    g = [d["l"] + d["r"], d["t"] + d["b"], d["r"] - d["l"], d["b"] - d["t"]]
    if kind in ("diou", "ciou"):
        extra = [(2 * (t[0] - p[0]) * C - (2 * Cw * dcw_dx) * S) / (C * C),
                 (2 * (t[1] - p[1]) * C - (2 * Ch * dch_dy) * S) / (C * C),
                 (2 * Cw * dcw_dw) * S / (C * C), (2 * Ch * dch_dh) * S / (C * C)]
        if kind == "ciou":
            diff = math.atan(t[2] / t[3]) - math.atan(p[2] / p[3])
            ar = 4 / math.pi ** 2 * diff * diff
            alpha = ar / (1 - I / U + ar + 0.000001)
            extra[2] += alpha * 8 / math.pi ** 2 * diff * p[3]
            extra[3] += alpha * -8 / math.pi ** 2 * diff * p[2]
        if C > 0:
            g = [gi + ei for gi, ei in zip(g, extra)]
        if Iw <= 0 or Ih <= 0:
            g = extra
    return g


def ref_darknet_delta(out, targets, head, img_hw):
    """Darknet's forward_yolo_layer for one head, loop by loop (src/yolo_layer.c, process_batch), with the
    options the CASES use. ``out`` nested lists [N][A][H][W][5 + C] (the layer's input). Returns the delta
    (same nesting, CPU convention, before delta_normalizer), Darknet's count and its sum of 1 - IoU (1 - GIoU
    for giou) over the assignments."""
    o = head.opts
    height, width = img_hw
    batch, num_a, gh, gw = len(out), len(out[0]), len(out[0][0]), len(out[0][0][0])
    nc = head.num_classes
    s = o.scale_x_y
    anchors = head.all_anchors.tolist()
    act = [[[[None] * gw for _ in range(gh)] for _ in range(num_a)] for _ in range(batch)]
    for b in range(batch):
        for a in range(num_a):
            for j in range(gh):
                for i in range(gw):
                    v = out[b][a][j][i]
                    f = (lambda z: z) if o.new_coords else sigmoid
                    act[b][a][j][i] = [f(v[0]) * s - (s - 1) / 2, f(v[1]) * s - (s - 1) / 2, v[2], v[3]] + \
                        [f(z) for z in v[4:]]
    delta = [[[[[0.0] * (5 + nc) for _ in range(gw)] for _ in range(gh)] for _ in range(num_a)] for _ in range(batch)]
    truths = [[] for _ in range(batch)]
    for r in targets.tolist():
        if ref_usable(r, img_hw):
            truths[int(r[0])].append(((r[2] / width, r[3] / height, r[4] / width, r[5] / height), int(r[1])))

    def pred_box(b, a, j, i, n):
        x = act[b][a][j][i]
        aw, ah = anchors[n]
        if o.new_coords:
            return ((i + x[0]) / gw, (j + x[1]) / gh, x[2] * x[2] * 4 * aw / width, x[3] * x[3] * 4 * ah / height)
        return ((i + x[0]) / gw, (j + x[1]) / gh, math.exp(x[2]) * aw / width, math.exp(x[3]) * ah / height)

    def delta_box(truth, b, a, j, i, n):
        pred = pred_box(b, a, j, i, n)
        x = act[b][a][j][i]
        d = delta[b][a][j][i]
        scale = 2 - truth[2] * truth[3]
        iou = dn_giou(pred, truth) if o.iou_loss == "giou" else dn_iou(pred, truth)
        if o.iou_loss == "mse":
            aw, ah = anchors[n]
            tx, ty = truth[0] * gw - i, truth[1] * gh - j
            if o.new_coords:
                tw, th = math.sqrt(truth[2] * width / (4 * aw)), math.sqrt(truth[3] * height / (4 * ah))
            else:
                tw, th = math.log(truth[2] * width / aw), math.log(truth[3] * height / ah)
            for k, t in enumerate((tx, ty, tw, th)):
                d[k] += scale * (t - x[k]) * o.iou_normalizer
            return iou
        pred = (pred[0], pred[1], pred[2] or 1.0, pred[3] or 1.0)
        g = dn_dx_iou(pred, truth, o.iou_loss)
        if not o.new_coords:
            g[2] *= math.exp(x[2])
            g[3] *= math.exp(x[3])
        for k in range(4):
            d[k] += g[k] * o.iou_normalizer
        return iou

    def delta_class(b, a, j, i, cls):
        d, x = delta[b][a][j][i], act[b][a][j][i]
        eps = o.label_smooth_eps
        if d[5 + cls]:
            d[5 + cls] = (1 - eps) + 0.5 * eps - x[5 + cls]
            return
        for c in range(nc):
            y = 1.0 if c == cls else 0.0
            d[5 + c] = y * (1 - eps) + 0.5 * eps - x[5 + c]

    count, iou_loss = 0, 0.0
    for b in range(batch):
        for j in range(gh):
            for i in range(gw):
                for a in range(num_a):
                    pred = pred_box(b, a, j, i, head.mask[a])
                    x = act[b][a][j][i]
                    best_iou, best_t = 0.0, 0
                    for t, (truth, _) in enumerate(truths[b]):
                        iou = dn_iou(pred, truth)
                        if iou > best_iou:
                            best_iou, best_t = iou, t
                    match = best_iou if any(p > 0.25 for p in x[5:]) else 0.0
                    d = delta[b][a][j][i]
                    d[4] = o.obj_normalizer * (0 - x[4])
                    if match > o.ignore_thresh:
                        d[4] = 0.0
                    if best_iou > o.truth_thresh:
                        d[4] = o.obj_normalizer * (1 - x[4])
                        truth, cls = truths[b][best_t]
                        delta_class(b, a, j, i, cls)
                        delta_box(truth, b, a, j, i, head.mask[a])
        for truth, cls in truths[b]:
            shifted = (0.0, 0.0, truth[2], truth[3])
            ious = [dn_iou((0.0, 0.0, aw / width, ah / height), shifted) for aw, ah in anchors]
            best_n, best = 0, 0.0
            for n, iou in enumerate(ious):
                if iou > best:
                    best, best_n = iou, n
            i, j = int(truth[0] * gw), int(truth[1] * gh)
            for n in [best_n] + [n for n in range(len(anchors)) if n != best_n]:
                if n not in head.mask or (n != best_n and not (o.iou_thresh < 1 and ious[n] > o.iou_thresh)):
                    continue
                a = head.mask.index(n)
                iou_loss += 1 - delta_box(truth, b, a, j, i, n)
                delta[b][a][j][i][4] = o.obj_normalizer * (1 - act[b][a][j][i][4])
                delta_class(b, a, j, i, cls)
                count += 1
        if o.iou_thresh < 1:
            for a in range(num_a):
                for j in range(gh):
                    for i in range(gw):
                        d = delta[b][a][j][i]
                        positive = sum(1 for v in d[5:] if v > 0)
                        if d[4] != 0 and positive:
                            d[:4] = [v / positive for v in d[:4]]
    return delta, count, iou_loss


def ref_costs(delta, head, count, iou_loss):
    """Darknet's layer cost (show_details=1) split as our (box, obj, cls) values."""
    flat = [v for b in delta for a in b for j in a for v in j]
    box = sum(v[k] ** 2 for v in flat for k in range(4))
    obj = sum(v[4] ** 2 for v in flat)
    cls = sum(x ** 2 for v in flat for x in v[5:])
    if head.opts.iou_loss == "mse":
        return box, obj, cls
    return head.opts.iou_normalizer * iou_loss, head.opts.obj_normalizer * obj, head.opts.obj_normalizer * cls


def random_outputs(gen, heads, batch, img_hw=IMG_HW, new_coords=0, spread=1.0):
    outs = []
    for head, (gh, gw) in zip(heads, grids(img_hw)):
        raw = torch.randn(batch, head.num_anchors, gh, gw, 5 + head.num_classes, generator=gen) * spread
        outs.append(raw.sigmoid() if new_coords else raw)
    return outs


# ------------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("iou_thresh", [1.0, 0.3])
@pytest.mark.parametrize("seed", range(6))
def test_assignment_matches_plain_python_reference(seed, iou_thresh):
    gen = torch.Generator().manual_seed(seed)
    heads = make_heads(iou_thresh=iou_thresh)
    batch = 3
    targets = random_targets(gen, batch, 24)
    expected = ref_assignment(targets, heads, grids(), IMG_HW)
    got = {}
    for hi, (head, grid_hw) in enumerate(zip(heads, grids())):
        pos = assign_targets(targets, head, grid_hw, IMG_HW, batch)
        for k in range(len(pos)):
            key = (hi, int(pos.image[k]), int(pos.anchor[k]), int(pos.gy[k]), int(pos.gx[k]))
            assert key not in got, "a slot was assigned twice"
            classes = set(pos.classes[k].nonzero().flatten().tolist())
            got[key] = [int(pos.truth[k]), classes]
    assert got == expected
    assert len(expected) > 10
    if iou_thresh < 1:  # the extras really happen in these cases
        plain = ref_assignment(targets, make_heads(), grids(), IMG_HW)
        assert len(expected) > len(plain)


CASES = [
    dict(iou_loss="mse"),
    dict(iou_loss="mse", scale_x_y=1.2, iou_thresh=0.25, label_smooth_eps=0.1, obj_normalizer=0.7, cls_normalizer=0.5),
    dict(iou_loss="mse", new_coords=1, scale_x_y=2.0, iou_normalizer=0.1),
    dict(iou_loss="iou"),
    dict(iou_loss="giou", iou_normalizer=0.07),
    dict(iou_loss="diou", scale_x_y=1.05),
    dict(iou_loss="ciou", iou_normalizer=0.07, iou_thresh=0.213, scale_x_y=1.1, ignore_thresh=0.7),
    dict(iou_loss="ciou", new_coords=1, scale_x_y=2.0, iou_thresh=0.2, label_smooth_eps=0.05),
    dict(iou_loss="giou", truth_thresh=0.5, ignore_thresh=0.3),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("seed", range(3))
def test_loss_matches_plain_python_reference(case, seed):
    """Gradient: -N * d(loss)/d(out) is Darknet's delta; values: Darknet's cost terms (per image)."""
    opts = CASES[case]
    gen = torch.Generator().manual_seed(100 + seed)
    heads = make_heads(**opts)
    batch = 2
    targets = random_targets(gen, batch, 8)
    # spread 0.5 keeps many predictions near their anchors, so ignore_thresh decisions occur
    outputs = [o.requires_grad_() for o in
               random_outputs(gen, heads, batch, new_coords=opts.get("new_coords", 0), spread=0.5)]
    loss, parts = YoloLoss(FakeModel(heads))(outputs, targets, IMG_HW)
    loss.backward()
    box = obj = cls = 0.0
    count = 0
    for head, out in zip(heads, outputs):
        delta, n, iou_loss = ref_darknet_delta(out.detach().tolist(), targets, head, IMG_HW)
        expected = torch.tensor(delta)
        torch.testing.assert_close(-batch * out.grad, expected, rtol=0, atol=1e-5 * float(expected.abs().max()))
        values = ref_costs(delta, head, n, iou_loss)
        box, obj, cls, count = box + values[0], obj + values[1], cls + values[2], count + n
    assert parts["box"].item() == pytest.approx(box / batch, rel=1e-4, abs=1e-5)
    assert parts["obj"].item() == pytest.approx(obj / batch, rel=1e-4, abs=1e-5)
    assert parts["cls"].item() == pytest.approx(cls / batch, rel=1e-4, abs=1e-5)
    assert loss.item() == pytest.approx((box + obj + cls) / batch, rel=1e-4)
    assert parts["num_targets"] == count > 0


def test_empty_targets_give_objectness_only():
    gen = torch.Generator().manual_seed(0)
    heads = make_heads(obj_normalizer=0.8)
    outputs = [o.requires_grad_() for o in random_outputs(gen, heads, 2)]
    loss, parts = YoloLoss(FakeModel(heads))(outputs, torch.zeros(0, 6), IMG_HW)
    # With no truth nothing is ignored: every prediction is a negative with Darknet's delta 0.8 * (0 - p),
    # and Darknet's cost is the sum of the squared deltas.
    expected = sum((0.8 * o[..., 4].double().sigmoid()).pow(2).sum().item() for o in outputs) / 2
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert parts["box"].item() == 0 and parts["cls"].item() == 0 and parts["num_targets"] == 0
    loss.backward()
    for o in outputs:
        assert torch.isfinite(o.grad).all()
        assert o.grad[..., :4].abs().sum() == 0 and o.grad[..., 5:].abs().sum() == 0
        assert o.grad[..., 4].abs().sum() > 0


def test_degenerate_and_outside_boxes_are_ignored():
    gen = torch.Generator().manual_seed(1)
    heads = make_heads(iou_loss="ciou")
    outputs = [o.requires_grad_() for o in random_outputs(gen, heads, 2)]
    bad = torch.tensor([
        [0, 1, 30.0, 20.0, 0.0, 0.0],
        [1, 2, 30.0, 20.0, 0.0, 15.0],
        [1, 0, 200.0, 20.0, 10.0, 10.0],
        [0, 0, 30.0, -1.0, 10.0, 10.0],
        [0, 0, float("inf"), 3.0, 10.0, 10.0],
    ])
    criterion = YoloLoss(FakeModel(heads))
    loss, parts = criterion(outputs, bad, IMG_HW)
    empty, _ = criterion(outputs, torch.zeros(0, 6), IMG_HW)
    assert torch.isfinite(loss) and parts["num_targets"] == 0
    assert loss.item() == pytest.approx(empty.item())
    loss.backward()
    assert all(torch.isfinite(o.grad).all() for o in outputs)


def test_tiny_boxes_and_extreme_outputs_stay_finite():
    heads = make_heads(iou_loss="ciou")
    outputs = [torch.full((1, 3, gh, gw, 5 + NUM_CLASSES), 60.0, requires_grad=True) for gh, gw in grids()]
    targets = torch.tensor([[0, 1, 30.0, 20.0, 1e-4, 1e-4], [0, 2, 50.0, 40.0, 96.0, 64.0]])
    for kind in ("mse", "iou", "giou", "diou", "ciou"):
        for head in heads:
            head.opts.iou_loss = kind
        loss, _ = YoloLoss(FakeModel(heads))(outputs, targets, IMG_HW)
        assert torch.isfinite(loss), kind
        grads = torch.autograd.grad(loss, outputs)
        assert all(torch.isfinite(g).all() for g in grads), kind


def _one_head_case(**opts):
    """One head (stride 16 on 64x96: grid 4x6), one truth in image 0, predictions far from everything."""
    head = FakeHead([0, 1, 2], anchors=[(16, 16), (32, 32), (48, 24)], **opts)
    out = torch.zeros(2, 3, 4, 6, 5 + NUM_CLASSES)
    out[..., 2:4] = -8.0  # tiny boxes: IoU ~ 0 with the truth
    # Truth: centre of cell (gy=1, gx=2), 32x32 -> anchor 1 is the best.
    targets = torch.tensor([[0, 2, 2.5 * 16, 1.5 * 16, 32.0, 32.0]])
    # Anchor 2 at the same cell decodes exactly onto the truth (offset 0.5, w = 48*e^tw = 32, h = 24*e^th = 32).
    for b in (0, 1):
        out[b, 2, 1, 2, 2] = math.log(32 / 48)
        out[b, 2, 1, 2, 3] = math.log(32 / 24)
    return head, out, targets


def test_ignore_thresh_silences_objectness_of_good_predictions():
    head, out, targets = _one_head_case(ignore_thresh=0.5)
    out.requires_grad_()
    loss, parts = YoloLoss(FakeModel([head]))([out], targets, IMG_HW)
    loss.backward()
    g = out.grad[..., 4] * 2  # undo the per-image normalization
    assert parts["num_targets"] == 1
    assert g[0, 1, 1, 2].item() == pytest.approx(-0.5)  # assigned: sigmoid(0) - 1
    assert g[0, 2, 1, 2].item() == 0.0  # IoU 1 with the truth > ignore_thresh: no objectness loss
    assert g[1, 2, 1, 2].item() == pytest.approx(0.5)  # same box in image 1, which has no truth
    assert g[0, 0, 0, 0].item() == pytest.approx(0.5)  # a far prediction is a negative

    head.opts.ignore_thresh = 1.0  # nothing exceeds it: the good prediction is a negative again
    out.grad = None
    loss, _ = YoloLoss(FakeModel([head]))([out], targets, IMG_HW)
    loss.backward()
    assert (out.grad[0, 2, 1, 2, 4] * 2).item() == pytest.approx(0.5)


def test_truth_thresh_makes_good_predictions_positive():
    head, out, targets = _one_head_case(ignore_thresh=0.5, truth_thresh=0.9)
    out.requires_grad_()
    loss, parts = YoloLoss(FakeModel([head]))([out], targets, IMG_HW)
    loss.backward()
    assert parts["num_targets"] == 1  # Darknet's count: truth-to-anchor assignments, not truth_thresh positives
    assert (out.grad[0, 2, 1, 2, 4] * 2).item() == pytest.approx(-0.5)
    assert (out.grad[0, 2, 1, 2, 5 + 2] * 2).item() == pytest.approx(-0.5)  # class 2 is the truth's


def test_later_truth_wins_a_shared_slot_and_classes_unite():
    head, out, _ = _one_head_case()
    targets = torch.tensor([[0, 0, 40.0, 24.0, 30.0, 30.0], [0, 1, 41.0, 25.0, 33.0, 33.0]])
    pos = assign_targets(targets, head, (4, 6), IMG_HW, 2)
    assert len(pos) == 1 and int(pos.truth[0]) == 1
    assert pos.classes[0].tolist() == [1.0, 1.0, 0.0]


def test_bad_class_or_image_index_raises():
    heads = make_heads()
    outputs = random_outputs(torch.Generator().manual_seed(0), heads, 2)
    criterion = YoloLoss(FakeModel(heads))
    with pytest.raises(ValueError, match="class 3"):
        criterion(outputs, torch.tensor([[0, 3, 10.0, 10.0, 5.0, 5.0]]), IMG_HW)
    with pytest.raises(ValueError, match="image index 2"):
        criterion(outputs, torch.tensor([[2, 0, 10.0, 10.0, 5.0, 5.0]]), IMG_HW)
    with pytest.raises(ValueError, match="iou_loss"):
        YoloLoss(FakeModel(make_heads(iou_loss="focal")))


class TinyDetector(nn.Module):
    """Two heads at strides 16 and 8 on a few convolutions; enough to take gradient steps."""

    def __init__(self, heads):
        super().__init__()
        self.yolo_layers = heads
        depth = 3 * (5 + NUM_CLASSES)
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.LeakyReLU(0.1), nn.Conv2d(8, 16, 3, 2, 1),
                                  nn.LeakyReLU(0.1), nn.Conv2d(16, 16, 3, 2, 1), nn.LeakyReLU(0.1))
        self.p8 = nn.Conv2d(16, depth, 1)
        self.down = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.LeakyReLU(0.1))
        self.p16 = nn.Conv2d(16, depth, 1)

    def forward(self, x):
        f8 = self.stem(x)
        outs = []
        for conv, f in ((self.p16, self.down(f8)), (self.p8, f8)):
            y = conv(f)
            n, _, h, w = y.shape
            outs.append(y.view(n, 3, 5 + NUM_CLASSES, h, w).permute(0, 1, 3, 4, 2).contiguous())
        return outs


@pytest.mark.parametrize("kind", ["mse", "ciou"])
def test_gradient_steps_lower_the_loss(kind):
    torch.manual_seed(0)
    heads = [FakeHead(mask, anchors=ANCHORS[:6], iou_loss=kind) for mask in ([3, 4, 5], [0, 1, 2])]
    model = TinyDetector(heads)
    x = torch.rand(2, 3, *IMG_HW)
    targets = torch.tensor([[0, 1, 30.0, 20.0, 12.0, 18.0], [0, 0, 70.0, 40.0, 30.0, 20.0],
                            [1, 2, 50.0, 32.0, 8.0, 6.0]])
    criterion = YoloLoss(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    first, _ = criterion(model(x), targets, IMG_HW)
    for _ in range(15):
        optimizer.zero_grad()
        loss, _ = criterion(model(x), targets, IMG_HW)
        loss.backward()
        optimizer.step()
    last, parts = criterion(model(x), targets, IMG_HW)
    assert parts["num_targets"] == 3
    assert last.item() < 0.5 * first.item()


@pytest.mark.slow
def test_darknet_yolov3_tiny_trains():
    from yolo.models.model import Darknet

    torch.manual_seed(0)
    model = Darknet(str(asset("cfg/yolov3-tiny.cfg")))
    model.train()
    criterion = YoloLoss(model)
    img_hw = (96, 128)
    x = torch.rand(2, 3, *img_hw)
    targets = torch.tensor([[0, 16, 40.0, 50.0, 30.0, 40.0], [1, 0, 100.0, 30.0, 20.0, 50.0],
                            [1, 79, 64.0, 48.0, 120.0, 90.0]])
    outputs = model(x)
    assert [tuple(o.shape[:4]) for o in outputs] == [(2, 3, 3, 4), (2, 3, 6, 8)]
    loss, parts = criterion(outputs, targets, img_hw)
    assert torch.isfinite(loss) and parts["num_targets"] == 3
    # Each truth goes to exactly one head, the one whose mask holds its best anchor.
    expected = ref_assignment(targets, model.yolo_layers, [(3, 4), (6, 8)], img_hw)
    got = set()
    for hi, (head, grid_hw) in enumerate(zip(model.yolo_layers, [(3, 4), (6, 8)])):
        pos = assign_targets(targets, head, grid_hw, img_hw, 2)
        got |= {(hi, int(pos.image[k]), int(pos.anchor[k]), int(pos.gy[k]), int(pos.gx[k])) for k in range(len(pos))}
    assert got == set(expected) and len(got) == 3
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    first = loss.item()
    for _ in range(4):
        optimizer.zero_grad()
        loss, _ = criterion(model(x), targets, img_hw)
        loss.backward()
        optimizer.step()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
    last, _ = criterion(model(x), targets, img_hw)
    assert last.item() < first


@pytest.mark.parametrize("new_coords,scale_x_y", [(0, 1.0), (0, 1.2), (1, 2.0)])
def test_ignore_decode_matches_the_heads_eval_decode(new_coords, scale_x_y):
    from yolo.models.heads import cell_grid
    from yolo.models.layer_types.yolo_head import YOLOLayer, yolo_activation, yolo_boxes
    from yolo.losses.yolo_head_loss import YoloLossOptions

    anchors = torch.tensor(ANCHORS, dtype=torch.float32)
    head = YOLOLayer(anchors, [3, 4, 5], NUM_CLASSES, HeadOptions(scale_x_y=scale_x_y, new_coords=new_coords))
    raw = torch.randn(2, 3, 4, 6, 5 + NUM_CLASSES, generator=torch.Generator().manual_seed(3))
    if new_coords:
        raw = raw.sigmoid()
    expected = head.decode(raw, IMG_HW)[..., :4]  # cx, cy, w, h in input pixels
    size = torch.tensor([IMG_HW[1], IMG_HW[0]], dtype=torch.float32)
    o = YoloLossOptions.of(head)
    act = yolo_activation(raw, o.scale_x_y, o.new_coords)
    got = yolo_boxes(act, (head.anchors / size).view(1, 3, 1, 1, 2), cell_grid(4, 6), (4, 6), new_coords)
    torch.testing.assert_close(got * torch.cat((size, size)), expected)


def test_head_types_dispatch_to_their_registered_loss():
    class OtherHead(FakeHead):
        pass

    class UnknownHead:
        num_classes = NUM_CLASSES

    calls = []

    def other_loss(head, out, targets, keep, img_size_hw):
        calls.append((type(head).__name__, tuple(out.shape), int(keep.sum()), img_size_hw))
        zero = out.sum() * 0.0
        return zero + 1.0, zero + 2.0, zero + 3.0, 7

    register_head_loss(OtherHead)(other_loss)
    heads = [FakeHead(MASKS[0]), OtherHead(MASKS[1])]
    outputs = random_outputs(torch.Generator().manual_seed(0), heads + [FakeHead(MASKS[2])], 2)[:2]
    targets = torch.tensor([[0, 1, 30.0, 20.0, 12.0, 18.0]])
    loss, parts = YoloLoss(FakeModel(heads))(outputs, targets, IMG_HW)
    assert calls == [("OtherHead", tuple(outputs[1].shape), 1, IMG_HW)]
    assert parts["num_targets"] >= 7  # the other head's count is added to the [yolo] head's
    with pytest.raises(ValueError, match="UnknownHead"):
        YoloLoss(FakeModel([UnknownHead()]))


def test_counters_per_class_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="head 0: counters_per_class has 2 values but classes=3"):
        YoloLoss(FakeModel([FakeHead(MASKS[0], counters_per_class="5,7")]))
