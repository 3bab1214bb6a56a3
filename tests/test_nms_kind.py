"""Darknet's NMS variants (``nms_kind`` / ``beta_nms`` of a [yolo] section) against a plain-Python reference.

The reference below follows Darknet's src/box.c ``do_nms_sort`` / ``diounms_sort`` (per class: sort the
detections by that class's probability, then each surviving one zeroes the probability of every later one
whose overlap measure exceeds the threshold) on centre-format boxes, in plain Python floats.
"""
import random

import pytest
import torch

from yolo.models.cfg import parse_cfg, parse_cfg_text
from yolo.inference.postprocess import PostprocessOptions, postprocess
from yolo.models.heads import nms_settings
from yolo.ops.nms import nms


# ------------------------------------------------------------------------------ plain-Python reference
def _overlap(a, b):
    """IoU of centre boxes (x, y, w, h) as Darknet's box_iou."""
    def overlap(x1, w1, x2, w2):
        left = max(x1 - w1 / 2, x2 - w2 / 2)
        right = min(x1 + w1 / 2, x2 + w2 / 2)
        return right - left
    w = overlap(a[0], a[2], b[0], b[2])
    h = overlap(a[1], a[3], b[1], b[3])
    inter = 0.0 if w < 0 or h < 0 else w * h
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def _diou(a, b, beta):
    """Darknet's box_diounms: IoU - (d^2 / c^2) ** beta (c: enclosing box diagonal)."""
    left = min(a[0] - a[2] / 2, b[0] - b[2] / 2)
    right = max(a[0] + a[2] / 2, b[0] + b[2] / 2)
    top = min(a[1] - a[3] / 2, b[1] - b[3] / 2)
    bottom = max(a[1] + a[3] / 2, b[1] + b[3] / 2)
    c = (right - left) ** 2 + (bottom - top) ** 2
    iou = _overlap(a, b)
    if c == 0:
        return iou
    d = (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2
    return iou - (d / c) ** beta


def reference_nms(dets, classes, thresh, kind, beta):
    """dets: list of (box_xywh, probs[classes]) -> set of (det index, class) whose probability survives."""
    probs = [list(p) for _, p in dets]
    for k in range(classes):
        order = sorted(range(len(dets)), key=lambda i: -probs[i][k])
        for n, i in enumerate(order):
            if probs[i][k] == 0:
                continue
            for j in order[n + 1:]:
                a, b = dets[i][0], dets[j][0]
                if kind == "default":
                    hit = _overlap(a, b) > thresh
                elif kind == "greedynms":
                    hit = _diou(a, b, 0.6) > thresh
                else:
                    hit = _diou(a, b, beta) > thresh
                if hit:
                    probs[j][k] = 0.0
    return {(i, k) for i in range(len(dets)) for k in range(classes) if probs[i][k] > 0}


def _random_detections(rng, n, classes, conf):
    """Clustered boxes (so that many overlap), Darknet-style probabilities (obj * p, 0 below ``conf``)."""
    centres = [(rng.uniform(40, 360), rng.uniform(40, 360)) for _ in range(4)]
    rows, dets = [], []
    for _ in range(n):
        cx, cy = rng.choice(centres)
        box = (cx + rng.gauss(0, 12), cy + rng.gauss(0, 12), rng.uniform(20, 90), rng.uniform(20, 90))
        obj = rng.uniform(0.05, 1.0)
        cls = [rng.random() for _ in range(classes)]
        rows.append(list(box) + [obj] + cls)
        dets.append((box, [obj * p if obj * p > conf else 0.0 for p in cls]))
    return torch.tensor([rows], dtype=torch.float32), dets


@pytest.mark.parametrize("kind,beta", [("default", 0.6), ("greedynms", 0.6), ("diounms", 0.6), ("diounms", 0.3)])
@pytest.mark.parametrize("seed", range(4))
def test_postprocess_matches_darknet_nms(kind, beta, seed):
    rng = random.Random(seed)
    classes, conf, thresh = 3, 0.2, 0.45
    predictions, dets = _random_detections(rng, 60, classes, conf)
    expected = reference_nms(dets, classes, thresh, kind, beta)
    config = PostprocessOptions(conf_thres=conf, iou_thres=thresh, multi_label=True, max_det=10_000, nms_kind=kind,
                               beta_nms=beta)
    out = postprocess(predictions, config)[0]
    # Map each kept (box, label) back to its detection index through the exact box coordinates.
    boxes = predictions[0, :, :4]
    got = set()
    for box, label in zip(out["boxes"], out["labels"]):
        centre = (box[:2] + box[2:]) / 2
        i = int(((boxes[:, :2] - centre).abs().sum(1)).argmin())
        got.add((i, int(label)))
    assert got == expected
    assert len(got) == len(out["labels"])
    assert torch.all(out["scores"][:-1] >= out["scores"][1:])


def test_variants_differ_where_darknet_says_so():
    # Two equal boxes side by side: IoU 1/3, centres 20 apart, enclosing diagonal^2 = 60^2 + 40^2.
    boxes = torch.tensor([[0.0, 0.0, 40.0, 40.0], [20.0, 0.0, 60.0, 40.0]])
    scores = torch.tensor([0.9, 0.8])
    groups = torch.zeros(2, dtype=torch.int64)
    iou = 1 / 3
    term = (400 / (3600 + 1600)) ** 0.6
    assert nms(boxes, scores, groups, 0.3, "default").tolist() == [0]          # 0.333 > 0.3
    assert nms(boxes, scores, groups, 0.3, "greedynms").tolist() == [0, 1]     # 0.333 - 0.215 < 0.3
    assert nms(boxes, scores, groups, iou - term - 1e-3, "greedynms").tolist() == [0]
    assert nms(boxes, scores, groups, 0.3, "diounms", beta_nms=3.0).tolist() == [0]  # tiny penalty
    with pytest.raises(ValueError, match="nms_kind"):
        nms(boxes, scores, groups, 0.3, "softnms")


def test_the_iou_prefilter_of_diou_nms_is_torchvisions_box_iou():
    """DIoU-NMS picks the pairs to test with its own numpy IoU matrix (no torch thread pool, 2x faster per class on
    small groups than ``torchvision.ops.box_iou``); it is the same matrix, bit for bit in float64 (0 where the
    union is 0, torchvision's 0/0 there compares with a threshold as 0 does)."""
    import numpy as np
    import torchvision
    from yolo.ops.nms import _iou_block
    gen = torch.Generator().manual_seed(0)
    corner = torch.rand(200, 2, generator=gen, dtype=torch.float64) * 600
    boxes = torch.cat([corner, corner + torch.rand(200, 2, generator=gen, dtype=torch.float64) * 200], 1)
    boxes[:10] = boxes[10:20]  # identical pairs
    boxes[20:25, 2:] = boxes[20:25, :2]  # boxes of no area
    ours = _iou_block(boxes[:64].numpy(), boxes.numpy())
    theirs = torchvision.ops.box_iou(boxes[:64], boxes).numpy()
    no_union = np.isnan(theirs)
    assert np.array_equal(ours[~no_union], theirs[~no_union]) and (ours[no_union] == 0).all()


def test_empty_input():
    empty = torch.zeros((0, 4))
    for kind in ("default", "greedynms", "diounms"):
        assert nms(empty, torch.zeros(0), torch.zeros(0, dtype=torch.int64), 0.45, kind).numel() == 0


def _cfg(text):
    return parse_cfg_text(text, source="test.cfg")


def test_nms_settings_reads_the_last_yolo_section():
    head = "[yolo]\nmask=0\nanchors=10,13\nclasses=1\n"
    assert nms_settings(_cfg("[net]\n" + head)) == ("default", 0.6)
    assert nms_settings(_cfg("[net]\n" + head + "nms_kind=diounms\nbeta_nms=0.3\n")) == ("diounms", 0.3)
    # Darknet reads the last layer only, and falls back to do_nms_sort for names [yolo] does not know.
    assert nms_settings(_cfg("[net]\n" + head + "nms_kind=diounms\n" + head + "nms_kind=greedynms\n"))[0] == "greedynms"
    assert nms_settings(_cfg("[net]\n" + head + "nms_kind=cornersnms\n")) == ("default", 0.6)


def test_shipped_cfgs(assets):
    assert nms_settings(parse_cfg(assets("cfg/yolov4.cfg"))) == ("greedynms", 0.6)
    assert nms_settings(parse_cfg(assets("cfg/yolov3.cfg"))) == ("default", 0.6)


def test_detector_takes_the_cfg_choice(assets, tmp_path):
    from yolo import Detector
    from yolo.models.model import Darknet
    from yolo.models.weights import save_darknet_weights

    model = Darknet(assets("cfg/yolov4-tiny.cfg"))
    weights = tmp_path / "w.weights"
    save_darknet_weights(model, weights)
    text = assets("cfg/yolov4-tiny.cfg").read_text().replace("[yolo]", "[yolo]\nnms_kind=diounms\nbeta_nms=0.7")
    cfg = tmp_path / "diou.cfg"
    cfg.write_text(text)
    detector = Detector(cfg, weights, device="cpu", img_size=64, fast=False)
    assert (detector.nms_kind, detector.beta_nms) == ("diounms", 0.7)
    assert Detector(cfg, weights, device="cpu", img_size=64, fast=False, nms_kind="default").nms_kind == "default"


def test_training_pictures_show_what_detect_finds(assets, tmp_path):
    """The sample pictures of a training run use the cfg's nms_kind, as detect.py does: on the same weights and
    image they hold exactly the Detector's detections (here DIoU-NMS with a small beta_nms, which keeps many boxes
    that the default NMS would suppress)."""
    import cv2
    import numpy as np
    from yolo import Detector
    from yolo.engine.hooks.writers import sample_detections
    from yolo.models.model import load_model

    text = assets("cfg/yolov3-tiny.cfg").read_text().replace("[yolo]", "[yolo]\nnms_kind=diounms\nbeta_nms=0.1")
    cfg = tmp_path / "diou.cfg"
    cfg.write_text(text)
    weights = assets("weights/yolov3-tiny.weights")
    # An image of the network's input size: the Detector's letterbox leaves it as it is, so both sides see one input.
    bgr = cv2.resize(cv2.imread(str(assets("images/dog.jpg"))), (416, 416), interpolation=cv2.INTER_AREA)
    detector = Detector(cfg, weights, device="cpu", img_size=416, resize="letterbox", fast=False)
    (want,) = detector(bgr)

    rgb = torch.from_numpy(np.ascontiguousarray(bgr[:, :, ::-1].transpose(2, 0, 1)))[None]
    model = load_model(cfg, weights, device="cpu").train()  # as the trainer holds it
    (got,) = sample_detections(model, rgb, torch.device("cpu"))
    assert model.training
    # The same detections; the values to float rounding (the Detector's input batch is laid out channels-last).
    assert torch.equal(got["labels"], want["labels"])
    torch.testing.assert_close(got["scores"], want["scores"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got["boxes"].clamp(0, 416), want["boxes"], rtol=1e-5, atol=1e-3)  # the Detector clips
    # The cfg's choice matters here: the default NMS keeps fewer boxes.
    with torch.no_grad():
        default = postprocess(model.eval()(rgb.float() / 255))[0]
    assert len(default["scores"]) < len(want["scores"])
