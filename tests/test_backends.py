"""Exported files are models here: the Detector, tools/eval.py and tools/detect.py run an ONNX, TorchScript or
OpenVINO file from its metadata alone, with the PyTorch model's pre- and post-processing, and score the model it
came from within 0.002 mAP50 (yolov3-tiny on a few coco128 images; the reference is the Darknet .weights scored
by the same evaluation, and pycocotools computes both). Files that are not models, or whose runtime is missing,
are one-line errors."""
import json
import sys

import numpy as np
import pytest
import torch

from conftest import asset
from helpers import one_line_error, run_export_cli
from yolo.backends import ExportedModel, load_runnable
from yolo.cli import detect as detect_cli
from yolo.cli import eval as eval_cli
from yolo.errors import WeightsError
from yolo.export.compare import max_difference
from yolo.inference.detector import Detector

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytestmark = [pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning"),
              pytest.mark.usefixtures("private_cache")]

SIZE = 224  # small enough to be quick, large enough for yolov3-tiny to find COCO objects
IMAGES = 8


@pytest.fixture(scope="module")
def exports(tmp_path_factory, yolov3_tiny):
    """yolov3-tiny exported at SIZE as ONNX, TorchScript and (when installed) an OpenVINO IR: format -> path."""
    cfg, weights = yolov3_tiny
    folder = tmp_path_factory.mktemp("exports")
    files = {"onnx": folder / "tiny.onnx", "torchscript": folder / "tiny.torchscript"}
    try:
        import openvino  # noqa: F401
        files["openvino"] = folder / "tiny.xml"
    except ImportError:
        pass
    for fmt, path in files.items():
        run_export_cli(["--cfg", cfg, "--weights", weights, "--format", fmt, "--img-size", SIZE, "--output", path,
                        "--no-verify"])
    return files


@pytest.fixture(scope="module")
def few_coco(tmp_path_factory):
    """A dataset YAML of the first IMAGES coco128 images (train and val), COCO's names."""
    folder = tmp_path_factory.mktemp("coco8")
    images = sorted(asset("coco128/images/train2017").glob("*.jpg"))[:IMAGES]
    (folder / "list.txt").write_text("".join(f"{p}\n" for p in images))
    names = [n.strip() for n in asset("cfg/coco.names").read_text().splitlines() if n.strip()]
    (folder / "data.yaml").write_text(json.dumps({"train": str(folder / "list.txt"), "val": str(folder / "list.txt"),
                                                  "nc": len(names), "names": names}))
    return folder / "data.yaml"


def eval_map(tmp_path, data, *weights_flags):
    argv = [*weights_flags, "--data", str(data), "--project", str(tmp_path), "--no-progress", "--batch-size", "4",
            "--workers", "0", "--no-plots"]
    return eval_cli.main(eval_cli.parse_args([str(a) for a in argv]))["mAP50"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "torchscript", "openvino"])
def test_an_fp32_export_scores_the_map_of_the_model_it_came_from(fmt, exports, few_coco, yolov3_tiny, tmp_path):
    if fmt not in exports:
        pytest.skip("openvino is not installed")
    cfg, weights = yolov3_tiny
    reference = eval_map(tmp_path / "ref", few_coco, "--cfg", cfg, "--weights", weights, "--img-size", SIZE)
    exported = eval_map(tmp_path / fmt, few_coco, "--weights", exports[fmt])  # its size and resize: the file's
    assert reference > 0.1  # a real score, so that the comparison means something
    assert abs(exported - reference) <= 0.002, (fmt, exported, reference)


@pytest.mark.slow
def test_the_detector_runs_an_export_with_its_names_size_and_resize(exports, yolov3_tiny):
    cfg, weights = yolov3_tiny
    ours = Detector(cfg, weights, img_size=SIZE, device="cpu")
    image = str(asset("images/dog.jpg"))
    expected = ours(image)[0]
    for fmt, path in exports.items():
        detector = Detector(None, path, device="cpu")
        assert isinstance(detector.model, ExportedModel)
        assert detector.img_size == (SIZE, SIZE) and detector.resize == ours.resize
        assert detector.names == ours.names and detector.names_from == "checkpoint"
        found = detector(image)[0]
        assert found["names"] == expected["names"], fmt
        assert torch.allclose(found["boxes"], expected["boxes"], atol=0.05), fmt
        assert torch.allclose(found["scores"], expected["scores"], atol=1e-4), fmt


@pytest.mark.slow
def test_an_exported_model_gives_the_pytorch_eval_output(exports, yolov3_tiny):
    cfg, weights = yolov3_tiny
    model = load_runnable(cfg, weights).eval()
    x = torch.rand(2, 3, SIZE, SIZE)
    for fmt, path in exports.items():
        exported = load_runnable(None, path)
        with torch.no_grad():
            assert max_difference(exported(x), model(x), (SIZE, SIZE)) < 1e-4, fmt


@pytest.mark.slow
def test_detect_writes_detections_of_an_export(exports, tmp_path, capsys):
    argv = ["--weights", exports["onnx"], "--source", asset("images/dog.jpg"), "--project", tmp_path, "--save-txt",
            "--device", "cpu", "--no-progress"]
    out = detect_cli.main(detect_cli.parse_args([str(a) for a in argv]))
    labels = (out / "labels" / "dog.txt").read_text().splitlines()
    assert {int(line.split()[0]) for line in labels} >= {1, 16}  # bicycle, dog


def test_a_fixed_size_export_refuses_another_size(exports, few_coco, tmp_path, capsys):
    err = one_line_error(capsys, lambda: eval_map(tmp_path, few_coco, "--weights", exports["onnx"], "--img-size",
                                                  SIZE + 32))
    assert err == (f"error: --img-size {SIZE + 32}x{SIZE + 32}: {exports['onnx']} was exported for {SIZE}x{SIZE} "
                   "input only (export with --dynamic for other sizes)")


@pytest.mark.slow
def test_an_export_with_nms_in_the_graph_is_refused(yolov3_tiny, tmp_path, few_coco, capsys):
    cfg, weights = yolov3_tiny
    path = tmp_path / "nms.onnx"
    run_export_cli(["--cfg", cfg, "--weights", weights, "--format", "onnx", "--img-size", 64, "--nms", "--output",
                    path, "--no-verify"])
    err = one_line_error(capsys, lambda: eval_map(tmp_path, few_coco, "--weights", path))
    assert err.startswith(f"error: {path}: exported with NMS in the graph (--nms)")


@pytest.mark.parametrize("name, content, expected", [
    ("bad.onnx", b"not a model", "{p}: not an ONNX model onnxruntime can load"),
    ("bad.torchscript", b"not a model", "{p}: not a TorchScript model torch.jit can load"),
])
def test_a_file_that_is_not_a_model_is_one_line(name, content, expected, tmp_path, few_coco, capsys):
    path = tmp_path / name
    path.write_bytes(content)
    err = one_line_error(capsys, lambda: eval_map(tmp_path, few_coco, "--weights", path))
    assert err.startswith("error: " + expected.format(p=path)), err


def test_an_onnx_file_without_our_metadata_is_one_line(tmp_path, few_coco, capsys):
    path = tmp_path / "plain.onnx"
    torch.onnx.export(torch.nn.Conv2d(3, 8, 3), (torch.rand(1, 3, 32, 32),), str(path), dynamo=False)
    err = one_line_error(capsys, lambda: eval_map(tmp_path, few_coco, "--weights", path))
    assert err.startswith(f"error: {path}: no metadata of this package's exports"), err


def test_a_missing_runtime_names_the_extra_to_install(exports, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as when it is not installed
    with pytest.raises(WeightsError, match=r'needs onnxruntime, which is not installed: pip install '
                                           r'"yolo-darknet\[export\]" \(in a clone: pip install -e "\.\[export\]"\)'):
        load_runnable(None, exports["onnx"])
    monkeypatch.setitem(sys.modules, "openvino", None)
    ir = tmp_path / "any.xml"
    ir.write_text("<net/>")
    with pytest.raises(WeightsError, match=r'any.xml: running this file needs openvino, which is not installed: '
                                           r'.*pip install -e "\.\[openvino\]"'):
        load_runnable(None, ir)


def test_an_export_is_given_without_a_cfg(exports, yolov3_tiny):
    with pytest.raises(ValueError, match="carries its own cfg: give it without a cfg"):
        load_runnable(yolov3_tiny[0], exports["onnx"])
