"""tools/export.py as a user meets it: the packages it needs and what --no-verify spares, where the files go,
and what an ONNX file tells a runtime that has none of this package (its input preprocessing, its axes)."""
from __future__ import annotations

import json
import logging
import re
import sys

import pytest
import torch

from conftest import asset
from helpers import one_line_error, run_export_cli
from yolo.export.names import export_names

onnx = pytest.importorskip("onnx")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")


@pytest.fixture
def tiny(yolov3_tiny):
    """``--cfg``/``--weights`` of yolov3-tiny from the assets (the test skips without them)."""
    cfg, weights = yolov3_tiny
    return ["--cfg", cfg, "--weights", weights]


def error_of(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        run_export_cli(argv)
    assert exc.value.code != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


@pytest.mark.slow
def test_without_onnxruntime_no_verify_writes_the_file_and_the_check_says_how_to_install(tiny, tmp_path,
                                                                                          monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now fails as when not installed
    out = tmp_path / "tiny.onnx"
    err = error_of([*tiny, "--format", "onnx", "--img-size", "128", "--output", out], capsys)
    assert 'onnxruntime is not installed' in err and '--no-verify' in err and 'pip install "yolo-darknet[export]"' in err
    assert not out.exists()
    result = run_export_cli([*tiny, "--format", "onnx", "--img-size", "128", "--output", out, "--no-verify"])
    assert out.is_file() and "max_difference" not in result
    assert "verified" not in capsys.readouterr().out


def test_without_onnx_the_error_says_how_to_install_and_no_run_folder_is_left(tiny, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.chdir(tmp_path)
    err = error_of([*tiny, "--format", "onnx", "--no-verify"], capsys)
    assert err.endswith('onnx is not installed: ONNX export needs it: pip install "yolo-darknet[export]" '
                        '(in a clone: pip install -e ".[export]")')
    assert "--no-verify" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_files_go_to_a_new_run_folder_never_beside_the_weights(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in asset("weights/yolov3-tiny.weights").parent.iterdir())
    argv = [*tiny, "--format", "torchscript", "--img-size", "128", "--no-verify"]
    first, second = run_export_cli(argv)["output"], run_export_cli(argv)["output"]
    assert first.resolve() == (tmp_path / "runs/export/exp/yolov3-tiny.torchscript").resolve()
    assert second.resolve() == (tmp_path / "runs/export/exp2/yolov3-tiny.torchscript").resolve()
    assert first.is_file() and second.is_file()
    other = run_export_cli([*argv, "--project", tmp_path / "elsewhere", "--name", "tiny"])["output"]
    assert other == tmp_path / "elsewhere/tiny/yolov3-tiny.torchscript"
    assert sorted(p.name for p in asset("weights/yolov3-tiny.weights").parent.iterdir()) == before


@pytest.mark.slow
def test_onnx_records_its_input_preprocessing_and_names_its_axes(tiny, tmp_path):
    out = tmp_path / "tiny.onnx"
    run_export_cli([*tiny, "--format", "onnx", "--img-size", "128", "192", "--output", out])
    proto = onnx.load(str(out))
    meta = {p.key: p.value for p in proto.metadata_props}
    # yolov3-tiny.cfg has no letter_box: Darknet stretches its images, 0..1 RGB planes
    assert "letter_box" not in asset("cfg/yolov3-tiny.cfg").read_text()
    assert meta["resize"] == "stretch" and "letterbox_fill" not in meta
    assert meta["color_order"] == "RGB" and meta["layout"] == "NCHW" and meta["resample"] == "darknet"
    assert meta["decode"] == "opencv"
    assert float(meta["scale"]) == pytest.approx(1 / 255, rel=1e-12)
    assert json.loads(meta["img_size"]) == [128, 192]
    coco = [line.strip() for line in asset("cfg/coco.names").read_text().splitlines() if line.strip()]
    assert json.loads(meta["names"]) == coco and len(coco) == 80  # found beside the cfg

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    assert [(v.name, dims(v)) for v in proto.graph.input] == [("images", ["batch", 3, 128, 192])]
    boxes = 3 * (4 * 6 + 8 * 12)  # three anchors per cell of the stride-32 and stride-16 grids
    assert [(v.name, dims(v)) for v in proto.graph.output] == [("predictions", ["batch", boxes, 85])]


@pytest.mark.slow
def test_dynamic_onnx_names_the_axes_that_vary(tiny, tmp_path):
    out = tmp_path / "tiny.onnx"
    run_export_cli([*tiny, "--format", "onnx", "--img-size", "128", "--output", out, "--dynamic", "--no-verify"])
    graph = onnx.load(str(out)).graph
    shape = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in (*graph.input, *graph.output)]
    assert shape == [["batch", 3, "height", "width"], ["batch", "boxes", 85]]


@pytest.mark.slow
def test_a_letterboxed_checkpoint_says_so(tmp_path):
    from yolo.export import export_onnx
    from yolo.models.model import load_model

    model = load_model(asset("cfg/yolov3-tiny.cfg"), None, device="cpu").eval()
    model.preprocessing = {"resize": "letterbox", "img_size": [96, 128], "pipeline": "affine"}
    meta = {p.key: p.value for p in onnx.load(str(export_onnx(model, tmp_path / "m.onnx", (96, 128)))).metadata_props}
    assert meta["resize"] == "letterbox" and float(meta["letterbox_fill"]) == 0.5


def test_an_output_that_is_not_a_regular_file_is_refused_before_the_work(tiny, tmp_path, capsys):
    """``--output /dev/null`` once became a 4 MB regular file: a device, a FIFO (here through a link, so that
    /dev/null itself is never at stake) is refused in one line and left as it was; a link to a file is written
    through, the link kept."""
    import os
    import stat

    device = tmp_path / "null.torchscript"
    device.symlink_to("/dev/null")
    fifo = tmp_path / "pipe.torchscript"
    os.mkfifo(fifo)
    for output in (device, fifo):
        err = error_of([*tiny, "--format", "torchscript", "--img-size", "64", "--no-verify", "--output", output],
                       capsys)
        assert err.startswith(f"error: {output}: cannot write: it is ") and "not a regular file" in err
        assert "input size" not in capsys.readouterr().out  # refused before the model was read
    assert device.is_symlink() and stat.S_ISCHR(os.stat(device).st_mode) and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    target = tmp_path / "kept" / "tiny.torchscript"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.torchscript"
    link.symlink_to(target)
    run_export_cli([*tiny, "--format", "torchscript", "--img-size", "64", "--no-verify", "--output", link])
    assert link.is_symlink() and target.stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "link.torchscript", "null.torchscript",
                                                          "pipe.torchscript"]


# ------------------------------------------------------------------------------------------------- export
def test_export_refuses_an_opset_torch_cannot_write_before_reading_the_model(tmp_path, capsys):
    out = tmp_path / "tiny.onnx"
    argv = ["--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", tmp_path / "never-read.weights", "--format", "onnx",
            "--opset", "999", "--output", out, "--no-verify"]
    (tmp_path / "never-read.weights").write_bytes(b"")  # an empty file: reading it would be a different error
    err = one_line_error(capsys, lambda: run_export_cli(argv))
    assert re.fullmatch(rf"error: --opset 999 is out of range: this torch \({re.escape(torch.__version__)}\) "
                        r"exports ONNX opsets 17 to 2\d", err), err
    assert not out.exists()


def test_export_names_the_names_file_whose_count_is_wrong(tmp_path):
    path = tmp_path / "two_lines.txt"
    path.write_text("cat\ndog\n")
    with pytest.raises(ValueError) as error:
        export_names(path, tmp_path / "model.weights", None, 80)
    assert str(error.value) == f"{path}: 2 class names given but the model has 80 classes"


# ----------------------------------------------------------------------------------------- tool messages
def test_export_says_wrote_once(tmp_path, capsys, caplog):
    from training_helpers import write_one_head_model

    cfg, _, weights = write_one_head_model(tmp_path)
    with caplog.at_level(logging.INFO):
        run_export_cli(["--cfg", cfg, "--weights", weights, "--format", "torchscript", "--no-verify",
                        "--output", tmp_path / "tiny.torchscript"])
    out = capsys.readouterr().out
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert out.count("wrote ") == 1 and not any(m.startswith("wrote ") for m in logged), (out, logged)
