"""[Gaussian_yolo] (Gaussian YOLOv3) against Darknet itself: build and forward layer by layer, the training delta
(src/gaussian_yolo_layer.c) on real coco128 images with the head fed Darknet's own head input, weights round trip,
the Detector's output (Darknet's score rule with the uncertainties), ONNX/TorchScript export, and a short
training run."""
import random

import numpy as np
import pytest
import torch

from cfg_snippets import SMALL_BACKBONE
from conftest import darknet_file
from darknet_parity import assert_deltas_equal, coco_batch, crowded_truths, head_deltas, sgd_losses, write_weights
from helpers import make_gt, randomize_model
from yolo.errors import CfgError
from yolo.losses.gaussian_yolo_loss import gaussian_yolo_loss
from yolo.inference.postprocess import PostprocessOptions, postprocess
from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.model import Darknet

BDD = "Gaussian_yolov3_BDD.cfg"


def bdd_cfg():
    return darknet_file(f"cfg/{BDD}")


def random_gaussian_cfg(rng: random.Random, classes: int = None, width: int = 128, height: int = 96) -> str:
    """A small random [Gaussian_yolo] network: three convs and a maxpool, then the head with random options."""
    classes = classes or rng.randint(1, 5)
    num = rng.randint(2, 6)
    mask = sorted(rng.sample(range(num), rng.randint(1, num)))
    anchors = ", ".join(f"{rng.uniform(6, 90):.1f},{rng.uniform(6, 90):.1f}" for _ in range(num))
    options = {
        "mask": ",".join(map(str, mask)), "anchors": anchors, "classes": classes, "num": num,
        "iou_loss": rng.choice(["mse", "iou", "giou", "diou", "ciou"]),
        "yolo_point": rng.choice(["center", "center", "left_top", "right_bottom"]),
        "scale_x_y": rng.choice([1.0, 1.05, 1.2]),
        "iou_normalizer": round(rng.uniform(0.1, 1.0), 3), "uc_normalizer": round(rng.uniform(0.5, 1.5), 3),
        "obj_normalizer": round(rng.uniform(0.5, 2.0), 3), "ignore_thresh": round(rng.uniform(0.05, 0.7), 3),
        "truth_thresh": rng.choice([1.0, 1.0, round(rng.uniform(0.1, 0.5), 3)]),
        "iou_thresh": rng.choice([1.0, round(rng.uniform(0.1, 0.5), 3)]),
        "iou_thresh_kind": rng.choice(["iou", "giou", "diou", "ciou"]),
        "label_smooth_eps": rng.choice([0.0, 0.1]),
        "random": 0, "jitter": 0.2,
    }
    if rng.random() < 0.4:
        options["max_delta"] = round(rng.uniform(0.5, 5.0), 3)
    head = "\n".join(f"{k}={v}" for k, v in options.items())
    return f"""[net]
batch=1
width={width}
height={height}
channels=3

{SMALL_BACKBONE}
[convolutional]
filters={(classes + 9) * len(mask)}
size=1
stride=1
pad=1
activation=linear

[Gaussian_yolo]
{head}
"""


def write_random_gaussian_cfg(tmp_path, seed: int, **kwargs):
    text = random_gaussian_cfg(random.Random(seed), **kwargs)
    path = tmp_path / f"gaussian-{seed}.cfg"
    path.write_text(text)
    return path, text


@pytest.fixture(scope="module")
def bdd(darknet, tmp_path_factory):
    """Gaussian_yolov3_BDD.cfg with random weights, written by our writer: (cfg, model, weights path)."""
    cfg = bdd_cfg()
    model = Darknet(cfg)
    randomize_model(model, 0, calibrate_hw=(64, 64))
    weights = write_weights(model, tmp_path_factory.mktemp("bdd") / "bdd.weights", 0)
    return cfg, model, weights


# -------------------------------------------------------------------------------------------- build/forward
@pytest.mark.slow
def test_bdd_forward_matches_darknet_layer_by_layer(darknet, bdd):
    cfg, model, weights = bdd
    model.eval()
    x = np.random.RandomState(0).rand(1, 3, 64, 128).astype(np.float32)
    dump = darknet.forward(cfg, weights, x)
    with torch.no_grad():
        outputs, _ = model.layer_outputs(torch.from_numpy(x))
    assert len(dump.layers) == len(outputs) == len(model.module_list)
    heads = 0
    for i, (meta, ours) in enumerate(zip(dump.layers, outputs)):
        ref = dump.out(i)
        if meta.type == "Gaussian_yolo":
            head = model.module_list[i]
            n, c, h, w = ours.shape
            raw = ours.reshape(n, head.num_anchors, head.num_outputs, h, w).permute(0, 1, 3, 4, 2)
            ours = head.activate(raw).permute(0, 1, 4, 2, 3).reshape(n, c, h, w)
            heads += 1
        assert ref.shape == tuple(ours.shape), (i, meta)
        err = np.abs(ref - ours.numpy()).max() / max(1e-6, np.abs(ref).max())
        assert err < 1e-4, f"layer {i} ({meta.type}): relative error {err:.2e}"
    assert heads == 3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_head_activation_matches_darknet(darknet, tmp_path, seed):
    """scale_x_y and the activated channels of random heads, directly on Darknet's output."""
    cfg, _ = write_random_gaussian_cfg(tmp_path, seed)
    model = Darknet(cfg)
    randomize_model(model, seed)
    weights = write_weights(model, tmp_path / "w.weights", 0)
    x = np.random.RandomState(seed).rand(1, 3, 96, 128).astype(np.float32)
    dump = darknet.forward(cfg, weights, x)
    head = model.yolo_layers[0]
    index = len(model.module_list) - 1
    raw = torch.from_numpy(dump.out(index - 1).copy())
    n, c, h, w = raw.shape
    ours = head.activate(raw.reshape(n, head.num_anchors, head.num_outputs, h, w).permute(0, 1, 3, 4, 2))
    ours = ours.permute(0, 1, 4, 2, 3).reshape(n, c, h, w).numpy()
    np.testing.assert_allclose(ours, dump.out(index), rtol=1e-5, atol=1e-6)


def test_builder_checks_options(tmp_path):
    cfg, text = write_random_gaussian_cfg(tmp_path, 5, classes=3)
    bad = tmp_path / "bad.cfg"
    line = text.splitlines().index("[Gaussian_yolo]") + 1
    bad.write_text(text.replace("classes=3", "classes=4"))
    with pytest.raises(CfgError, match=rf"bad\.cfg:{line}: \[gaussian_yolo\].*\(classes\+9\)\*len\(mask\)"):
        Darknet(bad)
    bad.write_text(text.replace("yolo_point=", "yolo_point=middle\n#"))
    with pytest.raises(CfgError, match=r"yolo_point=middle is not one of center, left_top, right_bottom"):
        Darknet(bad)
    bad.write_text(text.replace("iou_loss=", "iou_loss=l1\n#"))
    with pytest.raises(CfgError, match=r"iou_loss=l1 is not one of"):
        Darknet(bad)


def test_weights_round_trip_is_byte_identical(tmp_path):
    cfg, _ = write_random_gaussian_cfg(tmp_path, 3)
    model = Darknet(cfg)
    randomize_model(model, 3)
    first = write_weights(model, tmp_path / "a.weights", 12345)
    again = Darknet(cfg).load_darknet_weights(first)
    again.save_darknet_weights(tmp_path / "b.weights")
    assert first.read_bytes() == (tmp_path / "b.weights").read_bytes()


# ------------------------------------------------------------------------------------------------- deltas
@pytest.mark.slow
def test_bdd_delta_equals_darknet(darknet, assets, bdd):
    cfg, model, weights = bdd
    x, truths, targets = coco_batch(assets, 2, (64, 128), 10)
    pairs = head_deltas(darknet, cfg, model, weights, x, truths, targets, gaussian_yolo_loss)
    assert len(pairs) == 3
    assert_deltas_equal(pairs, BDD)


# Seeds chosen so that every iou_loss, every yolo_point, truth_thresh < 1, iou_thresh < 1 with each
# iou_thresh_kind, label_smooth_eps and max_delta occur. Input sides are powers of two so that the truths in
# pixels convert back to exactly Darknet's normalized floats.
@pytest.mark.parametrize("seed", [1, 2, 4, 6, 7, 16, 39])
def test_random_gaussian_options_delta_equals_darknet(darknet, assets, tmp_path, seed):
    cfg, text = write_random_gaussian_cfg(tmp_path, seed)
    model = Darknet(cfg)
    randomize_model(model, seed)
    weights = write_weights(model, tmp_path / "w.weights", 0)
    classes = model.num_classes
    x, truths, targets = coco_batch(assets, 2, (128, 128), classes, start=(7 * seed) % 120)
    pairs = head_deltas(darknet, cfg, model, weights, x, truths, targets, gaussian_yolo_loss)
    assert_deltas_equal(pairs, f"seed {seed}:\n{text}")


@pytest.mark.parametrize("seed", [2, 7, 16])
def test_crowded_truths_delta_equals_darknet(darknet, assets, tmp_path, seed):
    """Truths sharing a slot (their box deltas add up, their classes unite), an image without truths, and
    many truths in one image."""
    cfg, text = write_random_gaussian_cfg(tmp_path, seed)
    model = Darknet(cfg)
    randomize_model(model, seed)
    weights = write_weights(model, tmp_path / "w.weights", 0)
    x = coco_batch(assets, 3, (128, 128), model.num_classes)[0]
    truths, targets = crowded_truths(seed, 3, model.num_classes, 24, (128, 128))
    pairs = head_deltas(darknet, cfg, model, weights, x, truths, targets, gaussian_yolo_loss)
    assert_deltas_equal(pairs, f"seed {seed}, crowded truths:\n{text}")


def test_training_refuses_options_it_cannot_reproduce(tmp_path):
    _, text = write_random_gaussian_cfg(tmp_path, 1, classes=2)
    path = tmp_path / "smooth.cfg"
    path.write_text(text.replace("[Gaussian_yolo]\n", "[Gaussian_yolo]\nobjectness_smooth=1\n"))
    with pytest.raises(ValueError, match=r"smooth\.cfg:\d+: \[Gaussian_yolo\] objectness_smooth=1"):
        YoloLoss(Darknet(path))


def test_training_steps_lower_the_gaussian_loss(assets, tmp_path):

    cfg, _ = write_random_gaussian_cfg(tmp_path, 16)
    model = Darknet(cfg)
    randomize_model(model, 0)
    x, _, targets = coco_batch(assets, 2, (128, 128), model.num_classes)
    losses = sgd_losses(model, x, targets)
    assert np.isfinite(losses).all() and losses[-1] < 0.8 * losses[0], losses


# ------------------------------------------------------------------------------------ detection and export
def darknet_gaussian_detections(head_out: np.ndarray, head: GaussianYOLOLayer, input_hw, thresh: float):
    """Plain transcription of Darknet's get_gaussian_yolo_detections on its layer output (one image,
    Float[A*(9+C), H, W]): rows (score, class, cx, cy, w, h in input pixels, 4 sigmas) for every class whose
    ``objectness * p * (1 - mean sigma)`` exceeds ``thresh``; get_gaussian_yolo_box's yolo_point shifts."""
    in_h, in_w = input_hw
    k = 9 + head.num_classes
    _, grid_h, grid_w = head_out.shape
    anchors = head.all_anchors.numpy()
    rows = []
    for n, anchor in enumerate(head.mask):
        for row in range(grid_h):
            for col in range(grid_w):
                v = head_out[n * k:(n + 1) * k, row, col]
                if v[8] <= thresh:
                    continue
                box = [(col + v[0]) / grid_w * in_w, (row + v[2]) / grid_h * in_h,
                       np.exp(v[4]) * anchors[anchor, 0], np.exp(v[6]) * anchors[anchor, 1]]
                shift = {"center": 0.0, "left_top": 0.5, "right_bottom": -0.5}[head.opts.yolo_point]
                box[0] += shift * box[2]
                box[1] += shift * box[3]
                uc = v[[1, 3, 5, 7]]
                for j in range(head.num_classes):
                    prob = v[8] * v[9 + j] * (1.0 - uc.mean())
                    if prob > thresh:
                        rows.append([prob, j, *box, *uc])
    return np.array(sorted(rows, key=lambda r: -r[0]), dtype=np.float64).reshape(-1, 10)


def small_gaussian_model(tmp_path, seed: int = 16):
    """A random one-head [Gaussian_yolo] cfg with random weights: (cfg, weights, model)."""
    cfg, _ = write_random_gaussian_cfg(tmp_path, seed)
    model = Darknet(cfg)
    randomize_model(model, 5)
    return cfg, write_weights(model, tmp_path / "small.weights", 0), model


@pytest.fixture
def small_gaussian(tmp_path):
    return small_gaussian_model(tmp_path)  # yolo_point=center, 3 classes


@pytest.mark.slow
@pytest.mark.parametrize("seed", [16, 4, 29])  # yolo_point center, left_top, right_bottom
def test_detector_returns_darknet_detections_with_sigmas(darknet, assets, tmp_path, seed):
    """Every (box, class) Darknet's rule keeps (no NMS: iou_thres=1) with its score, box and uncertainties."""
    import cv2
    from yolo.inference.detector import Detector
    from yolo.inference.preprocess import preprocess

    cfg, weights, model = small_gaussian_model(tmp_path, seed)
    image = cv2.resize(cv2.imread(str(assets("images/dog.jpg"))), (128, 128))  # no letterbox padding
    thresh = 0.05
    detector = Detector(cfg, weights, img_size=128, conf_thres=thresh, iou_thres=1.0, multi_label=True,
                        max_det=100000, device="cpu")
    (det,) = detector(image)
    batch, _ = preprocess([image], (128, 128), "letterbox", torch.device("cpu"), torch.float32)
    dump = darknet.forward(cfg, weights, batch.numpy())
    ref = darknet_gaussian_detections(dump.out(len(model.module_list) - 1)[0], model.yolo_layers[0], (128, 128),
                                      thresh)
    assert set(det) == {"boxes", "scores", "labels", "names", "box_sigmas"}
    assert len(ref) > 10 and len(det["scores"]) == len(ref)
    xyxy = np.concatenate([ref[:, 2:4] - ref[:, 4:6] / 2, ref[:, 2:4] + ref[:, 4:6] / 2], 1).clip(0, 128)
    # Pair each of Darknet's rows with our detection of the same class and nearest box and score: two
    # detections with equal scores may come in either order, so no ordering by score is relied on.
    cost = (np.abs(det["boxes"].numpy()[None, :, :] - xyxy[:, None, :]).max(2)
            + np.abs(det["scores"].numpy()[None, :] - ref[:, :1])
            + 1e9 * (det["labels"].numpy()[None, :] != ref[:, 1:2]))
    order = torch.as_tensor(cost.argmin(1))
    assert len(set(order.tolist())) == len(ref), "two of Darknet's detections matched the same one of ours"
    np.testing.assert_allclose(det["scores"][order].numpy(), ref[:, 0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(det["boxes"][order].numpy(), xyxy, atol=2e-3)
    np.testing.assert_allclose(det["box_sigmas"][order].numpy(), ref[:, 6:], atol=1e-5)
    assert (det["labels"][order].numpy() == ref[:, 1]).all()


def test_detect_tool_draws_uncertainties(assets, small_gaussian, tmp_path, monkeypatch):
    """The saved image is the plain drawing (boxes, names, scores) plus, at the bottom-left corner inside each box,
    ``unc S`` with S the mean of the box's four uncertainties, in the box's colour (drawn here with OpenCV)."""
    import cv2
    from yolo.cli.detect import main, parse_args
    from yolo.inference.writer import Writer
    from yolo.visualize import class_color, draw_detections

    cfg, weights, _ = small_gaussian
    source = tmp_path / "dog.png"  # a lossless output: the drawing can be compared pixel for pixel
    cv2.imwrite(str(source), cv2.imread(str(assets("images/dog.jpg"))))
    annotated = []
    annotate = Writer.annotate

    def recording(writer, image, det):
        annotated.append((image.copy(), det, writer.names))
        return annotate(writer, image, det)

    monkeypatch.setattr(Writer, "annotate", recording)
    out = main(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--source", str(source),
                           "--output", str(tmp_path / "runs"), "--device", "cpu", "--img-size", "128",
                           "--conf-thres", "0.2"]))
    (image, det, names), = annotated
    assert 0 < len(det["scores"]) < 20 and det["box_sigmas"].shape == (len(det["scores"]), 4)
    plain = draw_detections(image, det["boxes"], det["scores"], det["labels"], names)
    expected = plain.copy()
    h, w = image.shape[:2]
    for (x1, _, _, y2), label, sigmas in zip(det["boxes"].tolist(), det["labels"].tolist(), det["box_sigmas"].tolist()):
        x1, y2 = min(max(x1, 0), w), min(max(y2, 0), h)
        corner = (int(min(x1 + 2, w - 1)), int(min(max(y2 - 4, 0), h - 1)))
        cv2.putText(expected, f"unc {sum(sigmas) / 4:.2f}", corner, cv2.FONT_HERSHEY_SIMPLEX,
                    max(0.35, (h + w) / 2 * 0.0008), class_color(label), 1, cv2.LINE_AA)
    saved = cv2.imread(str(out / "dog.png"))
    assert not np.array_equal(saved, plain)
    np.testing.assert_array_equal(saved, expected)


def test_uncertainty_is_written_inside_each_box():
    from yolo.visualize import draw_box_uncertainty

    image = np.zeros((100, 200, 3), np.uint8)
    out = draw_box_uncertainty(image, torch.tensor([[10.0, 10.0, 150.0, 90.0]]), torch.tensor([2]),
                               torch.tensor([[0.1, 0.2, 0.3, 0.4]]))
    ys, xs = np.nonzero(out.any(2))
    assert len(ys) and xs.min() >= 10 and xs.max() <= 150 and ys.min() >= 10 and ys.max() <= 90


def test_export_onnx_and_torchscript_verified(small_gaussian, tmp_path):
    from yolo.export import NMSOptions, export_onnx, export_torchscript, verify_onnx, verify_torchscript

    _, _, model = small_gaussian
    model.eval()
    inputs = [torch.rand(2, 3, 128, 128, generator=torch.Generator().manual_seed(0))]
    onnx_path = export_onnx(model, tmp_path / "g.onnx", (128, 128))
    assert verify_onnx(onnx_path, model, inputs) < 1e-3
    ts_path = export_torchscript(model, tmp_path / "g.torchscript", (128, 128))
    assert verify_torchscript(ts_path, model, inputs) < 1e-3
    with torch.no_grad():
        rows = model(inputs[0])
    assert rows.shape[-1] == 9 + model.num_classes
    with pytest.raises(ValueError, match="Gaussian_yolo"):
        export_onnx(model, tmp_path / "nms.onnx", (128, 128), nms=NMSOptions())


def test_gaussian_rows_use_darknet_score_rule():
    """One row by hand: score = objectness * p * (1 - mean sigma), thresholded strictly."""
    row = torch.tensor([[[50.0, 40.0, 20.0, 10.0, 0.8, 0.5, 0.9, 0.1, 0.2, 0.3, 0.4]]])
    (det,) = postprocess(row, PostprocessOptions(conf_thres=0.1, gaussian=True))
    assert det["labels"].tolist() == [1]
    assert det["scores"].item() == pytest.approx(0.8 * 0.9 * (1 - 0.25))
    assert det["boxes"].tolist() == [[40.0, 35.0, 60.0, 45.0]]
    assert det["box_sigmas"][0].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    (none,) = postprocess(row, PostprocessOptions(conf_thres=0.8, gaussian=True))
    assert none["boxes"].shape == (0, 4) and none["box_sigmas"].shape == (0, 4)


def test_post_processing_of_a_gaussian_model_scores_its_rows_by_darknet_rule(small_gaussian):
    """PostprocessOptions.for_model knows the rows end with four sigmas, so every user of it (training's sample
    pictures here) scores them by Darknet's rule and returns the sigmas."""
    from yolo.engine.hooks.writers import sample_detections

    _, _, model = small_gaussian
    config = PostprocessOptions.for_model(model, conf_thres=0.01)
    assert config.gaussian and not PostprocessOptions.for_model(torch.nn.Linear(1, 1)).gaussian
    images = torch.randint(0, 256, (2, 3, 96, 128), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    assert [sorted(d) for d in sample_detections(model, images, torch.device("cpu"))] == \
        [["box_sigmas", "boxes", "labels", "scores"]] * 2
    with torch.no_grad():
        rows = model.eval()(images.float() / 255)
    found = postprocess(rows, config)
    assert sum(len(d["scores"]) for d in found) > 0
    for got, want in zip(found, postprocess(rows, PostprocessOptions(conf_thres=0.01, gaussian=True))):
        assert torch.equal(got["scores"], want["scores"]) and torch.equal(got["box_sigmas"], want["box_sigmas"])


def test_detector_takes_nms_kind_from_a_last_gaussian_head(tmp_path):
    """Darknet's detector reads nms_kind from the last layer, here a [Gaussian_yolo] (cornersnms suppresses by
    IoU like the default)."""
    from yolo.inference.detector import Detector

    _, text = write_random_gaussian_cfg(tmp_path, 16)
    for kind, expected in (("diounms", "diounms"), ("cornersnms", "default")):
        cfg = tmp_path / f"{kind}.cfg"
        cfg.write_text(text.replace("[Gaussian_yolo]\n", f"[Gaussian_yolo]\nnms_kind={kind}\nbeta_nms=0.7\n"))
        detector = Detector(cfg, None, img_size=128, device="cpu", fast=False)
        assert detector.nms_kind == expected


def test_evaluation_scores_gaussian_rows_by_darknet_rule():
    """evaluate_model on [Gaussian_yolo] rows: the four sigmas are not taken for classes, and the score is
    objectness * p * (1 - mean sigma)."""
    from yolo.evaluation import Evaluator, evaluate_model
    from yolo.models.layer_types.gaussian_yolo import GaussianYoloOptions
    from yolo.ops.letterbox import LetterboxInfo

    class RowsEcho(torch.nn.Module):
        def __init__(self, rows):
            super().__init__()
            self.rows = rows
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.yolo_layers = [GaussianYOLOLayer(torch.ones(2), [0], 3, GaussianYoloOptions())]

        def forward(self, x):
            return self.rows

    gt = make_gt(7, [[40, 30, 200, 150], [300, 200, 400, 300]], [2, 0], (416, 416))
    rows = torch.zeros(1, 5, 9 + 3)
    for j, ((x1, y1, x2, y2), label) in enumerate(zip(gt["boxes"].tolist(), gt["labels"].tolist())):
        rows[0, j, :5] = torch.tensor([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, 0.9])
        rows[0, j, 5 + label] = 0.8
        rows[0, j, 8:] = 0.2  # sigmas: as class probabilities they would add wrong detections
    info = {"image_id": 7, "orig_shape": (416, 416), "letterbox": LetterboxInfo(1.0, 1.0, 0.0, 0.0)}
    evaluator = Evaluator(["a", "b", "c"], [gt])
    metrics = evaluate_model(RowsEcho(rows), [(torch.rand(1, 3, 416, 416), torch.zeros(0, 6), [info])], evaluator,
                             conf_thres=0.001, iou_thres=0.6, progress=False)
    assert metrics["num_detections"] == 2 and metrics["mAP50_95"] == pytest.approx(1.0)
    scores = sorted(r["score"] for r in evaluator.results_json())
    assert scores == pytest.approx([0.9 * 0.8 * 0.8] * 2)
