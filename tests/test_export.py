"""Exported files reproduce the PyTorch model in independent runtimes.

ONNX runs in onnxruntime, TorchScript through ``torch.jit.load``, and Darknet ``.weights`` written
from a trained checkpoint in OpenCV DNN (an independent Darknet implementation). Each is compared
with our eval output: boxes relative to the input size, probabilities absolutely, within 1e-4.
"""
import copy
import dataclasses
import re

import cv2
import numpy as np
import pytest
import torch

from conftest import asset
from helpers import one_line_error, other_spellings, run_export_cli
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.data.shapes import SHAPE_NAMES, render_sample
from yolo.files.images import load_image
from yolo.inference.preprocess import preprocess
from yolo.errors import ExportError
from yolo.export import (NMSOptions, export_darknet, export_onnx, export_torchscript,
                         onnxruntime_latency, second_size, verify_darknet, verify_onnx)
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.model import Darknet, load_model
from yolo.inference.postprocess import postprocess

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")

TOL = 1e-4
OPENCV_BN_EPS = 1e-6  # OpenCV's Darknet importer normalizes with sqrt(var + 1e-6)


def difference(ours, ref, hw):
    """Largest difference: boxes relative to the input size (and to max(1, |ref|)), the rest absolutely."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape
    scale = np.array([hw[1], hw[0], hw[1], hw[0]])
    box = np.abs(ours[..., :4] - ref[..., :4]) / scale / np.maximum(1.0, np.abs(ref[..., :4]) / scale)
    return max(box.max(), np.abs(ours[..., 4:] - ref[..., 4:]).max())


def eval_output(model, x):
    with torch.no_grad():
        return model.eval()(x).numpy()


def photo_batch(hw, n):
    """Real photos, letterboxed as the Detector does: dog.jpg, horses.jpg, ..."""
    names = ["dog.jpg", "horses.jpg", "person.jpg"]
    batch, _ = preprocess([load_image(asset(f"images/{names[i]}")) for i in range(n)], hw)
    return batch.contiguous()


def shapes_batch(hw, n, seed=0):
    """Drawn shapes scenes at exactly ``hw`` (RGB 0..1) and their targets (image, class, cx, cy, w, h) in pixels."""
    images, targets = [], []
    for i in range(n):
        rgb, boxes, labels = render_sample(np.random.default_rng([seed, i]), size_range=(min(hw), min(hw)))
        sx, sy = hw[1] / rgb.shape[1], hw[0] / rgb.shape[0]  # rendered square; stretched to hw
        rgb = cv2.resize(rgb, (hw[1], hw[0]))
        images.append(torch.from_numpy(rgb).permute(2, 0, 1).float() / 255.0)
        for (x1, y1, x2, y2), c in zip(boxes, labels):
            targets.append([i, c, (x1 + x2) / 2 * sx, (y1 + y2) / 2 * sy, (x2 - x1) * sx, (y2 - y1) * sy])
    return torch.stack(images), torch.tensor(targets, dtype=torch.float32)


# ------------------------------------------------------------------------------------- models
@pytest.fixture(scope="module")
def tiny_v3():
    """yolov3-tiny with the real weights, run at 416."""
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    return Darknet(cfg).load_darknet_weights(weights).eval(), (416, 416), photo_batch


@pytest.fixture(scope="module")
def tiny_v4():
    """yolov4-tiny (route groups, scale_x_y) with random, well-scaled weights, run at 256."""
    from helpers import randomize_model

    model = Darknet(asset("cfg/yolov4-tiny.cfg"))
    randomize_model(model, seed=4, calibrate_hw=(256, 256))
    return model.eval(), (256, 256), lambda hw, n: shapes_batch(hw, n, seed=4)[0]


@pytest.fixture(params=["tiny_v3", "tiny_v4"])
def case(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def onnx_files():
    """One dynamic ONNX file per model, written once for the module."""
    return {}


def exported_onnx(model, hw, files, tmp_path_factory):
    key = id(model)
    if key not in files:
        path = tmp_path_factory.mktemp("onnx") / "model.onnx"
        files[key] = export_onnx(model, path, hw, dynamic=True)
    return files[key]


# ----------------------------------------------------------------------------------------- ONNX
@pytest.mark.slow
def test_onnx_in_onnxruntime_equals_eval_output_at_batch_1_and_2(case, onnx_files, tmp_path_factory):
    model, hw, batch = case
    path = exported_onnx(model, hw, onnx_files, tmp_path_factory)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (1, 2):
        x = batch(hw, n)
        out = session.run(None, {"images": x.numpy()})[0]
        ref = eval_output(model, x)
        assert difference(out, ref, hw) < TOL
    assert ref[..., 4].max() > 0.3  # the comparison covers confident boxes, not only background


@pytest.mark.slow
def test_onnx_dynamic_size_follows_the_input(case, onnx_files, tmp_path_factory):
    """The head grids come from the traced sizes: a second, non-square size gives the right boxes."""
    model, hw, batch = case
    path = exported_onnx(model, hw, onnx_files, tmp_path_factory)
    other = second_size(hw, model.stride)
    x = batch(other, 2)
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"images": x.numpy()})[0]
    assert difference(out, eval_output(model, x), other) < TOL


def test_onnx_graph_declares_opset_and_dynamic_axes(tiny_v3, onnx_files, tmp_path_factory):
    model, hw, _ = tiny_v3
    proto = onnx.load(str(exported_onnx(model, hw, onnx_files, tmp_path_factory)), load_external_data=False)
    opset = max(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    assert opset >= 17
    dims = [d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 3, "height", "width"]
    meta = {p.key: p.value for p in proto.metadata_props}
    assert meta["stride"] == "32" and meta["num_classes"] == "80" and "[yolo]" in meta["cfg"]


@pytest.mark.slow
def test_onnx_with_nms_equals_postprocess(tiny_v3, tmp_path):
    model, hw, batch = tiny_v3
    options = NMSOptions(conf_thres=0.1, iou_thres=0.45, max_det=20)
    path = export_onnx(model, tmp_path / "nms.onnx", hw, nms=options)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = batch(hw, 2)
    boxes, scores, labels, image = session.run(None, {"images": x.numpy()})
    expected = postprocess(torch.from_numpy(eval_output(model, x)), options)
    for i, ref in enumerate(expected):
        mine = image == i
        assert len(ref["scores"]) > 2
        assert np.array_equal(labels[mine], ref["labels"].numpy())
        assert np.abs(boxes[mine] - ref["boxes"].numpy()).max() / max(hw) < TOL
        assert np.abs(scores[mine] - ref["scores"].numpy()).max() < TOL


@pytest.mark.slow
def test_onnx_with_agnostic_nms_equals_postprocess(tiny_v3, tmp_path):
    """The graph takes the Detector's post-processing configuration: class-agnostic NMS too."""
    model, hw, batch = tiny_v3
    options = NMSOptions(conf_thres=0.05, iou_thres=0.3, max_det=50, agnostic=True)
    path = export_onnx(model, tmp_path / "agnostic.onnx", hw, nms=options)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = batch(hw, 2)
    boxes, scores, labels, image = session.run(None, {"images": x.numpy()})
    predictions = torch.from_numpy(eval_output(model, x))
    expected = postprocess(predictions, options)
    per_class = postprocess(predictions, dataclasses.replace(options, agnostic=False))
    assert sum(len(r["scores"]) for r in expected) < sum(len(r["scores"]) for r in per_class)  # it matters here
    for i, ref in enumerate(expected):
        mine = image == i
        assert np.array_equal(labels[mine], ref["labels"].numpy())
        assert np.abs(boxes[mine] - ref["boxes"].numpy()).max() / max(hw) < TOL


@pytest.mark.parametrize("setting", [dict(nms_kind="diounms"), dict(multi_label=True), dict(classes=(0,))])
def test_onnx_nms_refuses_what_the_graph_cannot_do(tiny_v3, tmp_path, setting):
    model, hw, _ = tiny_v3
    with pytest.raises(ValueError, match=next(iter(setting))):
        export_onnx(model, tmp_path / "refused.onnx", hw, nms=NMSOptions(**setting))


@pytest.mark.slow
def test_onnx_half_runs_in_onnxruntime_close_to_float32(tiny_v3, tmp_path):
    model, hw, batch = tiny_v3
    path = export_onnx(model, tmp_path / "half.onnx", hw, half=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].type == "tensor(float16)"
    x = batch(hw, 2)
    out = session.run(None, {"images": x.numpy().astype(np.float16)})[0].astype(np.float64)
    ref = eval_output(model, x).astype(np.float64)
    # float16 moves scores (objectness x class) by ~3e-3 and confident boxes by well under a pixel.
    assert np.abs(out[..., 5:] * out[..., 4:5] - ref[..., 5:] * ref[..., 4:5]).max() < 1e-2
    confident = ref[..., 4] > 0.25
    assert confident.sum() > 2
    assert np.abs(out[confident][:, :4] - ref[confident][:, :4]).max() < 1.0


@pytest.mark.slow
def test_verify_onnx_rejects_a_file_of_another_model(tiny_v4, onnx_files, tmp_path_factory):
    model, hw, batch = tiny_v4
    path = exported_onnx(model, hw, onnx_files, tmp_path_factory)
    assert verify_onnx(path, model, [batch(hw, 1)]) < TOL
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.module_list[0].conv.weight.mul_(1.01)
    with pytest.raises(ExportError, match="over the tolerance"):
        verify_onnx(path, other, [batch(hw, 1)])


def test_onnxruntime_latency_times_the_file(tiny_v4, onnx_files, tmp_path_factory):
    model, hw, batch = tiny_v4
    path = exported_onnx(model, hw, onnx_files, tmp_path_factory)
    timing = onnxruntime_latency(path, batch(hw, 1), runs=2, warmup=1, threads=1)
    assert timing["runs"] == 2 and 0 < timing["min_ms"] <= timing["median_ms"]


@pytest.mark.slow
def test_latency_of_a_checkpoint_runs_opencv_on_a_darknet_pair_written_from_it(tiny_v4, onnx_files,
                                                                                tmp_path_factory, tmp_path):
    """A .pt has no .weights/.cfg pair for OpenCV DNN: one is written from the model for the timing."""
    from yolo.export.latency import compare_latency_with_darknet_pair

    model, hw, batch = tiny_v4
    path = exported_onnx(model, hw, onnx_files, tmp_path_factory)
    pt = save_checkpoint(model_checkpoint(model), tmp_path / "model.pt")
    timing = compare_latency_with_darknet_pair(model, path, batch(hw, 1), pt, None, runs=2, threads=1)
    assert set(timing) == {"onnxruntime", "torch eval", "torch prepared", "opencv dnn"}
    assert all(0 < t["min_ms"] <= t["median_ms"] for t in timing.values())


# ---------------------------------------------------------------------------------- TorchScript
@pytest.mark.slow
def test_torchscript_equals_eval_output_at_batch_1_and_2_and_another_size(case, tmp_path):
    model, hw, batch = case
    path = export_torchscript(model, tmp_path / "model.torchscript", hw)
    loaded = torch.jit.load(str(path))
    for size, n in ((hw, 1), (hw, 2), (second_size(hw, model.stride), 2)):
        x = batch(size, n)
        with torch.no_grad():
            out = loaded(x).numpy()
        assert difference(out, eval_output(model, x), size) < TOL


# -------------------------------------------------------------------------------- Darknet weights
def shapes_cfg(tmp_path):
    """yolov3-tiny for the 5 shapes classes: classes=5 in the heads, filters=(5+5)*3 before them."""
    text = asset("cfg/yolov3-tiny.cfg").read_text()
    text = re.sub(r"^classes\s*=\s*80", f"classes={len(SHAPE_NAMES)}", text, flags=re.M)
    text = re.sub(r"^filters\s*=\s*255", f"filters={(len(SHAPE_NAMES) + 5) * 3}", text, flags=re.M)
    path = tmp_path / "yolov3-tiny-shapes.cfg"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_briefly_trained_model_exported_to_weights_matches_opencv_and_our_loader(tmp_path):
    from reference import opencv_forward, ours_in_opencv_layout

    hw = (192, 192)
    model = Darknet(shapes_cfg(tmp_path))
    model.load_darknet_weights(asset("weights/yolov3-tiny.weights"), cutoff=15)  # backbone; new heads
    start = copy.deepcopy(model.state_dict())
    criterion = YoloLoss(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    model.train()
    for step in range(3):
        images, targets = shapes_batch(hw, 2, seed=10 + step)
        loss, _ = criterion(model(images), targets, hw)
        assert torch.isfinite(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    state = model.state_dict()
    for key in ("module_list.0.bn.running_mean", "module_list.13.bn.running_var",
                "module_list.0.conv.weight", "module_list.22.conv.bias"):
        assert not torch.equal(state[key], start[key]), f"{key} did not move"

    pt = save_checkpoint(model_checkpoint(model, names=SHAPE_NAMES), tmp_path / "shapes.pt")
    trained = load_model(None, pt).eval()
    weights, cfg = export_darknet(trained, tmp_path / "out" / "shapes.weights", tmp_path / "out" / "shapes.cfg")

    x, _ = shapes_batch(hw, 2, seed=99)
    ours = Darknet(cfg).load_darknet_weights(weights).eval()
    assert difference(eval_output(ours, x), eval_output(trained, x), hw) == 0  # our loader: bit-exact

    ref = opencv_forward(cfg, weights, x.numpy(), tmp_path)
    like_opencv = copy.deepcopy(trained)
    for m in like_opencv.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.eps = OPENCV_BN_EPS
    mine = ours_in_opencv_layout(like_opencv, x)
    assert difference(mine, ref, (1, 1)) < TOL  # both relative to the input already
    assert ref[..., 4].max() > 0.01  # not an all-zero comparison


def test_verify_darknet_rejects_a_corrupted_file(tiny_v3, tmp_path):
    model, _, _ = tiny_v3
    weights, cfg = export_darknet(model, tmp_path / "m.weights", tmp_path / "m.cfg")
    x = photo_batch((224, 224), 1)
    assert verify_darknet(weights, cfg, model, [x]) < TOL
    data = bytearray(weights.read_bytes())
    data[100:104] = np.float32(3.0).tobytes()  # a bias of the first conv
    weights.write_bytes(bytes(data))
    with pytest.raises(ExportError, match="layer 0 reads back different"):
        verify_darknet(weights, cfg, model, [x])


# ------------------------------------------------------------------------------------------ CLI
@pytest.mark.slow
def test_cli_exports_and_verifies_torchscript(tmp_path, capsys):
    out = tmp_path / "tiny.torchscript"
    result = run_export_cli(["--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", asset("weights/yolov3-tiny.weights"),
                             "--format", "torchscript", "--img-size", "256", "320", "--output", out])
    assert out.is_file() and result["max_difference"] < TOL
    assert "largest difference" in capsys.readouterr().out


@pytest.mark.parametrize("extra,message", [
    (["--format", "onnx", "--img-size", "100"], "--img-size: 100x100 must be a multiple of the network stride 32"),
    (["--format", "torchscript", "--nms"], "--nms and --benchmark apply to --format onnx"),
    (["--format", "darknet", "--half"], "apply to onnx/torchscript"),
])
def test_cli_bad_input_is_a_one_line_error(extra, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        run_export_cli(["--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", asset("weights/yolov3-tiny.weights"),
                        "--output", tmp_path / "x", *extra])
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_missing_weights_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        run_export_cli(["--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", tmp_path / "none.weights",
                        "--format", "onnx"])
    assert exc.value.code != 0
    assert "none.weights: weights not found" in capsys.readouterr().err


def test_tolerance_grows_only_to_the_models_own_float32_rounding():
    """Deep random networks round past 1e-4 in float32 by themselves; a file within 3x that passes."""
    from yolo.export.compare import check_difference

    assert check_difference("file", 3e-4, 1e-4, noise=lambda: 2e-4) == 3e-4
    with pytest.raises(ExportError, match="over the tolerance"):
        check_difference("file", 3e-4, 1e-4, noise=lambda: 5e-5)
    with pytest.raises(ExportError):
        check_difference("file", float("nan"), 1e-4, noise=lambda: 1.0)


# ------------------------------------------------------------------------------- output == input
def test_export_never_writes_over_its_input(capsys, tiny, tmp_path):
    from yolo.cli import export

    cfg, pt, weights = tiny
    before = weights.read_bytes()
    for output in other_spellings(weights, tmp_path):
        err = one_line_error(capsys, lambda: export.main(export.parse_args(
            ["--weights", str(weights), "--cfg", str(cfg), "--format", "darknet", "--output", str(output),
             "--no-verify"])))
        assert "--output is the input --weights" in err, err
        assert weights.read_bytes() == before
    # The cfg written beside the exported weights must not replace an input either (here: --names).
    names = tmp_path / "out.cfg"
    names.write_text("\n".join(SHAPE_NAMES))
    err = one_line_error(capsys, lambda: export.main(export.parse_args(
        ["--weights", str(pt), "--format", "darknet", "--output", str(tmp_path / "out.weights"),
         "--names", str(names), "--no-verify"])))
    assert "is the input --names" in err and names.read_text() == "\n".join(SHAPE_NAMES)
