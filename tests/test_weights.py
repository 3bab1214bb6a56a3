"""Darknet .weights I/O: byte-identical round trips, partial files, clear errors; the convert tool."""
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from cfg_snippets import ONE_HEAD_CFG
from conftest import asset
from helpers import noisy_images, one_line_error, other_spellings, run_tool
from yolo import Darknet, WeightsError, load_model
from yolo.cli import convert
from yolo.models.checkpoint import load_checkpoint_file
from yolo.models.weights import float_count, read_header

REAL = [("yolov3-tiny.cfg", "yolov3-tiny.weights"), ("yolo-fastest-1.1.cfg", "yolo-fastest-1.1.weights"),
        ("yolo-fastest-1.1-xl.cfg", "yolo-fastest-1.1-xl.weights"), ("tiny.cfg", "tiny.weights")]


def header_of(path):
    """Independent header read: 3 int32 then 8 or 4 bytes of `seen` by version."""
    raw = Path(path).read_bytes()
    major, minor, revision = struct.unpack("<3i", raw[:12])
    size = 8 if major * 10 + minor >= 2 else 4
    return major, minor, revision, int.from_bytes(raw[12:12 + size], "little"), 12 + size


@pytest.mark.parametrize("cfg,weights", REAL)
def test_load_then_save_is_byte_identical(cfg, weights, tmp_path):
    cfg, weights = asset(f"cfg/{cfg}"), asset(f"weights/{weights}")
    model = Darknet(cfg).load_darknet_weights(weights)
    major, minor, revision, seen, nbytes = header_of(weights)
    assert model.darknet_header == (major, minor, revision, seen)
    assert float_count(model) * 4 + nbytes == weights.stat().st_size
    out = tmp_path / "copy.weights"
    model.save_darknet_weights(out)
    assert out.read_bytes() == weights.read_bytes()


def test_first_conv_values_come_from_the_right_offsets():
    """Darknet order for a BN conv: beta, gamma, mean, var, then OIHW weights (checked by hand offsets)."""
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    model = Darknet(cfg).load_darknet_weights(weights)
    raw = torch.frombuffer(bytearray(weights.read_bytes()[20:20 + 4 * (4 * 16 + 16 * 27)]), dtype=torch.float32)
    layer = model.module_list[0]
    assert torch.equal(layer.bn.bias, raw[0:16]) and torch.equal(layer.bn.weight, raw[16:32])
    assert torch.equal(layer.bn.running_mean, raw[32:48]) and torch.equal(layer.bn.running_var, raw[48:64])
    assert torch.equal(layer.conv.weight.flatten(), raw[64:64 + 432])
    assert layer.conv.bias is None


def test_partial_files_and_cutoff(tmp_path):
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    full = Darknet(cfg).load_darknet_weights(weights)
    part = tmp_path / "tiny.conv.15"
    full.save_darknet_weights(part, cutoff=15)
    assert part.stat().st_size == 20 + 4 * float_count(full, 15)
    # Without a cutoff the short file is an error that says which cutoff explains it.
    with pytest.raises(WeightsError, match=r"holds exactly layers 0\.\.14; pass cutoff=15"):
        Darknet(cfg).load_darknet_weights(part)
    fresh = Darknet(cfg)
    head_before = fresh.module_list[15].conv.weight.clone()
    fresh.load_darknet_weights(part, cutoff=15)
    assert torch.equal(fresh.module_list[13].conv.weight, full.module_list[13].conv.weight)
    assert torch.equal(fresh.module_list[15].conv.weight, head_before)  # beyond the cutoff: untouched
    # A full file read with a cutoff: the extra layers are explained by the cutoff.
    Darknet(cfg).load_darknet_weights(weights, cutoff=15)


@pytest.mark.slow
def test_broken_weights_files_are_clear_errors(tmp_path):
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    data = weights.read_bytes()
    expected = float_count(Darknet(cfg))
    cases = {
        "truncated.weights": (data[:-4000], rf"needs {expected} float32 values .* has {expected - 1000}.*ends inside"),
        "extra.weights": (data + b"\0" * 8, rf"needs {expected} .* has {expected + 2}.*2 values too many"),
        "ragged.weights": (data[:-2], r"not a whole number of float32 values"),
        "header.weights": (data[:10], r"too short for a Darknet weights header"),
        "zip.pt.weights": (b"PK\x03\x04" + data[4:100], r"not a Darknet weights file.*zip"),
        "empty.weights": (b"", r"too short"),
    }
    for name, (content, pattern) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(WeightsError, match=pattern):
            Darknet(cfg).load_darknet_weights(path)
    with pytest.raises(WeightsError, match="not found"):
        Darknet(cfg).load_darknet_weights(tmp_path / "missing.weights")


def test_weights_for_another_cfg_are_refused():
    with pytest.raises(WeightsError, match=r"yolov4-tiny.cfg needs \d+ float32 values after the header"):
        Darknet(asset("cfg/yolov4-tiny.cfg")).load_darknet_weights(asset("weights/yolov3-tiny.weights"))
    with pytest.raises(WeightsError, match="needs"):
        Darknet(asset("cfg/yolo-fastest-1.1.cfg")).load_darknet_weights(asset("weights/yolo-fastest-1.1-xl.weights"))


def test_old_header_with_4_byte_seen():
    header = read_header(asset("weights/tiny.weights"))
    assert (header.major, header.minor, header.seen_bytes, header.nbytes) == (0, 1, 4, 16)
    assert header.seen == header_of(asset("weights/tiny.weights"))[3]


def test_new_model_writes_minor_2_with_8_byte_seen(tmp_path):
    model = Darknet(asset("cfg/yolov3-tiny.cfg"))
    out = tmp_path / "new.weights"
    model.save_darknet_weights(out)
    major, minor, _, _, nbytes = header_of(out)
    assert (major, minor, nbytes) == (0, 2, 20)
    again = Darknet(asset("cfg/yolov3-tiny.cfg")).load_darknet_weights(out)
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_convert_tool_round_trip(tmp_path):
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    pt, back = tmp_path / "tiny.pt", tmp_path / "back.weights"
    result = run_tool("convert", "--cfg", cfg, "--weights", weights, "--output", pt,
                      "--names", asset("cfg/coco.names"))
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout
    ckpt = torch.load(pt, map_location="cpu", weights_only=True)
    assert ckpt["num_classes"] == 80 and ckpt["cfg"] == cfg.read_text() and len(ckpt["names"]) == 80
    result = run_tool("convert", "--weights", pt, "--output", back)  # the .pt carries its cfg
    assert result.returncode == 0, result.stderr
    assert back.read_bytes() == weights.read_bytes()
    model = load_model(None, pt)
    assert torch.equal(model.module_list[0].conv.weight, Darknet(cfg).load_darknet_weights(weights)
                       .module_list[0].conv.weight)


@pytest.mark.slow
def test_convert_tool_errors_are_one_line(tmp_path, capsys):
    """Once in a process of its own, as a user runs it (the launcher's exit and output), then in this process
    through the same ``cli`` the launcher calls."""
    from yolo.cli.convert import cli

    cfg = asset("cfg/yolov4-tiny.cfg")
    result = run_tool("convert", "--cfg", cfg, "--weights", asset("weights/yolov3-tiny.weights"),
                      "--output", tmp_path / "x.pt")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for args in (["--cfg", cfg, "--weights", tmp_path / "missing.weights", "--output", tmp_path / "x.pt"],
                 ["--weights", asset("weights/yolov3-tiny.weights"), "--output", tmp_path / "x.pt"]):
        one_line_error(capsys, lambda: cli([str(a) for a in args]))
    bad_pt = tmp_path / "bad.pt"
    bad_pt.write_bytes(b"not a zip")
    err = one_line_error(capsys, lambda: cli(["--weights", str(bad_pt), "--output", str(tmp_path / "y.weights")]))
    assert "not a PyTorch checkpoint" in err


def test_convert_refuses_an_output_that_is_a_fifo_or_a_device(tmp_path, capsys):
    """A FIFO or a device at ``--output`` (a link to /dev/null here: /dev/null itself is never at stake) is one
    line before the weights are read, and stays what it was."""
    import os
    import stat

    from helpers import one_line_error
    from yolo.cli.convert import cli

    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    fifo, device = tmp_path / "pipe.pt", tmp_path / "null.weights"
    os.mkfifo(fifo)
    device.symlink_to("/dev/null")
    for output in (fifo, device):
        err = one_line_error(capsys, lambda: cli(["--cfg", str(cfg), "--weights", str(weights), "--output",
                                                 str(output), "--cutoff", "1"]))
        assert err.startswith(f"error: {output}: cannot write: it is ") and "not a regular file" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and device.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null.weights", "pipe.pt"]


def test_convert_shows_an_output_path_with_escapes(tmp_path, capsys):
    """A path with a terminal escape or bytes that are not UTF-8 (``out\\x1b[2J\\xff.pt``) is written as it is and
    echoed as text: no escape reaches the terminal, and a strict UTF-8 terminal gets no UnicodeEncodeError."""
    import os

    from yolo.cli.convert import cli

    output = tmp_path / os.fsdecode(b"out\x1b[2J\xff.pt")
    cli(["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
         "--output", str(output)])
    out = capsys.readouterr().out
    assert output.is_file() and "\x1b" not in out and "\udcff" not in out
    assert "out\\x1b[2J\\udcff.pt" in out


def test_a_weights_file_that_is_a_fifo_is_one_line(tmp_path):
    """``convert --weights`` on a FIFO hung in the header read (here a writer comes late, so the old read got its
    bytes and failed on them instead): refused as not a regular file before it is opened."""
    from helpers import fifo_with_a_late_writer
    from yolo.errors import WeightsError

    fifo = tmp_path / "net.weights"
    end = fifo_with_a_late_writer(fifo, "not weights")
    try:
        with pytest.raises(WeightsError) as error:
            Darknet(asset("cfg/yolov3-tiny.cfg")).load_darknet_weights(fifo)
    finally:
        end()
    assert str(error.value) == f"{fifo}: cannot read the weights file: it is a FIFO (named pipe), not a regular file"


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


def test_convert_writes_a_legal_name_too_long_for_a_temp_name_beside_it(tiny, tmp_path):
    """A 254-character output name is legal; the temporary file written before the rename must be too."""
    cfg, _, weights = tiny
    output = tmp_path / ("x" * 251 + ".pt")
    convert.main(convert.parse_args(["--weights", str(weights), "--cfg", str(cfg), "--output", str(output)]))
    assert load_checkpoint_file(output)["num_classes"] == 5
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left


# ------------------------------------------------------------------------------- output == input
@pytest.mark.parametrize("source", ["pt", "weights"])
def test_convert_never_writes_over_its_input(capsys, tiny, tmp_path, source):
    from yolo.cli import convert

    cfg, pt, weights = tiny
    given = pt if source == "pt" else weights
    before = given.read_bytes()
    for output in other_spellings(given, tmp_path):
        err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
            ["--weights", str(given), "--cfg", str(cfg), "--output", str(output)])))
        assert "--output is the input --weights" in err and "choose another --output" in err, err
        assert given.read_bytes() == before
    err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
        ["--weights", str(given), "--cfg", str(cfg), "--output", str(cfg)])))
    assert "--output is the input --cfg" in err
    assert cfg.read_text() == ONE_HEAD_CFG


# ------------------------------------------------------------------------------- full disk
def test_weights_with_nan_or_inf_are_refused_naming_file_and_layer(capsys, tiny, tmp_path):
    from yolo.cli import detect
    from yolo.errors import WeightsError

    cfg, pt, weights = tiny
    data = bytearray(weights.read_bytes())
    floats = np.frombuffer(data, dtype="<f4", offset=20)  # after the 20-byte header (version 0.2)
    layer0 = 8 * 4 + 8 * 3 * 3 * 3  # [convolutional] 0: biases, scales, mean, variance, then the kernels
    bad = tmp_path / "nan.weights"
    floats = floats.copy()
    floats[layer0 + 5] = np.nan  # in layer 1 (the [maxpool] has no weights: the next is layer 2)
    bad.write_bytes(bytes(data[:20]) + floats.tobytes())
    with pytest.raises(WeightsError, match=r"nan.weights: layer 2 holds 1 NaN or infinite value"):
        Darknet(cfg).load_darknet_weights(bad)
    floats[:] = np.inf
    bad.write_bytes(bytes(data[:20]) + floats.tobytes())
    err = one_line_error(capsys, lambda: detect.cli(["--cfg", str(cfg), "--weights", str(bad), "--source",
                                                     str(noisy_images(tmp_path / "img", 1, 64)), "--device", "cpu"]))
    assert "nan.weights: layer 0 holds" in err, err
    # The same in a .pt checkpoint.
    ckpt = torch.load(pt, weights_only=True)
    key = next(k for k, v in ckpt["model"].items() if v.is_floating_point())
    ckpt["model"][key].view(-1)[0] = float("nan")
    torch.save(ckpt, tmp_path / "nan.pt")
    err = one_line_error(capsys, lambda: detect.cli(["--weights", str(tmp_path / "nan.pt"), "--source",
                                                     str(tmp_path / "img"), "--device", "cpu"]))
    assert f"nan.pt: {key} holds 1 NaN or infinite value" in err, err
    # ... and as the starting weights of a training.
    from yolo.engine.transfer import load_pretrained
    with pytest.raises(WeightsError, match=f"nan.pt: {key} holds 1 NaN"):
        load_pretrained(Darknet(cfg), tmp_path / "nan.pt")


def test_the_nan_check_of_weights_does_not_refuse_finite_values_whose_sum_overflows():
    from yolo.errors import WeightsError
    from yolo.models.weights import check_finite

    layers = [(0, [torch.empty(6)]), (3, [torch.empty(4)])]
    check_finite(torch.full((10,), 3e38), layers, "big.weights")  # the float32 sum is inf, every value finite
    values = torch.full((10,), 3e38)
    values[7] = float("-inf")
    with pytest.raises(WeightsError, match=r"^big.weights: layer 3 holds 1 NaN or infinite value\(s\) of 4"):
        check_finite(values, layers, "big.weights")


# ------------------------------------------------------------------------------------------ tools
def test_convert_writes_weights_into_a_new_folder(tiny_pt, tmp_path):
    from yolo.cli import convert

    for output in (tmp_path / "new" / "a" / "tiny.weights", tmp_path / "new" / "b" / "tiny.pt"):
        convert.main(convert.parse_args(["--weights", str(tiny_pt if output.suffix == ".weights" else
                                                            tmp_path / "new" / "a" / "tiny.weights"),
                                         "--cfg", str(tmp_path / "tiny.cfg"), "--output", str(output)]))
        assert output.is_file() and not list(output.parent.glob(".*tmp"))
    # Round trip through the new folders: same tensors.
    a = load_checkpoint_file(tiny_pt)["model"]
    b = load_checkpoint_file(tmp_path / "new" / "b" / "tiny.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a if "num_batches" not in k)
