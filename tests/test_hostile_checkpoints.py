"""Hand-edited or foreign checkpoints, partial conversions and overflowing weights: one error or one warning that
says what is wrong, never a type error deep in the model, never detections from weights that were never read.
The convert tool's Darknet-to-Darknet copy with --cutoff is compared byte for byte with Darknet's partial."""
import logging
import subprocess

import numpy as np
import pytest
import torch

from conftest import asset
from helpers import one_line_error
from training_helpers import write_one_head_model
from yolo.cli import convert, detect
from yolo.errors import WeightsError
from yolo.inference.detector import Detector
from yolo.models.checkpoint import load_checkpoint_file
from yolo.models.model import Darknet, load_model

@pytest.fixture
def tiny(tmp_path):
    """The one-head 64 px cfg (5 classes), a checkpoint of it with random weights and its Darknet .weights."""
    return write_one_head_model(tmp_path)


def edited(pt, tmp_path, name, **changes):
    """A copy of checkpoint ``pt`` with ``changes`` applied to its dict (a value of ``...`` removes the key)."""
    ckpt = load_checkpoint_file(pt)
    for key, value in changes.items():
        if value is ...:
            ckpt.pop(key)
        else:
            ckpt[key] = value
    path = tmp_path / name
    torch.save(ckpt, path)
    return path


# ------------------------------------------------------------------------------------------ checkpoint fields
@pytest.mark.parametrize("changes, message", [
    ({"cfg": 42}, "'cfg' is 42, not cfg text"),
    ({"model": [1, 2]}, "'model' is not a state_dict (a dict of tensor names to tensors)"),
    ({"model": None}, "'model' is not a state_dict (a dict of tensor names to tensors)"),
    ({"model": {"w": 5}}, "'model' is not a state_dict (a dict of tensor names to tensors)"),
    ({"names": "person"}, "'names' is 'person', not a list of class names"),
    ({"darknet_header": "x"}, "'darknet_header' is 'x', not [major, minor, revision, seen]"),
    ({"darknet_header": [1]}, "'darknet_header' is [1], not [major, minor, revision, seen]"),
    ({"num_classes": "x"}, "'num_classes' is 'x', not a class count"),
    ({"input_size": [64]}, "'input_size' is [64], not [height, width], sides 1 to 8192"),
    ({"input_size": [100000, 100000]}, "'input_size' is [100000, 100000], not [height, width], sides 1 to 8192"),
    ({"format": "something/99"}, "'format' is 'something/99', not 'yolo-darknet/1'"),
])
def test_a_checkpoint_with_a_wrong_field_is_one_error(tiny, tmp_path, changes, message):
    path = edited(tiny[1], tmp_path, "bad.pt", **changes)
    with pytest.raises(WeightsError) as exc:
        load_model(None, path)
    assert str(exc.value) == f"{path}: damaged or foreign checkpoint: {message}"


@pytest.mark.parametrize("size", [[100000, 100000], [64, 0], [True, 64]])
def test_a_recorded_input_size_no_input_can_have_is_one_line(tiny, tmp_path, capsys, size):
    # before: detect allocated a 100000x100000 input ("tried to allocate ..."); --img-size itself stops at 8192
    path = edited(tiny[1], tmp_path, "big.pt", preprocessing={"resize": "letterbox", "img_size": size})
    image = tmp_path / "a.png"
    image.write_bytes(b"")  # never read: the checkpoint fails first
    err = one_line_error(capsys, lambda: detect.main(detect.parse_args(
        ["--weights", str(path), "--source", str(image), "--device", "cpu", "--nosave"])))
    assert err.startswith(f"error: {path}: malformed 'preprocessing' entry") and "sides 1 to 8192" in err


def test_integer_tensors_where_the_model_has_float_weights_are_refused(tiny, tmp_path):
    state = load_checkpoint_file(tiny[1])["model"]
    key = next(k for k, v in state.items() if v.is_floating_point())
    path = edited(tiny[1], tmp_path, "int.pt", model={**state, key: state[key].to(torch.int64)})
    with pytest.raises(WeightsError) as exc:
        load_model(None, path)
    assert str(exc.value) == (f"{path}: {key} holds torch.int64 values where the model has float weights: the "
                              "checkpoint is damaged or was not written by this project")


def test_the_tools_say_it_in_one_line(tiny, tmp_path, capsys):
    path = edited(tiny[1], tmp_path, "bad.pt", cfg=42)
    image = tmp_path / "a.png"
    image.write_bytes(b"")  # never read: the checkpoint fails first
    err = one_line_error(capsys, lambda: detect.main(detect.parse_args(
        ["--weights", str(path), "--source", str(image), "--device", "cpu", "--nosave"])))
    assert err == f"error: {path}: damaged or foreign checkpoint: 'cfg' is 42, not cfg text"
    err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
        ["--weights", str(path), "--output", str(tmp_path / "x.weights")])))
    assert err == f"error: {path}: damaged or foreign checkpoint: 'cfg' is 42, not cfg text"


# ------------------------------------------------------------------------------------------ convert
def test_convert_refuses_conversions_that_change_nothing(tiny, tmp_path, capsys):
    cfg, pt, weights = tiny
    err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
        ["--weights", str(pt), "--output", str(tmp_path / "copy.pt")])))
    assert err == (f"error: {tmp_path / 'copy.pt'}: --weights and --output are both .pt checkpoints: nothing to "
                   "convert (a --output without .pt or .pth writes Darknet .weights)")
    err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
        ["--cfg", str(cfg), "--weights", str(weights), "--output", str(tmp_path / "copy.weights")])))
    assert err == (f"error: {tmp_path / 'copy.weights'}: --weights and --output are both Darknet weights: nothing "
                   "to convert without --cutoff N (Darknet's partial, layers 0..N-1); a .pt --output writes a "
                   "checkpoint")
    assert not (tmp_path / "copy.pt").exists() and not (tmp_path / "copy.weights").exists()


def test_convert_refuses_cutoff_zero_and_names_that_do_not_fit(tiny, tmp_path, capsys):
    cfg, _, weights = tiny
    with pytest.raises(SystemExit) as stop:
        convert.parse_args(["--cfg", str(cfg), "--weights", str(weights), "--output", "x.pt", "--cutoff", "0"])
    assert stop.value.code == 2 and "--cutoff" in capsys.readouterr().err
    names = tmp_path / "two.names"
    names.write_text("a\nb\n")
    err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
        ["--cfg", str(cfg), "--weights", str(weights), "--output", str(tmp_path / "x.pt"), "--names", str(names)])))
    assert err == f"error: {names}: 2 class names but the model has 5 classes"
    err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
        ["--weights", str(tiny[1]), "--output", str(tmp_path / "x.weights"), "--names", str(names)])))
    assert err == f"error: {names}: --names is stored in a .pt checkpoint; Darknet .weights hold no names"
    assert not list(tmp_path.glob("x.*"))


def test_convert_with_cutoff_writes_what_darknet_partial_writes(darknet, tmp_path):
    """Darknet -> Darknet with --cutoff 9 equals `darknet partial cfg weights out 9` byte for byte (the first
    nine layers, ``seen`` reset to 0)."""
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    ours, theirs = tmp_path / "ours.conv.9", tmp_path / "theirs.conv.9"
    convert.main(convert.parse_args(["--cfg", str(cfg), "--weights", str(weights), "--output", str(ours),
                                     "--cutoff", "9"]))
    run = subprocess.run([str(darknet.folder / "darknet"), "partial", str(cfg), str(weights), str(theirs), "9"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0 and theirs.is_file(), run.stdout[-2000:] + run.stderr[-2000:]
    assert ours.read_bytes() == theirs.read_bytes()
    assert len(ours.read_bytes()) < len(weights.read_bytes())


def test_a_partial_checkpoint_warns_that_its_detections_mean_nothing(tiny, tmp_path, caplog):
    cfg, _, weights = tiny
    partial = tmp_path / "partial.pt"
    convert.main(convert.parse_args(["--cfg", str(cfg), "--weights", str(weights), "--output", str(partial),
                                     "--cutoff", "2"]))
    with caplog.at_level(logging.WARNING):
        load_model(None, partial)
    layers = len(Darknet(cfg).module_list)
    assert (f"{partial}: only layers 0..1 were read from Darknet weights (convert --cutoff 2); layers 2..{layers - 1} "
            "hold untrained initial values, so its detections mean nothing until it is trained "
            f"(train --weights {partial})") in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_model(None, tiny[1])  # a whole model: no word
    assert "only layers" not in caplog.text


# ------------------------------------------------------------------------------------------ overflowing weights
def test_a_network_whose_output_overflows_says_so(tiny, tmp_path, caplog):
    """Finite weights too large for float32 (a damaged file can hold them) make the output NaN/inf, and the
    detections garbage or none: the Detector says so once."""
    cfg, pt, _ = tiny
    state = load_checkpoint_file(pt)["model"]
    huge = {k: (torch.full_like(v, 1e30) if v.is_floating_point() and "running" not in k else v)
            for k, v in state.items()}
    path = edited(pt, tmp_path, "huge.pt", model=huge)
    image = (np.random.RandomState(0).rand(64, 64, 3) * 255).astype(np.uint8)
    with caplog.at_level(logging.WARNING):
        Detector(None, path, device="cpu")([image])
    assert f"{path}: the network's output holds" in caplog.text
    assert "NaN or infinite value(s) (float16 overflow with --half, or weights too large for float32)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        Detector(None, pt, device="cpu")([image])
    assert "NaN or infinite" not in caplog.text


# ------------------------------------------------------------------------------------------- damaged bytes
def test_a_byte_flipped_inside_a_tensor_is_refused_by_the_zip_crc(tiny, tmp_path, capsys):
    """torch.load reads a tensor whose bytes changed without a word; the member's CRC-32 in the zip says so."""
    import zipfile
    pt = tmp_path / "flipped.pt"
    pt.write_bytes(tiny[1].read_bytes())
    with zipfile.ZipFile(pt) as archive:  # the largest tensor record, and where its bytes lie in the file
        info = max((i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray(pt.read_bytes())
    name_length, extra_length = (int.from_bytes(data[info.header_offset + o:info.header_offset + o + 2], "little")
                                 for o in (26, 28))
    start = info.header_offset + 30 + name_length + extra_length
    data[start + info.file_size // 2] ^= 0x40
    pt.write_bytes(bytes(data))
    with pytest.raises(WeightsError) as exc:
        load_model(None, pt)
    assert str(exc.value) == (f"{pt}: damaged checkpoint: the member {info.filename!r} fails its CRC check (the "
                              "file's bytes changed after it was written): write or copy it again")
    image = tmp_path / "a.png"
    image.write_bytes(b"")  # never read: the checkpoint fails first
    err = one_line_error(capsys, lambda: detect.main(detect.parse_args(
        ["--weights", str(pt), "--source", str(image), "--device", "cpu", "--nosave"])))
    assert err == f"error: {exc.value}"


def test_an_intact_checkpoint_passes_the_crc_check(tiny):
    assert load_checkpoint_file(tiny[1])["num_classes"] == 5


def test_convert_writes_a_legal_name_too_long_for_a_temp_name_beside_it(tiny, tmp_path):
    """A 254-character output name is legal; the temporary file written before the rename must be too."""
    cfg, _, weights = tiny
    output = tmp_path / ("x" * 251 + ".pt")
    convert.main(convert.parse_args(["--weights", str(weights), "--cfg", str(cfg), "--output", str(output)]))
    assert load_checkpoint_file(output)["num_classes"] == 5
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left


def test_a_checkpoint_whose_names_do_not_fit_its_model_is_named(tiny, tmp_path, capsys):
    path = edited(tiny[1], tmp_path, "names.pt", names=["a", "b", "c"])
    message = f"{path}: damaged or foreign checkpoint: its names list 3 classes but the model has 5"
    with pytest.raises(WeightsError) as exc:
        load_model(None, path)
    assert str(exc.value) == message
    image = tmp_path / "a.png"
    image.write_bytes(b"")  # never read: the checkpoint fails first
    err = one_line_error(capsys, lambda: detect.main(detect.parse_args(
        ["--weights", str(path), "--source", str(image), "--device", "cpu", "--nosave"])))
    assert err == f"error: {message}"
