"""Checkpoints (yolo.models.checkpoint): hand-edited, foreign, partial, damaged or overflowing ones are one error or
one warning that says what is wrong; saving on a full disk keeps the last good file."""

import logging
import os

import numpy as np
import pytest
import torch

from helpers import one_line_error
from yolo.cli import convert, detect
from yolo.errors import WeightsError
from yolo.inference.detector import Detector
from yolo.models.checkpoint import load_checkpoint_file, save_checkpoint
from yolo.models.model import Darknet, load_model


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


def test_checkpoint_save_on_a_full_disk_names_the_cause_and_keeps_last_pt(tmp_path, monkeypatch):
    """torch.save on a full disk raises a RuntimeError about a zip position; it is reported as a full disk
    (here the file system is made to look full), and the previous file stays whole."""
    import yolo.files.write_errors as write_errors
    from yolo.errors import OutputError
    from yolo.models.checkpoint import load_checkpoint_file

    path = tmp_path / "last.pt"
    save_checkpoint({"model": {}, "epoch": 1}, path)
    real_statvfs = os.statvfs

    class Full:
        def __init__(self, stats):
            self.f_flag, self.f_frsize, self.f_bavail = stats.f_flag, stats.f_frsize, 0

    def full_save(obj, f, *args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")

    monkeypatch.setattr(write_errors.os, "statvfs", lambda p: Full(real_statvfs(p)))
    monkeypatch.setattr(torch, "save", full_save)
    with pytest.raises(OutputError, match=r"last\.pt: cannot write: the disk is full \(0 bytes free\)"):
        save_checkpoint({"model": {}, "epoch": 2}, path)
    monkeypatch.undo()
    assert load_checkpoint_file(path)["epoch"] == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


# ------------------------------------------------------------------------------------------ checkpoints
def test_checkpoint_errors_are_complete_and_never_advise_unsafe_loading(tiny_pt, tmp_path):
    import argparse

    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(tiny_pt.read_bytes()[:5000])
    foreign = tmp_path / "foreign.pt"
    torch.save({"model": argparse.Namespace(a=1)}, foreign)  # a pickled Python object
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    text = tmp_path / "text.pt"
    text.write_text("not a checkpoint\n")
    expected = {truncated: "truncated or damaged", foreign: "not a checkpoint written by this project",
                empty: "empty file", text: "not a PyTorch checkpoint"}
    for path, words in expected.items():
        with pytest.raises(WeightsError) as info:
            load_checkpoint_file(path)
        message = str(info.value)
        assert message.startswith(f"{path}: ") and words in message, message
        assert "\n" not in message and "weights_only" not in message and "\x1b" not in message, message
