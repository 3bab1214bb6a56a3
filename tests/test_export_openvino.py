"""tools/export.py --format openvino: an OpenVINO IR (NAME.xml + NAME.bin) checked in OpenVINO's runtime, carrying
the metadata the other exports carry; --int8: NNCF's post-training quantization calibrated on a dataset's images,
whose file runs close to the float32 one and whose mAP50 is reported next to the float32 file's."""
import json
import sys

import numpy as np
import pytest
import torch

from conftest import asset
from helpers import in_fresh_process, run_export_cli
from yolo.backends import ExportedModel, load_runnable
from yolo.backends.openvino_runtime import read_metadata
from yolo.export.compare import max_difference
from yolo.inference.preprocess import preprocess
from yolo.files.images import load_image

ov = pytest.importorskip("openvino", reason="the openvino extra: pip install -e \".[openvino]\"")
pytest.importorskip("onnx")
pytestmark = pytest.mark.usefixtures("private_cache")

SIZE = 160


@pytest.fixture
def tiny(yolov3_tiny):
    cfg, weights = yolov3_tiny
    return ["--cfg", cfg, "--weights", weights]


@pytest.fixture(scope="module")
def few_coco(tmp_path_factory):
    """A dataset YAML of 4 coco128 images (train and val), COCO's names."""
    folder = tmp_path_factory.mktemp("coco4")
    images = sorted(asset("coco128/images/train2017").glob("*.jpg"))[:4]
    (folder / "list.txt").write_text("".join(f"{p}\n" for p in images))
    names = [n.strip() for n in asset("cfg/coco.names").read_text().splitlines() if n.strip()]
    (folder / "data.yaml").write_text(json.dumps({"train": str(folder / "list.txt"), "val": str(folder / "list.txt"),
                                                  "nc": len(names), "names": names}))
    return folder / "data.yaml"


def photo(size=SIZE):
    batch, _ = preprocess([load_image(asset("images/dog.jpg"))], (size, size), "stretch")
    return batch.contiguous()


@pytest.mark.slow
def test_the_ir_is_written_checked_and_carries_the_metadata(tiny, tmp_path, capsys):
    out = tmp_path / "tiny.xml"
    result = run_export_cli([*tiny, "--format", "openvino", "--img-size", SIZE, "--output", out])
    assert out.is_file() and out.with_suffix(".bin").is_file()
    assert result["max_difference"] < 1e-4
    assert "verified in OpenVINO" in capsys.readouterr().out
    meta = read_metadata(ov.Core().read_model(str(out)))
    assert json.loads(meta["img_size"]) == [SIZE, SIZE] and meta["resize"] == "stretch"
    assert len(json.loads(meta["names"])) == 80 and "[yolo]" in meta["cfg"]
    # read by OpenVINO alone, the file gives the PyTorch model's output
    compiled = ov.Core().compile_model(str(out), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    x = photo()
    model = load_runnable(tiny[1], tiny[3]).eval()
    with torch.no_grad():
        assert max_difference(compiled(x.numpy())[0], model(x), (SIZE, SIZE)) < 1e-4


def test_the_output_must_be_named_xml(tiny, tmp_path, capsys):
    with pytest.raises(SystemExit):
        run_export_cli([*tiny, "--format", "openvino", "--output", tmp_path / "tiny.onnx"])
    err = capsys.readouterr().err.strip()
    assert err.endswith("an OpenVINO IR is written as NAME.xml (and NAME.bin beside it): give --output a name "
                        "ending in .xml") and "\n" not in err
    assert not list(tmp_path.iterdir())


def test_without_openvino_the_error_names_the_extra(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(SystemExit):
        run_export_cli([*tiny, "--format", "openvino", "--output", tmp_path / "tiny.xml"])
    err = capsys.readouterr().err.strip()
    assert err.endswith('openvino is not installed: OpenVINO export needs it: pip install "yolo-darknet[openvino]" '
                        '(in a clone: pip install -e ".[openvino]")'), err


def test_int8_needs_data_and_openvino(tiny, tmp_path, capsys):
    for flags, message in ((["--format", "openvino", "--int8"], "--int8 needs --data"),
                           (["--format", "onnx", "--int8", "--data", "x.yaml"], "--int8 applies to --format openvino")):
        with pytest.raises(SystemExit):
            run_export_cli([*tiny, *flags, "--output", tmp_path / "tiny.xml"])
        assert message in capsys.readouterr().err


EXPORT_IN_CHILD = """
import json, sys
from yolo.cli import export
result = export.main(export.parse_args(sys.argv[1:]))
print(json.dumps({key: {"mAP50": float(result[key]["mAP50"])} for key in ("fp32_map", "int8_map")}))
"""


@pytest.mark.slow
def test_int8_runs_close_to_fp32_and_reports_both_maps(tiny, few_coco, tmp_path):
    pytest.importorskip("nncf", reason="the openvino extra: pip install -e \".[openvino]\"")
    out = tmp_path / "tiny-int8.xml"
    # in its own process: NNCF's INT8 run must not share the test process (tests/helpers.py in_fresh_process)
    result, printed = in_fresh_process(EXPORT_IN_CHILD, *tiny, "--format", "openvino", "--img-size", SIZE, "--int8",
                                       "--data", few_coco, "--calib-images", 3, "--output", out)
    assert out.is_file() and out.with_suffix(".bin").is_file()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "cache")  # cache: the test's YOLO_CACHE_DIR
    assert left == ["tiny-int8.bin", "tiny-int8.xml"]  # no float32 IR left
    assert "calibrated on 3 images" in printed and "mAP50 on" in printed
    for key in ("fp32_map", "int8_map"):
        assert 0.0 <= result[key]["mAP50"] <= 1.0
    int8 = load_runnable(None, out)
    assert isinstance(int8, ExportedModel) and int8.backend.metadata["int8"] == "true"
    # the weights really are 8-bit: the IR holds int8 constants, and its .bin is far smaller than float32's
    ops = ov.Core().read_model(str(out)).get_ordered_ops()
    assert any(op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.i8 for op in ops)
    model = load_runnable(tiny[1], tiny[3]).eval()
    x = photo()
    with torch.no_grad():
        ours, ref = int8(x).numpy(), model(x).numpy()
    assert np.isfinite(ours).all()
    # close-ish: INT8 moves the probabilities by a few hundredths, not by the scale of the values themselves
    assert np.abs(ours[..., 4:] - ref[..., 4:]).max() < 0.35
    assert np.corrcoef(ours[..., 4], ref[..., 4])[0, 1] > 0.95
