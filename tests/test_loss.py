"""YOLO loss: assignment and loss values against a plain-Python reference of Darknet's rules.

The reference below loops over truths, anchors and every prediction slot with Python floats; the
vectorized loss in ``yolo.loss`` must agree with it on small random cases over several seeds.
"""
import math
from dataclasses import dataclass
from typing import List

import pytest
import torch
from torch import nn

from yolo.loss import YoloLoss, assign_targets, check_yolo_head, register_head_loss, yolo_head_loss

from conftest import asset

IMG_HW = (64, 96)
NUM_CLASSES = 3
# Three heads like yolov3 (strides 32, 16, 8), anchors scaled to the small input.
ANCHORS = [(3, 4), (5, 9), (11, 8), (10, 20), (20, 15), (19, 38), (36, 28), (48, 60), (90, 62)]
MASKS = [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
STRIDES = [32, 16, 8]


@dataclass
class Opts:
    ignore_thresh: float = 0.5
    truth_thresh: float = 1.0
    iou_thresh: float = 1.0
    scale_x_y: float = 1.0
    new_coords: int = 0
    iou_loss: str = "mse"
    iou_normalizer: float = 0.75
    obj_normalizer: float = 1.0
    cls_normalizer: float = 1.0
    label_smooth_eps: float = 0.0


class FakeHead:
    """Carries the attributes the loss reads from a model's [yolo] head."""

    def __init__(self, mask, anchors=ANCHORS, num_classes=NUM_CLASSES, **opts):
        self.all_anchors = torch.tensor(anchors, dtype=torch.float32)
        self.mask = list(mask)
        self.anchors = self.all_anchors[self.mask]
        self.num_anchors = len(self.mask)
        self.num_classes = num_classes
        self.opts = Opts(**opts)


# The fake heads train with the [yolo] loss.
register_head_loss(FakeHead, check=check_yolo_head)(yolo_head_loss)


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


def ref_bce(x, y, probabilities):
    p = min(max(x, 0.0), 1.0) if probabilities else sigmoid(x)
    log_p = max(math.log(p), -100.0) if p > 0 else -100.0
    log_q = max(math.log(1 - p), -100.0) if p < 1 else -100.0
    return -(y * log_p + (1 - y) * log_q)


def ref_box_xyxy(raw4, anchor, gx, gy, grid_hw, img_hw, opts):
    s = opts.scale_x_y
    tx, ty, tw, th = raw4
    ox = tx if opts.new_coords else sigmoid(tx)
    oy = ty if opts.new_coords else sigmoid(ty)
    ox, oy = ox * s - (s - 1) / 2, oy * s - (s - 1) / 2
    if opts.new_coords:
        w, h = 4 * tw * tw * anchor[0], 4 * th * th * anchor[1]
    else:
        w, h = math.exp(tw) * anchor[0], math.exp(th) * anchor[1]
    cx = (gx + ox) * img_hw[1] / grid_hw[1]
    cy = (gy + oy) * img_hw[0] / grid_hw[0]
    return (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)


def xyxy(cx, cy, w, h):
    return (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)


def ref_iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def ref_iou_loss(kind, p, t):
    iou = ref_iou(p, t)
    if kind == "iou":
        return 1 - iou
    cw = max(p[2], t[2]) - min(p[0], t[0])
    ch = max(p[3], t[3]) - min(p[1], t[1])
    if kind == "giou":
        iw = max(0.0, min(p[2], t[2]) - max(p[0], t[0]))
        ih = max(0.0, min(p[3], t[3]) - max(p[1], t[1]))
        union = (p[2] - p[0]) * (p[3] - p[1]) + (t[2] - t[0]) * (t[3] - t[1]) - iw * ih
        return 1 - (iou - (cw * ch - union) / (cw * ch))
    rho2 = ((p[0] + p[2]) / 2 - (t[0] + t[2]) / 2) ** 2 + ((p[1] + p[3]) / 2 - (t[1] + t[3]) / 2) ** 2
    diou = 1 - iou + rho2 / (cw * cw + ch * ch)
    if kind == "diou":
        return diou
    v = 4 / math.pi ** 2 * (math.atan((t[2] - t[0]) / (t[3] - t[1])) - math.atan((p[2] - p[0]) / (p[3] - p[1]))) ** 2
    alpha = v / (1 - iou + v) if v > 0 else 0.0
    return diou + alpha * v


def ref_loss(outputs, targets, heads, img_hw):
    """Per-image (box, obj, cls) losses of Darknet's rules, element by element."""
    batch = outputs[0].shape[0]
    height, width = img_hw
    rows = targets.tolist()
    usable = [r for r in rows if ref_usable(r, img_hw)]
    grid_list = [tuple(o.shape[2:4]) for o in outputs]
    slots = ref_assignment(targets, heads, grid_list, img_hw)
    box = obj = cls = 0.0
    for hi, (head, out) in enumerate(zip(heads, outputs)):
        o, grid_hw, probs = out.tolist(), grid_list[hi], bool(head.opts.new_coords)
        anchors = head.anchors.tolist()
        opts = head.opts
        for b in range(batch):
            for a in range(head.num_anchors):
                for gy in range(grid_hw[0]):
                    for gx in range(grid_hw[1]):
                        v = o[b][a][gy][gx]
                        pred = ref_box_xyxy(v[:4], anchors[a], gx, gy, grid_hw, img_hw, opts)
                        best_iou, best_t = 0.0, None
                        for t, r in enumerate(rows):
                            if int(r[0]) == b and ref_usable(r, img_hw):
                                iou = ref_iou(pred, xyxy(*r[2:6]))
                                if iou > best_iou:
                                    best_iou, best_t = iou, t
                        key = (hi, b, a, gy, gx)
                        truth_hit = best_iou > opts.truth_thresh
                        if key in slots or truth_hit:
                            t, classes = slots[key] if key in slots else (best_t, {int(rows[best_t][1])})
                            if key in slots and truth_hit:
                                classes = classes | {int(rows[best_t][1])}
                            obj += opts.obj_normalizer * ref_bce(v[4], 1.0, probs)
                            eps = opts.label_smooth_eps
                            for c in range(head.num_classes):
                                y = 1.0 if c in classes else 0.0
                                y = y * (1 - eps) + 0.5 * eps
                                cls += opts.cls_normalizer * ref_bce(v[5 + c], y, probs)
                            _, _, cx, cy, w, h = rows[t]
                            if opts.iou_loss == "mse":
                                s = opts.scale_x_y
                                ox = v[0] if probs else sigmoid(v[0])
                                oy = v[1] if probs else sigmoid(v[1])
                                ox, oy = ox * s - (s - 1) / 2, oy * s - (s - 1) / 2
                                tx = cx / width * grid_hw[1] - gx
                                ty = cy / height * grid_hw[0] - gy
                                if probs:
                                    tw = math.sqrt(w / (4 * anchors[a][0]))
                                    th = math.sqrt(h / (4 * anchors[a][1]))
                                else:
                                    tw, th = math.log(w / anchors[a][0]), math.log(h / anchors[a][1])
                                scale = 2 - w * h / (width * height)
                                sq = (ox - tx) ** 2 + (oy - ty) ** 2 + (v[2] - tw) ** 2 + (v[3] - th) ** 2
                                box += opts.iou_normalizer * 0.5 * scale * sq
                            else:
                                box += opts.iou_normalizer * ref_iou_loss(opts.iou_loss, pred, xyxy(cx, cy, w, h))
                        elif best_iou <= opts.ignore_thresh:
                            obj += opts.obj_normalizer * ref_bce(v[4], 0.0, probs)
    return box / batch, obj / batch, cls / batch, len(slots), usable


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
    opts = CASES[case]
    gen = torch.Generator().manual_seed(100 + seed)
    heads = make_heads(**opts)
    batch = 2
    targets = random_targets(gen, batch, 8)
    # spread 0.5 keeps many predictions near their anchors, so ignore_thresh decisions occur
    outputs = random_outputs(gen, heads, batch, new_coords=opts.get("new_coords", 0), spread=0.5)
    loss, parts = YoloLoss(FakeModel(heads))(outputs, targets, IMG_HW)
    box, obj, cls, _, _ = ref_loss(outputs, targets, heads, IMG_HW)
    assert parts["box"].item() == pytest.approx(box, rel=1e-4, abs=1e-5)
    assert parts["obj"].item() == pytest.approx(obj, rel=1e-4, abs=1e-5)
    assert parts["cls"].item() == pytest.approx(cls, rel=1e-4, abs=1e-5)
    assert loss.item() == pytest.approx(box + obj + cls, rel=1e-4)
    assert parts["num_targets"] > 0


def test_empty_targets_give_objectness_only():
    gen = torch.Generator().manual_seed(0)
    heads = make_heads(obj_normalizer=0.8)
    outputs = [o.requires_grad_() for o in random_outputs(gen, heads, 2)]
    loss, parts = YoloLoss(FakeModel(heads))(outputs, torch.zeros(0, 6), IMG_HW)
    # With no truth nothing is ignored: every prediction is a negative, BCE(z, 0) = softplus(z).
    expected = sum(0.8 * nn.functional.softplus(o[..., 4].double()).sum().item() for o in outputs) / 2
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
    assert parts["num_targets"] == 2
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


def test_darknet_yolov3_tiny_trains():
    from yolo.model import Darknet

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
    from yolo.layers import HeadOptions, YOLOLayer
    from yolo.loss import cxcywh_to_xyxy, decode_boxes

    anchors = torch.tensor(ANCHORS, dtype=torch.float32)
    head = YOLOLayer(anchors, [3, 4, 5], NUM_CLASSES, HeadOptions(scale_x_y=scale_x_y, new_coords=new_coords))
    raw = torch.randn(2, 3, 4, 6, 5 + NUM_CLASSES, generator=torch.Generator().manual_seed(3))
    if new_coords:
        raw = raw.sigmoid()
    expected = cxcywh_to_xyxy(head.decode(raw, IMG_HW)[..., :4])
    gy = torch.arange(4.0).view(1, 1, 4, 1)
    gx = torch.arange(6.0).view(1, 1, 1, 6)
    got = decode_boxes(raw[..., :4], head.anchors.view(1, 3, 1, 1, 2), gx, gy, (4, 6), IMG_HW, scale_x_y, new_coords)
    torch.testing.assert_close(got, expected)
