"""Box formats, letterbox/stretch geometry and back-mapping, and post-processing against plain-Python
references (Darknet's integer letterbox arithmetic, a greedy per-class NMS written out in loops)."""
import math

import cv2
import numpy as np
import pytest
import torch

from yolo.ops.boxes import clip_boxes, cxcywh_to_xyxy, xyxy_to_cxcywh
from yolo.inference.postprocess import PostprocessOptions, postprocess
from yolo.ops.letterbox import LETTERBOX_FILL_UINT8, LetterboxInfo, letterbox, letterbox_params, resize_image, stretch


# ------------------------------------------------------------------------------------ box formats
def test_xywh_xyxy_known_values_and_round_trip():
    xywh = torch.tensor([[10.0, 20.0, 4.0, 6.0], [0.0, 0.0, 2.0, 2.0]])
    assert torch.equal(cxcywh_to_xyxy(xywh), torch.tensor([[8.0, 17.0, 12.0, 23.0], [-1.0, -1.0, 1.0, 1.0]]))
    g = torch.Generator().manual_seed(0)
    boxes = torch.rand(3, 5, 4, generator=g) * 100
    assert torch.allclose(xyxy_to_cxcywh(cxcywh_to_xyxy(boxes)), boxes, atol=1e-4)
    assert cxcywh_to_xyxy(torch.zeros(0, 4)).shape == (0, 4)


def test_clip_boxes():
    boxes = torch.tensor([[-5.0, -1.0, 700.0, 30.0], [10.0, 500.0, 20.0, 600.0]])
    out = clip_boxes(boxes, (480, 640))
    assert torch.equal(out, torch.tensor([[0.0, 0.0, 640.0, 30.0], [10.0, 480.0, 20.0, 480.0]]))
    assert boxes[0, 0] == -5.0  # input untouched


# --------------------------------------------------------------------------- letterbox / stretch
def darknet_letterbox_geometry(w, h, net_w, net_h):
    """Darknet's letterbox_image, written out as in image.c (int arithmetic, float comparison)."""
    if float(net_w) / w < float(net_h) / h:
        new_w = net_w
        new_h = (h * net_w) // w
    else:
        new_h = net_h
        new_w = (w * net_h) // h
    return new_w, new_h, (net_w - new_w) // 2, (net_h - new_h) // 2


@pytest.mark.parametrize("hw,net", [((576, 768), (416, 416)), ((512, 773), (416, 416)), ((640, 424), (416, 416)),
                                    ((100, 100), (320, 416)), ((1080, 1920), (608, 608)), ((37, 1000), (416, 416)),
                                    ((1000, 37), (256, 512))])
def test_letterbox_follows_darknet(hw, net):
    h, w = hw
    new_w, new_h, dx, dy = darknet_letterbox_geometry(w, h, net[1], net[0])
    (rh, rw), (px, py) = letterbox_params((h, w), net)
    assert (rw, rh, px, py) == (new_w, new_h, dx, dy)
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    out, info = letterbox(image, net)
    assert out.shape == (*net, 3) and out.dtype == np.uint8
    expected = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(out[dy:dy + new_h, dx:dx + new_w], expected)
    border = np.ones(net, bool)
    border[dy:dy + new_h, dx:dx + new_w] = False
    assert (out[border] == LETTERBOX_FILL_UINT8).all()
    assert info == LetterboxInfo(new_w / w, new_h / h, dx, dy)


def test_stretch_is_plain_resize():
    image = np.random.default_rng(1).integers(0, 256, (300, 500, 3), dtype=np.uint8)
    out, info = stretch(image, (416, 320))
    assert np.array_equal(out, cv2.resize(image, (320, 416), interpolation=cv2.INTER_LINEAR))
    assert info == LetterboxInfo(320 / 500, 416 / 300, 0.0, 0.0)
    with pytest.raises(ValueError, match="resize mode"):
        resize_image(image, 416, "crop")


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
@pytest.mark.parametrize("hw", [(576, 768), (333, 517), (640, 427), (401, 399)])
def test_back_mapping_is_exact(mode, hw):
    """Boxes placed into the input with Darknet's geometry come back to the same original pixels."""
    h, w = hw
    net_h, net_w = 416, 416
    if mode == "letterbox":
        new_w, new_h, dx, dy = darknet_letterbox_geometry(w, h, net_w, net_h)
    else:
        new_w, new_h, dx, dy = net_w, net_h, 0, 0
    _, info = resize_image(np.zeros((h, w, 3), np.uint8), (net_h, net_w), mode)
    g = torch.Generator().manual_seed(2)
    xy1 = torch.rand(50, 2, generator=g, dtype=torch.float64) * torch.tensor([w, h]) * 0.9
    wh = torch.rand(50, 2, generator=g, dtype=torch.float64) * (torch.tensor([w, h]) - xy1)
    original = torch.cat([xy1, xy1 + wh], 1)
    # Into the input: x_in = x * new_w / w + dx (independent of LetterboxInfo).
    sx, sy = new_w / w, new_h / h
    in_boxes = original * torch.tensor([sx, sy, sx, sy], dtype=torch.float64) + torch.tensor([dx, dy, dx, dy],
                                                                                             dtype=torch.float64)
    back = info.to_original(in_boxes, (h, w))
    assert torch.allclose(back, original, atol=1e-9)
    assert torch.allclose(info.to_input(original), in_boxes, atol=1e-9)


def test_back_mapping_of_drawn_rectangle():
    """A white rectangle drawn on the original is found where the back-mapping says, to a pixel."""
    h, w = 480, 800
    image = np.zeros((h, w, 3), np.uint8)
    x1, y1, x2, y2 = 300, 100, 500, 350
    image[y1:y2, x1:x2] = 255
    out, info = letterbox(image, (416, 416), fill=0)
    ys, xs = np.nonzero(out[..., 0] > 127)
    found = torch.tensor([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]], dtype=torch.float64)
    back = info.to_original(found, (h, w))[0]
    tol = 1.0 / info.scale_x + 1e-6  # one input pixel
    assert torch.allclose(back, torch.tensor([x1, y1, x2, y2], dtype=torch.float64), atol=tol)


def test_scale_boxes_clips():
    info = LetterboxInfo(0.5, 0.5, 10.0, 20.0)
    boxes = torch.tensor([[0.0, 0.0, 1000.0, 1000.0]])
    assert torch.equal(info.to_original(boxes, (300, 400)), torch.tensor([[0.0, 0.0, 400.0, 300.0]]))
    assert torch.equal(info.to_original(boxes, (300, 400), clip=False),
                       torch.tensor([[-20.0, -40.0, 1980.0, 1960.0]]))


# -------------------------------------------------------------------------------- post-process
def reference_postprocess(pred, conf, iou_thres, classes=None, agnostic=False, multi_label=False, max_det=300):
    """Plain-Python threshold + greedy NMS: rows (cx, cy, w, h, obj, p...) of one image."""
    cands = []
    for row in pred.tolist():
        cx, cy, w, h, obj = row[:5]
        box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
        scores = [obj * p for p in row[5:]]
        if multi_label:
            picks = [(s, c) for c, s in enumerate(scores) if s > conf]
        else:
            best = max(range(len(scores)), key=lambda c: scores[c])
            picks = [(scores[best], best)] if scores[best] > conf else []
        for s, c in picks:
            if classes is None or c in classes:
                cands.append((s, c, box))
    cands.sort(key=lambda t: -t[0])

    def iou(a, b):
        iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = iw * ih
        union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
        return inter / union if union > 0 else 0.0

    kept = []
    for s, c, box in cands:
        if all(not ((agnostic or c2 == c) and iou(box, b2) > iou_thres) for _, c2, b2 in kept):
            kept.append((s, c, box))
    return kept[:max_det]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("options", [{}, {"agnostic": True}, {"multi_label": True}, {"classes": (0, 2)},
                                     {"max_det": 5}])
def test_postprocess_matches_plain_python_nms(seed, options):
    g = torch.Generator().manual_seed(seed)
    n, b, c = 2, 200, 4
    pred = torch.zeros(n, b, 5 + c, dtype=torch.float64)
    # Clustered boxes so NMS has real work to do.
    centers = torch.rand(n, 6, 2, generator=g, dtype=torch.float64) * 300
    pick = torch.randint(0, 6, (n, b), generator=g)
    pred[..., 0:2] = torch.gather(centers, 1, pick[..., None].expand(-1, -1, 2)) + \
        torch.randn(n, b, 2, generator=g, dtype=torch.float64) * 8
    pred[..., 2:4] = 20 + torch.rand(n, b, 2, generator=g, dtype=torch.float64) * 60
    pred[..., 4] = torch.rand(n, b, generator=g, dtype=torch.float64)
    pred[..., 5:] = torch.rand(n, b, c, generator=g, dtype=torch.float64)
    conf, iou_thres = 0.3, 0.45
    ours = postprocess(pred, PostprocessOptions(conf, iou_thres, **options))
    assert len(ours) == n
    for i in range(n):
        ref = reference_postprocess(pred[i], conf, iou_thres, **options)
        assert len(ours[i]["scores"]) == len(ref), (seed, options)
        assert ours[i]["labels"].dtype == torch.int64
        for j, (s, cls, box) in enumerate(ref):
            assert math.isclose(ours[i]["scores"][j].item(), s, rel_tol=1e-9)
            assert ours[i]["labels"][j].item() == cls
            assert torch.allclose(ours[i]["boxes"][j], torch.tensor(box, dtype=torch.float64), atol=1e-9)


def test_postprocess_empty_and_shapes():
    pred = torch.zeros(3, 10, 85)
    pred[1, 0, :4] = torch.tensor([50.0, 50.0, 20.0, 20.0])
    pred[1, 0, 4] = 0.9
    pred[1, 0, 5 + 7] = 0.8
    out = postprocess(pred, PostprocessOptions(0.25, 0.45))
    for i in (0, 2):
        assert out[i]["boxes"].shape == (0, 4) and out[i]["scores"].shape == (0,)
        assert out[i]["labels"].shape == (0,) and out[i]["labels"].dtype == torch.int64
    assert out[1]["labels"].tolist() == [7]
    assert torch.allclose(out[1]["boxes"], torch.tensor([[40.0, 40.0, 60.0, 60.0]]))
    assert out[1]["scores"].item() == pytest.approx(0.72)
    # Class filter removing everything still gives empty tensors.
    assert postprocess(pred, PostprocessOptions(0.25, 0.45, classes=(3,)))[1]["boxes"].shape == (0, 4)
    with pytest.raises(ValueError):
        postprocess(torch.zeros(10, 85), PostprocessOptions(0.25, 0.45))


def test_postprocess_threshold_is_strict_and_uses_obj_times_class():
    pred = torch.zeros(1, 2, 7)
    pred[0, :, 2:4] = 10.0
    pred[0, 0, 4], pred[0, 0, 5] = 0.5, 0.5  # 0.25: not above 0.25
    pred[0, 1, 4], pred[0, 1, 6] = 0.9, 0.3  # 0.27: kept, although the class prob alone is 0.3
    out = postprocess(pred, PostprocessOptions(0.25, 0.45))[0]
    assert out["labels"].tolist() == [1]
