"""``Detector`` against a reference pipeline built on OpenCV DNN, plus the fast inference kernels
against plain PyTorch ops and the plain eval model."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cfg_snippets import ONE_HEAD_CFG
from conftest import asset
from helpers import darknet_letterbox
from reference import cfg_with_thresh0, cv2
from yolo.errors import ImageReadError
from yolo.accel.cpu_conv import FusedConvCPU, onednn_conv_available
from yolo.accel.maxpool import FastMaxPool
from yolo.accel.winograd import WinogradConv3x3
from yolo.inference.detector import Detector
from yolo.inference.prepare import prepare_for_inference
from yolo.inference.preprocess import preprocess
from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.maxpool import MaxPool
from yolo.models.model import Darknet, load_model
from yolo.models.weights import randomize_weights
from yolo.settings.detect import DetectorOptions

IMAGES = ["dog.jpg", "horses.jpg", "person.jpg", "eagle.jpg", "giraffe.jpg", "kite.jpg", "scream.jpg"]
CONF, IOU = 0.25, 0.45


@pytest.fixture(scope="module")
def tiny_paths():
    return asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights"), asset("cfg/coco.names")


@pytest.fixture(scope="module")
def opencv_net(tiny_paths, tmp_path_factory):
    cfg, weights, _ = tiny_paths
    net = cv2.dnn.readNetFromDarknet(str(cfg_with_thresh0(cfg, tmp_path_factory.mktemp("cfg"))), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    return net


def opencv_detect(net, net_input, size_hw, to_original, original_hw):
    """Reference pipeline: blobFromImage -> OpenCV forward -> best class -> threshold -> NMSBoxesBatched
    -> boxes clipped to the original image.

    ``to_original(x, y)`` maps input-relative coordinates (0..1) to original pixels.
    Returns (boxes xyxy original pixels, scores, labels) as numpy arrays.
    """
    blob = cv2.dnn.blobFromImage(net_input, 1 / 255.0, (size_hw[1], size_hw[0]), swapRB=True, crop=False)
    net.setInput(blob)
    rows = np.concatenate([o.reshape(-1, o.shape[-1]) for o in net.forward(net.getUnconnectedOutLayersNames())])
    labels = rows[:, 5:].argmax(1)
    scores = rows[np.arange(len(rows)), 5 + labels]
    keep = scores > CONF
    rows, labels, scores = rows[keep], labels[keep], scores[keep]
    x1, y1 = to_original(rows[:, 0] - rows[:, 2] / 2, rows[:, 1] - rows[:, 3] / 2)
    x2, y2 = to_original(rows[:, 0] + rows[:, 2] / 2, rows[:, 1] + rows[:, 3] / 2)
    xywh = np.stack([x1, y1, x2 - x1, y2 - y1], 1)
    idx = np.asarray(cv2.dnn.NMSBoxesBatched(xywh.tolist(), scores.tolist(), labels.tolist(), CONF, IOU),
                     dtype=np.int64).reshape(-1)
    h, w = original_hw
    boxes = np.clip(np.stack([x1, y1, x2, y2], 1)[idx], 0, [w, h, w, h])
    return boxes, scores[idx], labels[idx]


def iou_matrix(a, b):
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    iw = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = iw * ih
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None] - inter)


def assert_same_detections(ours, ref, min_iou, score_tol):
    """One-to-one match: same class, IoU >= min_iou, |score difference| <= score_tol. A detection
    without partner is allowed only when its score is within score_tol of the threshold."""
    boxes, scores, labels = ours["boxes"].numpy(), ours["scores"].numpy(), ours["labels"].numpy()
    rboxes, rscores, rlabels = ref
    ious = iou_matrix(boxes, rboxes)
    unmatched_ref = set(range(len(rlabels)))
    for i in np.argsort(-scores):
        candidates = [j for j in unmatched_ref if rlabels[j] == labels[i] and ious[i, j] >= min_iou
                      and abs(rscores[j] - scores[i]) <= score_tol]
        if candidates:
            unmatched_ref.remove(max(candidates, key=lambda j: ious[i, j]))
        else:
            assert scores[i] - CONF <= score_tol, f"ours {labels[i]} {scores[i]:.4f} {boxes[i]} has no match in {ref}"
    for j in unmatched_ref:
        assert rscores[j] - CONF <= score_tol, f"reference {rlabels[j]} {rscores[j]:.4f} {rboxes[j]} missing"


@pytest.fixture(scope="module")
def detector_stretch(tiny_paths):
    cfg, weights, names = tiny_paths
    # OpenCV's resampler: compared with OpenCV DNN's pipeline (blobFromImage)
    return Detector(cfg, weights, names=names, device="cpu", img_size=416, resize="stretch", resample="opencv")


@pytest.fixture(scope="module")
def detector_letterbox(tiny_paths):
    cfg, weights, names = tiny_paths
    return Detector(cfg, weights, names=names, device="cpu", img_size=416, resize="letterbox", resample="opencv")


@pytest.mark.slow
def test_stretch_equals_opencv_pipeline(detector_stretch, opencv_net):
    if onednn_conv_available():  # the comparison covers the fast CPU kernels
        assert any(isinstance(m, WinogradConv3x3) for m in detector_stretch.net.module_list)
    images = [cv2.imread(str(asset(f"images/{name}"))) for name in IMAGES]
    results = detector_stretch(images)  # batched
    found = 0
    for image, ours in zip(images, results):
        h, w = image.shape[:2]
        ref = opencv_detect(opencv_net, image, (416, 416), lambda x, y: (x * w, y * h), (h, w))
        assert_same_detections(ours, ref, min_iou=0.99, score_tol=1e-3)
        found += len(ref[2])
    assert found >= 10  # the comparison is not vacuous


def test_dog_finds_dog_bicycle_car_truck(detector_stretch):
    names = set(detector_stretch(str(asset("images/dog.jpg")))[0]["names"])
    assert {"dog", "car", "truck"} <= names


@pytest.mark.slow
def test_letterbox_agrees_with_opencv_on_letterboxed_input(detector_letterbox, opencv_net):
    """Darknet's letterbox built independently on uint8 and run through OpenCV, boxes mapped back with
    the same geometry: close agreement (ours fills exactly 0.5, the uint8 reference 128/255)."""
    found = 0
    for name in IMAGES:
        image = cv2.imread(str(asset(f"images/{name}")))
        canvas, (sx, sy, dx, dy) = darknet_letterbox(image, (416, 416))
        ref = opencv_detect(opencv_net, canvas, (416, 416), lambda x, y: ((x * 416 - dx) / sx, (y * 416 - dy) / sy),
                            image.shape[:2])
        ours = detector_letterbox(image)[0]
        assert_same_detections(ours, ref, min_iou=0.99, score_tol=2e-3)
        found += len(ref[2])
    assert found >= 10


@pytest.mark.slow
def test_fast_path_equals_plain_model(tiny_paths):
    cfg, weights, names = tiny_paths
    fast = Detector(cfg, weights, names=names, device="cpu", img_size=(320, 416))
    plain = Detector(cfg, weights, names=names, device="cpu", img_size=(320, 416), fast=False)
    images = [cv2.imread(str(asset(f"images/{name}"))) for name in IMAGES[:3]]
    for a, b in zip(fast(images), plain(images)):
        assert a["labels"].tolist() == b["labels"].tolist()
        assert torch.allclose(a["scores"], b["scores"], atol=1e-4)
        assert torch.allclose(a["boxes"], b["boxes"], atol=0.05)


# -------------------------------------------------------------------------------- Detector API
def test_inputs_outputs_and_errors(detector_stretch, tmp_path):
    dog = asset("images/dog.jpg")
    image = cv2.imread(str(dog))
    single = detector_stretch(dog)
    assert isinstance(single, list) and len(single) == 1
    det = single[0]
    assert det["boxes"].dtype == torch.float32 and det["boxes"].shape[1] == 4
    assert det["labels"].dtype == torch.int64 and len(det["names"]) == len(det["labels"])
    assert (det["boxes"][:, 2] <= image.shape[1]).all() and (det["boxes"][:, 3] <= image.shape[0]).all()
    many = detector_stretch([str(dog), image, cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)])
    assert len(many) == 3
    assert torch.equal(many[0]["boxes"], many[1]["boxes"]) and torch.equal(many[0]["scores"], det["scores"])
    assert many[2]["boxes"].shape[1] == 4
    assert detector_stretch([]) == []
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(ImageReadError, match="bad.jpg"):
        detector_stretch(bad)
    with pytest.raises(ImageReadError, match="missing.jpg"):
        detector_stretch(tmp_path / "missing.jpg")
    with pytest.raises(ValueError, match="uint8"):
        detector_stretch(image.astype(np.float32))


def test_no_detections_gives_empty_tensors(tiny_paths):
    cfg, weights, _ = tiny_paths
    det = Detector(cfg, weights, device="cpu", img_size=128, conf_thres=0.999)
    out = det(np.full((200, 300, 3), 127, np.uint8))[0]
    assert out["boxes"].shape == (0, 4) and out["scores"].shape == (0,) and out["labels"].shape == (0,)
    assert out["labels"].dtype == torch.int64 and out["names"] == []
    # no names given: the coco.names beside the cfg (the assets keep it there)
    assert det.names[:2] == ["person", "bicycle"] and len(det.names) == 80
    assert det.names_from == str(cfg.resolve().parent / "coco.names")


def test_bad_arguments(tiny_paths):
    cfg, weights, _ = tiny_paths
    with pytest.raises(ValueError, match="^img_size: 400x400 must be a multiple of the network stride 32"):
        Detector(cfg, weights, device="cpu", img_size=400)
    with pytest.raises(ValueError, match="class names"):
        Detector(cfg, weights, names=["a", "b"], device="cpu")
    with pytest.raises(ValueError, match="resize"):
        Detector(cfg, weights, device="cpu", resize="crop")


@pytest.mark.slow
def test_pt_checkpoint_gives_same_detections(detector_stretch, tiny_paths, tmp_path):
    from yolo.models.checkpoint import model_checkpoint, save_checkpoint

    cfg, weights, names = tiny_paths
    model = load_model(cfg, weights)
    path = save_checkpoint(model_checkpoint(model, names=detector_stretch.names), tmp_path / "tiny.pt")
    det = Detector(None, path, device="cpu", resize="stretch", resample="opencv")
    assert det.names == detector_stretch.names
    a, b = det(asset("images/dog.jpg"))[0], detector_stretch(asset("images/dog.jpg"))[0]
    assert a["names"] == b["names"] and torch.allclose(a["scores"], b["scores"], atol=1e-6)


def test_preprocess_stretch_equals_blob_from_image():
    image = np.random.default_rng(0).integers(0, 256, (300, 500, 3), dtype=np.uint8)
    batch, infos = preprocess([image, image], (320, 416), "stretch", resample="opencv")
    blob = cv2.dnn.blobFromImage(image, 1 / 255.0, (416, 320), swapRB=True, crop=False)
    assert batch.shape == (2, 3, 320, 416)
    assert np.abs(batch[1].numpy() - blob[0]).max() < 1e-6
    letter, info = preprocess([image], (416, 416), "letterbox")
    assert letter[0, :, 0, 0].tolist() == [0.5, 0.5, 0.5]  # Darknet's gray border, exactly
    assert info[0].pad_y > 0 and info[0].pad_x == 0


# ----------------------------------------------------------------------------- fast CPU kernels
def reference_conv(x, conv, activation):
    y = F.conv2d(x.double(), conv.weight.double(), conv.bias.double(), conv.stride, conv.padding, conv.dilation,
                 conv.groups)
    return F.leaky_relu(y, 0.1) if activation == "leaky" else y


@pytest.mark.parametrize("m", [2, 3, 4])
@pytest.mark.parametrize("hw", [(13, 13), (26, 20), (7, 9)])
@pytest.mark.parametrize("activation", ["leaky", "linear"])
def test_winograd_conv_matches_conv2d(m, hw, activation):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(24, 40, 3, 1, 1, bias=True)
    x = torch.randn(2, 24, *hw).contiguous(memory_format=torch.channels_last)
    act = torch.nn.LeakyReLU(0.1) if activation == "leaky" else torch.nn.Identity()
    y = WinogradConv3x3(conv, activation, act, m=m)(x)
    ref = reference_conv(x, conv, activation)
    assert y.shape == ref.shape
    assert (y.double() - ref).abs().max() < 1e-4 * ref.abs().max()


def test_fused_onednn_conv_matches_conv2d():
    torch.manual_seed(0)
    for stride, groups, k in [(1, 1, 3), (2, 1, 3), (1, 1, 1), (2, 8, 3)]:
        conv = torch.nn.Conv2d(16, 32, k, stride, k // 2, groups=groups, bias=True)
        x = torch.randn(2, 16, 21, 18).contiguous(memory_format=torch.channels_last)
        y = FusedConvCPU(conv, "leaky", torch.nn.LeakyReLU(0.1), (1, 16, 40, 40))(x)
        ref = reference_conv(x, conv, "leaky")
        assert (y.double() - ref).abs().max() < 1e-5 * ref.abs().max()


@pytest.mark.parametrize("size,stride,padding", [(2, 2, 1), (2, 1, 1), (3, 2, 2), (5, 1, 4), (2, 2, 0), (3, 1, 2),
                                                 (3, 3, 2)])
@pytest.mark.parametrize("hw", [(13, 13), (12, 9), (16, 10)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_fast_maxpool_matches_darknet_maxpool(size, stride, padding, hw, channels_last):
    x = torch.randn(2, 3, *hw) - 2.0  # negative values: zero padding would show
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    pool = MaxPool(size, stride, padding)
    assert torch.equal(FastMaxPool(pool)(x), pool(x))


@pytest.mark.slow
@pytest.mark.parametrize("cfg_name,weights,hw", [
    ("yolov3.cfg", None, (192, 224)),  # maps of 12..112 pixels: Winograd and direct kernels
    ("yolov4-tiny.cfg", None, (160, 224)),
    ("yolov2-tiny.cfg", None, (160, 160)),
    ("yolo-fastest-1.1.cfg", "yolo-fastest-1.1.weights", (128, 160)),
])
def test_prepared_model_matches_eval_model(cfg_name, weights, hw):
    if weights:
        model = load_model(asset(f"cfg/{cfg_name}"), asset(f"weights/{weights}"))
    else:
        model = Darknet(asset(f"cfg/{cfg_name}"))
        randomize_weights(model, seed=1)
    model.eval()
    fast = prepare_for_inference(model, "cpu", example_hw=hw)
    assert any(isinstance(m, (FusedConvCPU, WinogradConv3x3)) for m in fast.module_list)
    if cfg_name == "yolov3.cfg" and onednn_conv_available():
        assert any(isinstance(m, WinogradConv3x3) for m in fast.module_list)
    assert any(isinstance(m, ConvBNAct) and m.bn is not None for m in model.module_list)  # original untouched
    x = torch.rand(1 if cfg_name == "yolov3.cfg" else 2, 3, *hw, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        ref = model(x)
        out = fast(x.contiguous(memory_format=torch.channels_last))
    assert out.shape == ref.shape
    scale = ref[..., :4].abs().amax(dim=1, keepdim=True).clamp_min(1.0)
    assert ((out[..., :4] - ref[..., :4]).abs() / scale).max() < 1e-3
    assert (out[..., 4:] - ref[..., 4:]).abs().max() < 1e-3


@pytest.fixture(scope="module")
def one_cfg(tmp_path_factory) -> Path:
    cfg = tmp_path_factory.mktemp("api") / "one.cfg"
    cfg.write_text(ONE_HEAD_CFG)
    return cfg


@pytest.fixture(scope="module")
def detector(one_cfg) -> Detector:
    return Detector(str(one_cfg), None, img_size=64, device="cpu")


# ------------------------------------------------------------------------------------ images
@pytest.mark.parametrize("image, message", [
    (np.random.rand(20, 20), "image 0: expected uint8 pixels, got float64"),
    (np.zeros((20, 20), np.int64), "image 0: expected uint8 pixels, got int64"),
    (np.ones((5, 5), bool), "image 0: expected uint8 pixels, got bool"),
    (np.random.rand(20, 20, 4), "image 0: expected uint8 pixels, got float64"),
    (np.zeros((0, 5), np.uint8), "image 0: expected an H x W x 3 BGR image, got shape (0, 5)"),
    (np.zeros((0, 0, 4), np.uint8), "image 0: expected an H x W x 3 BGR image, got shape (0, 0, 4)"),
])
def test_a_gray_or_bgra_image_is_checked_before_it_is_converted(detector, image, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        detector(image)


@pytest.mark.parametrize("images, message", [
    (None, "Detector() takes an image path (str or pathlib.Path) or a uint8 H x W x 3 BGR numpy array, or a list "
           "of them, got NoneType"),
    (b"/path.jpg", "Detector() takes an image path (str or pathlib.Path) or a uint8 H x W x 3 BGR numpy array, or a "
                   "list of them, got bytes (a bytes path: pass os.fsdecode(path))"),
    (42, "got int"),
    ([None], "Detector(): image 0: expected an image path (str or pathlib.Path) or a uint8 H x W x 3 BGR numpy "
             "array, got NoneType"),
    ([np.zeros((8, 8, 3), np.uint8), b"/a.jpg"], "image 1: expected an image path (str or pathlib.Path) or a uint8 "
                                                "H x W x 3 BGR numpy array, got bytes (a bytes path"),
])
def test_images_of_the_wrong_type_are_a_type_error_saying_what_is_taken(detector, images, message):
    # before: None was a traceback from iterating it, b"/path.jpg" "got int" (bytes iterate as numbers)
    with pytest.raises(TypeError, match=re.escape(message)):
        detector(images)


def test_gray_and_bgra_uint8_images_are_still_converted(detector):
    gray = np.full((20, 20), 7, np.uint8)
    bgra = np.dstack([gray, gray, gray, np.full((20, 20), 255, np.uint8)])
    assert len(detector([gray, bgra])) == 2


# ------------------------------------------------------------------------------------ detector settings
@pytest.mark.parametrize("settings, error, message", [
    (dict(conf_thres=float("nan")), ValueError, "conf_thres: 'nan' is not a finite number"),
    (dict(conf_thres=1.5), ValueError, "conf_thres: 1.5 is out of range: a threshold must be between 0 and 1"),
    (dict(conf_thres=-1), ValueError, "conf_thres: -1 is out of range: a threshold must be between 0 and 1"),
    (dict(iou_thres=float("nan")), ValueError, "iou_thres: 'nan' is not a finite number"),
    (dict(beta_nms=-5, nms_kind="diounms"), ValueError,
     "beta_nms: -5 is out of range: the DIoU-NMS exponent must be above 0 and at most 3.40282e+38"),
    (dict(max_det=-1), ValueError, "max_det: -1 is out of range: the value must be at least 1"),
    (dict(max_det=0), ValueError, "max_det: 0 is out of range: the value must be at least 1"),
    (dict(classes=[]), ValueError, "classes: an empty list keeps nothing; give at least one value, or None for all"),
    (dict(max_batch="2"), TypeError, "max_batch must be an integer, got str '2'"),
    (dict(max_batch=0.5), TypeError, "max_batch must be an integer, got float 0.5"),
    (dict(max_batch=-1), ValueError, "max_batch: -1 is out of range: the value must be at least 1"),
    (dict(names=5), TypeError, "names must be a sequence of class names (or a .names file), got int 5"),
    (dict(classes=1), TypeError, "classes must be a sequence of integers, got int 1"),
    (dict(classes="1"), TypeError, "classes must be a sequence of integers, got str '1'"),
    (dict(classes=[0.5]), TypeError, "classes must be a sequence of integers, got float 0.5 in it"),
])
def test_detector_settings_from_python_are_checked_as_the_flags_are(one_cfg, settings, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        Detector(str(one_cfg), None, img_size=64, device="cpu", **settings)
    with pytest.raises(error, match=f"^{re.escape(message)}$"):  # the options object alone checks them too
        DetectorOptions(**settings)


def test_valid_detector_settings_are_kept_as_given(one_cfg):
    detector = Detector(str(one_cfg), None, img_size=64, device="cpu", conf_thres=np.float32(0.5), iou_thres=1,
                        max_det=np.int64(3), classes=(0,), names=list("abcde"), max_batch=2, beta_nms=0.6)
    assert (detector.settings.conf_thres, detector.settings.iou_thres, detector.settings.max_det) == (0.5, 1.0, 3)
    assert detector.settings.classes == (0,) and detector.names == list("abcde") and detector.max_batch == 2


def test_the_detector_options_must_be_detector_options(one_cfg):
    with pytest.raises(TypeError, match=r"^options must be a DetectorOptions, got str 'x'$"):
        Detector(str(one_cfg), None, options="x")


def test_the_detector_refuses_a_class_filter_the_model_does_not_have(tiny):
    from yolo.inference.detector import Detector

    with pytest.raises(ValueError, match=r"^classes -1 5: the model has 5 classes \(0\.\.4\)"):
        Detector(None, str(tiny[1]), device="cpu", classes=[0, 5, -1])
    assert Detector(None, str(tiny[1]), device="cpu", classes=[0, 4]).settings.classes == (0, 4)
