"""YOLOv1 (``[detection]`` head) at inference: ONNX and TorchScript export verified against the PyTorch model,
tools/export.py and tools/detect.py end to end, and the input size that its [connected] layer fixes."""
import re

import numpy as np
import pytest
import torch

from cfg_snippets import net_section
from conftest import darknet_file
from darknet_parity import write_model

SIDE, NUM, CLASSES = 2, 2, 3


def small_v1_text(size: int = 64) -> str:
    """A small random YOLOv1-style cfg: conv, [connected] to side*side*(5*num+classes), [detection]."""
    k = SIDE * SIDE * ((1 + 4) * NUM + CLASSES)
    return (net_section(size, size) + "\n"
            "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=leaky\n\n"
            "[maxpool]\nsize=2\nstride=2\n\n"
            f"[connected]\noutput={k}\nactivation=logistic\n\n"
            f"[detection]\nclasses={CLASSES}\ncoords=4\nside={SIDE}\nnum={NUM}\nsoftmax=1\nsqrt=1\nrescore=1\n")


@pytest.fixture
def small_v1(tmp_path):
    return write_model(tmp_path, small_v1_text(64), 64)


@pytest.fixture
def tiny_yolo_v1(tmp_path):
    """Darknet's cfg/yolov1/tiny-yolo.cfg (7x7 cells, 2 boxes, 20 classes) at 64x64 instead of 448x448: the
    same layers, the [connected] layer reading a 1x1 map."""
    from darknet_ref import set_net_options

    text = set_net_options(darknet_file("cfg/yolov1/tiny-yolo.cfg").read_text(), width=64, height=64, batch=1, subdivisions=1)
    return write_model(tmp_path, text, 64)


def _export_and_verify(model, tmp_path, size):
    """The verify_* functions raise over the tolerance (1e-4, or three times the model's own float32 rounding
    on these inputs, see yolo.export._check); the bound asserted here is that of the Gaussian head's test."""
    from yolo.export import NMSOptions, export_onnx, export_torchscript, verify_onnx, verify_torchscript

    inputs = [torch.rand(2, 3, size, size, generator=torch.Generator().manual_seed(0))]
    onnx_path = export_onnx(model, tmp_path / "v1.onnx", size)
    assert verify_onnx(onnx_path, model, inputs) < 1e-3
    ts_path = export_torchscript(model, tmp_path / "v1.torchscript", size)
    assert verify_torchscript(ts_path, model, inputs) < 1e-3
    nms = NMSOptions(conf_thres=0.05)
    nms_path = export_onnx(model, tmp_path / "v1-nms.onnx", size, nms=nms)
    assert verify_onnx(nms_path, model, inputs, nms=nms) < 1e-3


@pytest.mark.slow
def test_small_v1_exports_to_onnx_and_torchscript(small_v1, tmp_path):
    _, _, model = small_v1
    with torch.no_grad():
        rows = model(torch.rand(1, 3, 64, 64))
    assert rows.shape == (1, SIDE * SIDE * NUM, 5 + CLASSES)
    _export_and_verify(model, tmp_path, 64)


@pytest.mark.slow
def test_darknet_tiny_yolo_v1_exports_to_onnx_and_torchscript(tiny_yolo_v1, tmp_path):
    _, _, model = tiny_yolo_v1
    assert model.num_classes == 20 and model.yolo_layers[0].side == 7
    _export_and_verify(model, tmp_path, 64)


def test_export_refuses_other_sizes_than_the_cfg(small_v1, tmp_path):
    """The [connected] layer's weights are tied to the cfg's input size: other or dynamic sizes are refused,
    naming the layer's line."""
    from yolo.export import export_onnx, export_torchscript

    cfg, _, model = small_v1
    with pytest.raises(ValueError, match=r"v1.cfg:\d+: \[connected\] ties the weights to the cfg's 64x64 input"):
        export_torchscript(model, tmp_path / "x.torchscript", 128)
    with pytest.raises(ValueError, match="cannot be dynamic"):
        export_onnx(model, tmp_path / "x.onnx", 64, dynamic=True)


def test_export_tool_verifies_each_format(small_v1, tmp_path):
    from yolo.cli.export import parse_args, run

    cfg, weights, _ = small_v1
    for fmt, suffix in (("onnx", ".onnx"), ("torchscript", ".torchscript"), ("darknet", ".weights")):
        out = tmp_path / f"out-{fmt}{suffix}"
        result = run(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--format", fmt, "--output", str(out)]))
        assert out.is_file() and result["max_difference"] < 1e-4 and tuple(result["img_size"]) == (64, 64)


def test_detect_tool_on_a_yolov1_cfg(assets, small_v1, tmp_path):
    """tools/detect.py runs at the cfg's size by default and writes the annotated image, labels and JSON."""
    import json

    from yolo.cli.detect import main, parse_args

    cfg, weights, _ = small_v1
    out = main(parse_args(["--cfg", str(cfg), "--weights", str(weights), "--source", str(assets("images/dog.jpg")),
                           "--output", str(tmp_path / "runs"), "--device", "cpu", "--conf-thres", "0.01",
                           "--save-txt", "--save-conf", "--save-json", "--no-progress"]))
    assert (out / "dog.jpg").is_file()
    lines = (out / "labels" / "dog.txt").read_text().splitlines()
    results = json.loads((out / "results.json").read_text())
    assert len(lines) == len(results) > 0
    for line in lines:
        cls, *box, score = (float(v) for v in line.split())
        assert 0 <= cls < CLASSES and all(0 <= v <= 1 for v in box) and 0.01 < score <= 1


def test_detector_at_the_cfg_size(small_v1):
    """The Detector defaults to the cfg's size for a YOLOv1 network and refuses another one."""
    from yolo.inference.detector import Detector

    cfg, weights, _ = small_v1
    detector = Detector(cfg, weights, device="cpu", conf_thres=0.01)
    assert detector.img_size == (64, 64)
    (det,) = detector([(np.random.RandomState(0).rand(50, 70, 3) * 255).astype(np.uint8)])
    assert set(det) == {"boxes", "scores", "labels", "names"} and det["boxes"].shape[1] == 4
    with pytest.raises(ValueError, match=r"v1.cfg:\d+: \[connected\] .* img_size 128x128 cannot be used"):
        Detector(cfg, weights, device="cpu", img_size=128)


def test_eval_tool_refuses_another_size_in_one_line(small_v1, tmp_path, capsys):
    """tools/eval.py at an --img-size the [connected] weights are not tied to: the tool's one-line error naming the
    cfg line, not the layer's traceback in the forward pass."""
    import cv2
    import yaml

    from yolo.cli.eval import cli

    cfg, weights, _ = small_v1
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    cv2.imwrite(str(tmp_path / "images" / "a.jpg"), np.full((64, 64, 3), 128, np.uint8))
    (tmp_path / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    data = tmp_path / "data.yaml"
    data.write_text(yaml.safe_dump({"path": str(tmp_path), "train": "images", "val": "images",
                                    "names": ["a", "b", "c"][:CLASSES]}))
    with pytest.raises(SystemExit) as stop:
        cli(["--cfg", str(cfg), "--weights", str(weights), "--data", str(data), "--img-size", "128",
             "--project", str(tmp_path / "runs"), "--no-plots", "--no-progress"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.fullmatch(rf"error: {re.escape(str(cfg))}:\d+: \[connected\] ties the weights to the cfg's 64x64 input; "
                        r"--img-size 128x128 cannot be used", err)
    assert not (tmp_path / "runs").exists()
