"""Networks that mix [Gaussian_yolo] with [yolo] heads, against Darknet itself.

Darknet builds, runs and trains such a network, each head by its own type (src/network.c fill_network_boxes
calls get_yolo_detections or get_gaussian_yolo_detections per layer). Our eval output has one layout for it
(:func:`yolo.models.heads.uniform_eval_rows`): every row cx, cy, w, h, objectness, C probabilities, 4 sigmas,
with zero sigmas for a [yolo] head's rows. Compared here, on cfgs made from Darknet's yolov3-tiny.cfg and
yolov4-tiny.cfg (maxpool, upsample, route with groups, scale_x_y) with one head turned [Gaussian_yolo]:

* every row of the model's eval output against Darknet's own decode of that head (tests/darknet_ref/head_boxes.c,
  threshold below every score so that each slot comes out);
* the Detector's detections (score rule per head, no NMS) against Darknet's;
* the training loss: ``-N * d(loss)/d(head input)`` of each head against Darknet's ``delta`` (ciou, scale_x_y in yolov4-tiny);
* ONNX / TorchScript export, evaluation and the anchors tool on a mixed cfg.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pytest
import torch

from conftest import darknet_file
from darknet_parity import COCO_PAIRS, coco_images_area_resized, darknet_heads, targets_px
from helpers import randomize_model
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.heads import SIGMA_COLUMNS, has_gaussian_heads, is_gaussian_head, uniform_eval_rows
from yolo.models.model import Darknet
from yolo.models.weights import DarknetHeader, save_darknet_weights

CLASSES = 3
SIZE = 128


# ---------------------------------------------------------------------------------------------- the cfgs
def mixed_cfg(name: str, gaussian: set, classes: int = CLASSES) -> str:
    """Darknet's ``name`` cfg with ``classes`` classes and the heads numbered in ``gaussian`` (0 = first)
    turned into [Gaussian_yolo] (the conv before each head resized to match)."""
    text = darknet_file(f"cfg/{name}").read_text()
    text = re.sub(r"(?m)^classes\s*=\s*80", f"classes={classes}", text)
    parts = re.split(r"(?m)^\[yolo\]", text)
    out = parts[0]
    for k, rest in enumerate(parts[1:]):
        entries = 9 if k in gaussian else 5
        out = re.sub(r"filters=255(?!.*filters=255)", f"filters={(classes + entries) * 3}", out, flags=re.S)
        out += ("[Gaussian_yolo]" if k in gaussian else "[yolo]") + rest
    return out


MIXED = [("yolov3-tiny.cfg", {0}), ("yolov3-tiny.cfg", {1}), ("yolov4-tiny.cfg", {0})]
MIXED_IDS = [f"{name[:-4]}-gaussian{sorted(g)[0]}" for name, g in MIXED]


def write_mixed(tmp_path: Path, name: str, gaussian: set, seed: int = 0) -> Tuple[Path, Path, Darknet]:
    """(cfg, random weights, model) of a mixed cfg at SIZE x SIZE."""
    cfg = tmp_path / f"mixed-{name[:-4]}-{'-'.join(map(str, sorted(gaussian)))}.cfg"
    cfg.write_text(mixed_cfg(name, gaussian).replace("width=416", f"width={SIZE}").replace(
        "height=416", f"height={SIZE}"))
    model = Darknet(cfg)
    randomize_model(model, seed, calibrate_hw=(SIZE, SIZE))
    weights = tmp_path / "mixed.weights"
    save_darknet_weights(model, weights, header=DarknetHeader(0, 2, 0, 0))
    return cfg, weights, model.eval()


def image(assets) -> np.ndarray:
    """dog.jpg stretched to SIZE x SIZE, BGR uint8 (what a Detector reads)."""
    import cv2

    return cv2.resize(cv2.imread(str(assets("images/dog.jpg"))), (SIZE, SIZE))


def rgb01(bgr: np.ndarray) -> np.ndarray:
    return bgr[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0


# ----------------------------------------------------------------------------------------------- forward
@pytest.mark.slow
@pytest.mark.parametrize("name,gaussian", MIXED, ids=MIXED_IDS)
def test_eval_rows_equal_darknets_decode_of_each_head(darknet, assets, tmp_path, name, gaussian):
    cfg, weights, model = write_mixed(tmp_path, name, gaussian)
    x = rgb01(image(assets))
    heads, dets = darknet_heads(darknet, cfg, weights, x, thresh=-1.0)  # every slot of every head
    assert [h["type"] for h in heads] == ["Gaussian_yolo" if is_gaussian_head(m) else "yolo"
                                          for m in model.yolo_layers]
    with torch.no_grad():
        rows = model(torch.from_numpy(x)[None])[0].double().numpy()
    assert rows.shape[-1] == 5 + CLASSES + SIGMA_COLUMNS
    start = 0
    for meta, head in zip(heads, model.yolo_layers):
        ref = dets[meta["index"]]
        h, w = round(SIZE / head.stride[0]), round(SIZE / head.stride[1])
        count = head.num_anchors * h * w
        # Ours: (anchor, y, x); Darknet's: (cell, anchor).
        ours = rows[start:start + count].reshape(head.num_anchors, h * w, -1).transpose(1, 0, 2).reshape(count, -1)
        start += count
        assert ref.shape == (count, 9 + CLASSES)
        np.testing.assert_allclose(ours[:, :4] / SIZE, ref[:, :4], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ours[:, 4], ref[:, 4], rtol=1e-4, atol=1e-6)
        sigmas = ours[:, 5 + CLASSES:]
        np.testing.assert_allclose(sigmas, ref[:, 5:9], rtol=1e-4, atol=1e-6)
        # Darknet's class score of either head: objectness * p * (1 - mean sigma), the sigmas 0 for [yolo].
        scores = ours[:, 5:5 + CLASSES] * ours[:, 4:5] * (1 - sigmas.mean(1, keepdims=True))
        np.testing.assert_allclose(scores, ref[:, 9:], rtol=1e-4, atol=1e-6)
        if not is_gaussian_head(head):
            assert (ours[:, 5 + CLASSES:] == 0).all()
        else:
            assert (ours[:, 5 + CLASSES:] > 0).all()
    assert start == rows.shape[0]


def darknet_detection_rows(dets: Dict[int, np.ndarray]) -> np.ndarray:
    """Darknet's detections -> rows (score, class, cx, cy, w, h in pixels, 4 uncertainties), best first."""
    rows = []
    for d in dets.values():
        for det in d:
            for j, prob in enumerate(det[9:]):
                if prob > 0:
                    rows.append([prob, j, *(det[:4] * SIZE), *det[5:9]])
    return np.array(sorted(rows, key=lambda r: -r[0]), dtype=np.float64).reshape(-1, 10)


@pytest.mark.slow
@pytest.mark.parametrize("name,gaussian", MIXED, ids=MIXED_IDS)
def test_detector_returns_darknets_detections_of_each_head(darknet, assets, tmp_path, name, gaussian):
    from yolo.inference.detector import Detector

    cfg, weights, model = write_mixed(tmp_path, name, gaussian)
    bgr = image(assets)
    thresh = 0.05
    _, dets = darknet_heads(darknet, cfg, weights, rgb01(bgr), thresh)
    ref = darknet_detection_rows(dets)
    detector = Detector(cfg, weights, img_size=SIZE, conf_thres=thresh, iou_thres=1.0, multi_label=True,
                        max_det=100000, device="cpu")
    (det,) = detector(bgr)
    plain = [i for i, m in enumerate(model.module_list) if m in model.yolo_layers and not is_gaussian_head(m)]
    assert len(ref) > 10 and len(det["scores"]) == len(ref)
    assert any(len(dets.get(i, [])) for i in plain), "no detection from the [yolo] head: nothing compared there"
    # One order for both (scores tie across anchors and heads): by class, then box corners.
    xyxy = np.concatenate([ref[:, 2:4] - ref[:, 4:6] / 2, ref[:, 2:4] + ref[:, 4:6] / 2], 1).clip(0, SIZE)
    theirs = np.lexsort((*xyxy.T[::-1], ref[:, 1]))
    boxes = det["boxes"].double().numpy()
    order = np.lexsort((*boxes.T[::-1], det["labels"].numpy()))
    assert (det["labels"].numpy()[order] == ref[theirs, 1]).all()
    np.testing.assert_allclose(det["scores"].numpy()[order], ref[theirs, 0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(boxes[order], xyxy[theirs], atol=2e-3)
    np.testing.assert_allclose(det["box_sigmas"].numpy()[order], ref[theirs, 6:], atol=1e-5)


# -------------------------------------------------------------------------------------------------- loss
@pytest.mark.slow
@pytest.mark.parametrize("name,gaussian", MIXED, ids=MIXED_IDS)
def test_loss_gradient_equals_darknets_delta_per_head(darknet, assets, tmp_path, name, gaussian):
    cfg, weights, model = write_mixed(tmp_path, name, gaussian)
    hw = (SIZE, SIZE)
    x, truths = coco_images_area_resized(assets, COCO_PAIRS[1], hw)
    truths = [np.concatenate([t[:, :4], t[:, 4:] % CLASSES], 1) for t in truths]
    dump = darknet.train(cfg, weights, x, truths)
    index = [i for i, m in enumerate(model.module_list) if m in model.yolo_layers]
    outs = []
    for i, head in zip(index, model.yolo_layers):
        inp = torch.from_numpy(dump.out(i - 1).copy())
        n, _, gh, gw = inp.shape
        outs.append(inp.view(n, head.num_anchors, head.num_outputs, gh, gw).permute(0, 1, 3, 4, 2)
                    .contiguous().requires_grad_(True))
    model.train()
    loss, _ = YoloLoss(model)(outs, targets_px(truths, hw), hw)
    loss.backward()
    for i, head, out in zip(index, model.yolo_layers, outs):
        n, _, gh, gw = dump.delta(i).shape
        delta = torch.from_numpy(dump.delta(i).copy())
        expected = delta.view(n, head.num_anchors, head.num_outputs, gh, gw).permute(0, 1, 3, 4, 2)
        largest = float(expected.abs().max())
        assert largest > 0, f"layer {i}: Darknet's delta is all zero (nothing to compare)"
        err = float((-n * out.grad - expected).abs().max()) / largest
        assert err < 1e-5, f"layer {i} ([{type(head).__name__}]): gradient differs by {err:.2e} of max |delta|"


# ------------------------------------------------------------------------ export, evaluation, anchors, checks
@pytest.mark.slow
def test_export_onnx_and_torchscript_of_a_mixed_network(tmp_path):
    from yolo.export import NMSOptions, export_onnx, export_torchscript, verify_onnx, verify_torchscript

    cfg = tmp_path / "mixed.cfg"
    cfg.write_text(mixed_cfg("yolov3-tiny.cfg", {1}))
    model = Darknet(cfg)
    randomize_model(model, 1, calibrate_hw=(SIZE, SIZE))
    model.eval()
    inputs = [torch.rand(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))]
    assert verify_onnx(export_onnx(model, tmp_path / "m.onnx", (SIZE, SIZE)), model, inputs) < 1e-3
    assert verify_torchscript(export_torchscript(model, tmp_path / "m.ts", (SIZE, SIZE)), model, inputs) < 1e-3
    with pytest.raises(ValueError, match="Gaussian_yolo"):
        export_onnx(model, tmp_path / "nms.onnx", (SIZE, SIZE), nms=NMSOptions())


def test_evaluation_scores_each_head_by_its_rule(tmp_path):
    """evaluate_model on a mixed network: every detection of the Detector's rule (zero sigmas for the [yolo]
    head's rows), none taken from the sigma columns as classes."""
    from helpers import make_gt
    from yolo.evaluation import Evaluator, evaluate_model
    from yolo.inference.preprocess import LetterboxInfo
    from yolo.inference.postprocess import PostprocessOptions, postprocess

    cfg = tmp_path / "mixed.cfg"
    cfg.write_text(mixed_cfg("yolov3-tiny.cfg", {0}))
    model = Darknet(cfg)
    randomize_model(model, 2, calibrate_hw=(SIZE, SIZE))
    model.eval()
    x = torch.rand(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(3))
    info = {"image_id": 1, "orig_shape": (SIZE, SIZE), "letterbox": LetterboxInfo(1.0, 1.0, 0.0, 0.0)}
    gt = make_gt(1, [[10, 10, 60, 60]], [0], (SIZE, SIZE))
    evaluator = Evaluator(["a", "b", "c"], [gt])
    metrics = evaluate_model(model, [(x, torch.zeros(0, 6), [info])], evaluator, conf_thres=0.05, iou_thres=1.0,
                             multi_label=False, max_det=100000, progress=False)
    with torch.no_grad():
        (expected,) = postprocess(model(x), PostprocessOptions(conf_thres=0.05, iou_thres=1.0, max_det=100000,
                                                              gaussian=True))
    assert metrics["num_detections"] == len(expected["scores"]) > 0
    scores = sorted(r["score"] for r in evaluator.results_json())
    np.testing.assert_allclose(scores, sorted(expected["scores"].tolist()), rtol=1e-5)


def test_uniform_rows_keep_a_single_kind_unchanged():
    """Networks of one head kind: the rows concatenate as they are (no sigma columns added)."""
    from yolo.models.heads import HeadOptions
    from yolo.models.layer_types.yolo_head import YOLOLayer
    from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer, GaussianYoloOptions

    plain = YOLOLayer(torch.ones(2), [0], 3, HeadOptions())
    gauss = GaussianYOLOLayer(torch.ones(2), [0], 3, GaussianYoloOptions())
    a, b = torch.rand(1, 4, 8), torch.rand(1, 2, 8)
    assert torch.equal(uniform_eval_rows([a, b], [plain, plain]), torch.cat([a, b], 1))
    c, d = torch.rand(1, 4, 12), torch.rand(1, 2, 12)
    assert torch.equal(uniform_eval_rows([c, d], [gauss, gauss]), torch.cat([c, d], 1))
    mixed = uniform_eval_rows([a, d], [plain, gauss])
    assert torch.equal(mixed[:, :4, :8], a) and (mixed[:, :4, 8:] == 0).all() and torch.equal(mixed[:, 4:], d)
    assert has_gaussian_heads([plain, gauss]) and not has_gaussian_heads([plain, plain])
    assert is_gaussian_head(gauss) and not is_gaussian_head(plain) and not is_gaussian_head(torch.nn.Identity())


def test_anchors_tool_writes_every_head_of_a_mixed_cfg():
    from yolo.anchors import set_cfg_anchors

    text = mixed_cfg("yolov3-tiny.cfg", {0})
    anchors = np.array([[11, 15], [24, 28], [38, 59], [82, 83], [136, 170], [345, 320]], np.float32)
    out = set_cfg_anchors(text, anchors, "mixed.cfg")
    assert out.count("anchors= 11, 15,  24, 28,  38, 59,  82, 83, 136,170, 345,320") == 2


def test_heads_with_different_classes_share_the_most_classes(tmp_path, caplog):
    """Darknet only prints an error for heads with different classes and sizes every detection's probabilities
    by the first head's: a head with fewer classes leaves the others at zero. Ours: a warning with the file and
    line, and rows with the most classes, zero where a head has none."""
    text = mixed_cfg("yolov3-tiny.cfg", {0})
    second = text.rindex("classes=3")
    text = text[:second] + "classes=2" + text[second + len("classes=3"):]
    text = text.replace("filters=24", "filters=21")  # (2 + 5) * 3
    cfg = tmp_path / "classes.cfg"
    cfg.write_text(text)
    line = text[:second].count("\n") + 1
    with caplog.at_level(logging.WARNING):
        model = Darknet(cfg).eval()
    assert any(r.getMessage().startswith(f"{cfg}:{line}: [yolo] classes=2, but the first head (layer 16) has "
                                         "classes=3") for r in caplog.records)
    assert model.num_classes == 3
    with torch.no_grad():
        rows = model(torch.rand(1, 3, SIZE, SIZE))
    first = model.yolo_layers[0]
    count = first.num_anchors * (SIZE // 32) ** 2
    assert rows.shape == (1, count + 3 * (SIZE // 16) ** 2, 5 + 3 + SIGMA_COLUMNS)
    assert (rows[0, count:, 7:] == 0).all() and (rows[0, count:, 5:7] > 0).all()
