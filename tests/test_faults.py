"""Faults and hostile inputs: no tool writes over its own input, a full or read-only disk is a one-line error
naming the path (never a success, never a traceback), absurd counts are refused before they allocate,
and untrusted text is echoed escaped and bounded.

Full and read-only file systems are real ones where the machine allows it (a small tmpfs, mounted as root);
elsewhere those tests skip with the reason, and the same logic is covered with a writer that fails."""
import errno
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from cfg_snippets import ONE_HEAD_CFG
from helpers import one_line_error, run_tool
from training_helpers import HYP as ONE_HEAD_HYP, made_up_evaluation, write_one_head_model, write_one_head_training
from yolo.data import SHAPE_NAMES
from yolo.models.checkpoint import save_checkpoint
from yolo.models.model import Darknet

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny(tmp_path):
    """The tiny one-head cfg (5 classes), its .pt checkpoint and its Darknet .weights, random weights."""
    return write_one_head_model(tmp_path)


def mounted(path: Path, options: str):
    """Mount a tmpfs at ``path`` with ``options`` (``size=300k``, ``ro``); skip the test when the machine
    refuses (not root, or a container without the capability). Returns the unmount function."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({(proc.stderr or proc.stdout).strip() or 'mount failed'}): "
                    "the monkeypatched tests cover the same logic")
    return lambda: subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 300 kB file system (a tmpfs), unmounted after the test."""
    path = tmp_path / "small"
    unmount = mounted(path, "size=300k")
    yield path
    unmount()


@pytest.fixture
def read_only_disk(tmp_path):
    """A read-only file system (chmod does not stop root: a tmpfs mounted ``ro``), unmounted after the test."""
    path = tmp_path / "ro"
    unmount = mounted(path, "ro,size=64k")
    yield path
    unmount()


# ------------------------------------------------------------------------------- output == input
def _links(path: Path, tmp_path: Path):
    """``path`` itself, spelled another way, through a symbolic link and through a hard link."""
    other = tmp_path / "sub"
    other.mkdir(exist_ok=True)
    symlink, hardlink = other / f"sym{path.suffix}", other / f"hard{path.suffix}"
    symlink.symlink_to(path)
    os.link(path, hardlink)
    return [path, other / ".." / path.name, symlink, hardlink]


@pytest.mark.parametrize("source", ["pt", "weights"])
def test_convert_never_writes_over_its_input(capsys, tiny, tmp_path, source):
    from yolo.cli import convert

    cfg, pt, weights = tiny
    given = pt if source == "pt" else weights
    before = given.read_bytes()
    for output in _links(given, tmp_path):
        err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
            ["--weights", str(given), "--cfg", str(cfg), "--output", str(output)])))
        assert "--output is the input --weights" in err and "choose another --output" in err, err
        assert given.read_bytes() == before
    err = one_line_error(capsys, lambda: convert.main(convert.parse_args(
        ["--weights", str(given), "--cfg", str(cfg), "--output", str(cfg)])))
    assert "--output is the input --cfg" in err
    assert cfg.read_text() == ONE_HEAD_CFG


def test_export_never_writes_over_its_input(capsys, tiny, tmp_path):
    from yolo.cli import export

    cfg, pt, weights = tiny
    before = weights.read_bytes()
    for output in _links(weights, tmp_path):
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


def test_anchors_write_never_replaces_its_cfg(capsys, tiny, tmp_path):
    from yolo.cli import anchors

    cfg, _, _ = tiny
    link = tmp_path / "link.cfg"
    link.symlink_to(cfg)
    err = one_line_error(capsys, lambda: anchors.main(anchors.parse_args(
        ["--data", str(tmp_path / "missing.yaml"), "--cfg", str(cfg), "--write", str(link)])))
    assert "--write is the input --cfg" in err, err
    assert cfg.read_text() == ONE_HEAD_CFG


# ------------------------------------------------------------------------------- diverging boxes, hooks
def test_drawing_clips_absurd_boxes_like_detection_and_skips_non_finite_ones():
    """A diverging model's box (about +-2.2e9 pixels, beyond OpenCV's 32-bit coordinates) is drawn as the
    box clipped to the image, the way detection clips; a NaN box is not drawn."""
    from yolo.visualize import draw_detections

    image = np.full((96, 96, 3), 40, np.uint8)
    scores, labels = torch.tensor([0.9]), torch.tensor([1])
    absurd = draw_detections(image, torch.tensor([[-2.2e9, -2.2e9, 2.2e9, 2.2e9]]), scores, labels, ["a", "b"])
    clipped = draw_detections(image, torch.tensor([[0.0, 0.0, 96.0, 96.0]]), scores, labels, ["a", "b"])
    assert np.array_equal(absurd, clipped) and not np.array_equal(absurd, image)
    nan = draw_detections(image, torch.tensor([[float("nan"), 0.0, 5.0, 5.0]]), scores, labels, ["a", "b"])
    assert np.array_equal(nan, image)


def test_training_sample_drawing_survives_a_diverged_model():
    """The TensorBoard sample images of a model whose boxes diverged (the hook that ended such runs)."""
    from yolo.engine.hooks.writers import sample_predictions

    class Diverged(torch.nn.Module):
        yolo_layers = []

        def forward(self, x):  # one box per image: centre 48, 4.4e9 pixels wide and high, a sure class 0
            row = torch.tensor([48.0, 48.0, 4.4e9, 4.4e9, 1.0, 1.0, 0.0])
            return row.expand(x.shape[0], 1, 7).clone()

    dataset = [(torch.zeros(3, 96, 96, dtype=torch.uint8), torch.zeros(0, 6), None)] * 2
    drawn = sample_predictions(Diverged(), dataset, 2, ["a", "b"], torch.device("cpu"))
    assert drawn.shape == (2, 96, 96, 3) and drawn.any()


@pytest.fixture
def train_setup(tmp_path):
    """8 tiny shapes images, the one-head cfg and its settings (training_helpers.HYP)."""
    return write_one_head_training(tmp_path)


def test_a_failing_report_hook_logs_one_warning_and_the_run_goes_on(train_setup, monkeypatch, caplog):
    import yolo.engine.hooks.writers as writers
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.checkpoint import load_checkpoint_file

    def broken(*args, **kwargs):
        raise OverflowError("Python int too large to convert to C int")

    monkeypatch.setattr(writers, "sample_predictions", broken)
    monkeypatch.setattr(Trainer, "_evaluate", made_up_evaluation)
    options = TrainOptions(cfg=str(train_setup / "tiny.cfg"), data=str(train_setup / "data.yaml"),
                           hyp={**ONE_HEAD_HYP, "tensorboard": True, "tb_images": 2}, epochs=3, device="cpu",
                           project=str(train_setup / "runs"), name="run", progress=False, workers=0)
    with caplog.at_level("DEBUG"):
        result = Trainer.from_options(options).fit()
    assert result.status == "finished" and result.epochs_done == 3
    assert load_checkpoint_file(result.last)["train"]["epoch"] == 3
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "TensorBoard writer failed" in r.message]
    assert len(warnings) == 1 and "OverflowError" in warnings[0].message and "goes on" in warnings[0].message


# ------------------------------------------------------------------------------- full disk
def _noisy_images(folder: Path, count: int, side: int = 320):
    """``count`` JPEG files of random noise (about 100 kB each: they do not compress)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        cv2.imwrite(str(folder / f"img{i}.jpg"), rng.integers(0, 256, (side, side, 3), dtype=np.uint8))
    return folder


def _detect(tiny, source: Path, output: Path, *extra):
    from yolo.cli import detect

    cfg, pt, _ = tiny
    return lambda: detect.cli(["--weights", str(pt), "--source", str(source), "--output", str(output),
                               "--device", "cpu", "--img-size", "64", "--conf-thres", "0.0", "--max-det", "5",
                               "--save-txt", "--save-json", "--no-progress", *extra])


def test_detect_on_a_full_disk_is_an_error_naming_the_file(capsys, tiny, tmp_path, small_disk):
    source = _noisy_images(tmp_path / "images", 7)
    err = one_line_error(capsys, _detect(tiny, source, small_disk / "runs"))
    assert "cannot write: the disk is full" in err and str(small_disk) in err, err
    assert "results in" not in capsys.readouterr().out


def test_detect_reports_an_image_writer_failure(capsys, tiny, tmp_path, monkeypatch):
    """The same without a small file system: OpenCV's encoder returns False (the image is encoded, then written)."""
    import yolo.inference.writer as writer_module

    source = _noisy_images(tmp_path / "images", 2, side=64)
    monkeypatch.setattr(writer_module.cv2, "imencode", lambda *args, **kwargs: (False, None))
    err = one_line_error(capsys, _detect(tiny, source, tmp_path / "runs"))
    assert "img0.jpg: cannot write: the writer reported a failure" in err, err


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


def test_training_on_a_disk_that_fills_up_stops_with_one_line_and_resumes(capsys, train_setup, tmp_path,
                                                                          small_disk, monkeypatch):
    """The disk fills up after epoch 1 (a filler file takes every free block); the save of epoch 2 fails with
    one line saying the disk is full and how to continue; with space freed, --resume finishes the run."""
    import yolo.cli.train as train_cli
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.checkpoint import load_checkpoint_file

    filler = small_disk / "filler"

    def fill_disk(trainer):
        if trainer.epoch == 1:
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
            finally:
                os.close(fd)

    class FillingTrainer(Trainer):
        def __init__(self, parts):
            super().__init__(parts)
            self.add_callback("epoch_end", fill_disk)

    monkeypatch.setattr(train_cli, "Trainer", FillingTrainer)
    monkeypatch.setattr(Trainer, "_evaluate", made_up_evaluation)
    args = train_cli.parse_args(["--cfg", str(train_setup / "tiny.cfg"), "--data", str(train_setup / "data.yaml"),
                                 "--hyp", str(train_setup / "hyp.yaml"), "--epochs", "2", "--device", "cpu",
                                 "--project", str(small_disk), "--name", "run", "--no-progress"])
    err = one_line_error(capsys, lambda: train_cli.main(args))
    last = small_disk / "run" / "last.pt"
    assert "cannot write: the disk is full" in err and f"{last} is intact: continue with --resume {last}" in err
    filler.unlink()
    assert load_checkpoint_file(last)["train"]["epoch"] == 1
    result = Trainer.from_options(TrainOptions(resume=str(last), progress=False, workers=0)).fit()
    assert result.status == "finished" and load_checkpoint_file(last)["train"]["epoch"] == 2


# ------------------------------------------------------------------------------- read-only output folder
def test_every_tool_on_a_read_only_output_folder_is_one_line(capsys, tiny, train_setup, read_only_disk):
    from yolo.cli import convert, eval as eval_cli, train as train_cli

    cfg, pt, weights = tiny
    source = _noisy_images(train_setup / "images", 1, side=64)
    checks = {
        "detect": _detect(tiny, source, read_only_disk / "runs"),
        "train": lambda: train_cli.cli(["--cfg", str(cfg), "--data", str(train_setup / "data.yaml"),
                                        "--hyp", str(train_setup / "hyp.yaml"), "--epochs", "1", "--device", "cpu",
                                        "--project", str(read_only_disk / "runs"), "--no-progress"]),
        "eval": lambda: eval_cli.cli(["--weights", str(pt), "--data", str(train_setup / "data.yaml"),
                                      "--device", "cpu", "--project", str(read_only_disk / "runs"),
                                      "--no-progress", "--workers", "0"]),
        "convert .weights": lambda: convert.cli(["--weights", str(pt), "--output",
                                                 str(read_only_disk / "tiny.weights")]),
        "convert .pt": lambda: convert.cli(["--weights", str(weights), "--cfg", str(cfg), "--output",
                                            str(read_only_disk / "tiny.pt")]),
    }
    for tool, run in checks.items():
        err = one_line_error(capsys, run)
        assert "cannot write: the file system is read-only" in err and str(read_only_disk) in err, (tool, err)


def test_a_read_only_folder_is_one_line_without_a_mount(capsys, tiny, tmp_path, monkeypatch):
    """The same logic where no file system can be mounted: creating folders under ``ro`` fails as it does on
    a read-only file system."""
    import pathlib
    from yolo.cli import convert

    ro = tmp_path / "ro"
    real_mkdir = pathlib.Path.mkdir

    def mkdir(self, *args, **kwargs):
        if str(self).startswith(str(ro)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    source = _noisy_images(tmp_path / "images", 1, side=64)
    err = one_line_error(capsys, _detect(tiny, source, ro / "runs"))
    assert f"{ro}/runs/exp: cannot write: the file system is read-only" in err, err
    err = one_line_error(capsys, lambda: convert.cli(["--weights", str(tiny[1]), "--output", str(ro / "t.weights")]))
    assert f"{ro}: cannot write: the file system is read-only" in err, err


# ------------------------------------------------------------------------------- absurd counts
# Written out here, not from tests/cfg_snippets.py: the cases below name its line numbers.
HEAD_CFG = "[net]\nwidth=64\nheight=64\nchannels=3\n[convolutional]\nfilters={filters}\nsize=1\nstride=1\n" \
           "activation=linear\n{head}"


@pytest.mark.parametrize("head, filters, line, key", [
    ("[yolo]\nmask=0,1,2\nanchors=10,10, 20,20, 40,40\nclasses=5\nnum=100000000\n", 30, 14, "num"),
    ("[yolo]\nmask=0\nanchors=10,10\nclasses=100000000\nnum=1\n", 30, 13, "classes"),
    ("[region]\nanchors=1,1\nclasses=5\nnum=100000000\n", 50, 13, "num"),
    ("[Gaussian_yolo]\nmask=0\nanchors=10,10\nclasses=5\nnum=100000000\n", 14, 14, "num"),
    ("[detection]\nclasses=5\nnum=2\nside=1000000\ncoords=4\n", 30, 13, "side"),
])
def test_absurd_head_counts_are_refused_with_their_line_before_allocation(head, filters, line, key):
    from yolo.errors import CfgError
    from yolo.models.cfg import parse_cfg_text

    text = HEAD_CFG.format(filters=filters, head=head)
    with pytest.raises(CfgError) as info:
        Darknet(parse_cfg_text(text, "big.cfg"))
    message = str(info.value)
    assert message.startswith(f"big.cfg:{line}: ") and f"'{key}=" in message and "out of range" in message, message


ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"]
                       + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)])


def test_a_yaml_alias_bomb_is_refused_at_once_with_its_line(tmp_path):
    from yolo.data import load_data_config
    from yolo.engine.config import read_hyp
    from yolo.errors import ConfigError, DataError

    data = tmp_path / "bomb.yaml"
    data.write_text(f"train: images\nval: images\n{ALIAS_BOMB}\nnames: *i\n")
    with pytest.raises(DataError) as info:
        load_data_config(data, prepare=False)
    message = str(info.value)
    assert message.startswith(f"{data}:4: not valid YAML") and "alias *a refused" in message, message
    assert len(message) < 1000
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(f"{ALIAS_BOMB}\nmomentum: *i\n")
    with pytest.raises(ConfigError, match="alias \\*a refused"):
        read_hyp(hyp)


def test_too_many_class_names_are_refused(tmp_path):
    from yolo.data import load_data_config
    from yolo.errors import DataError
    from yolo.files.names import read_names

    names = tmp_path / "many.names"
    names.write_text("c\n" * 100_001)
    with pytest.raises(ValueError, match="100,001 class names, more than the 100,000 allowed"):
        read_names(names)
    data = tmp_path / "data.yaml"
    data.write_text("train: a\nval: a\nnames: [" + ", ".join(["c"] * 100_001) + "]\n")
    with pytest.raises(DataError, match="100,001 classes, more than the 100,000 allowed"):
        load_data_config(data, prepare=False)
    data.write_text("train: a\nval: a\nnames: [a, [b, c]]\n")
    with pytest.raises(DataError, match="'names' holds a list where a class name belongs"):
        load_data_config(data, prepare=False)


def test_values_echoed_in_errors_are_bounded_and_escaped(tmp_path, capsys):
    from yolo.cli.args import fail
    from yolo.data.validation import read_label_file
    from yolo.errors import MAX_MESSAGE, DataError, shown

    assert shown("x" * 10) == "x" * 10
    assert shown("x" * 1_000_000) == "x" * 200 + "... (1,000,000 characters)"
    assert shown("\x1b[2J\x07ok\n") == "\\x1b[2J\\x07ok\\n"
    data = tmp_path / "data.yaml"
    data.write_text("train: a\nval: a\nnames: [a]\nnc: " + "x" * 1_000_000 + "\n")
    from yolo.data import load_data_config
    with pytest.raises(DataError) as info:
        load_data_config(data, prepare=False)
    assert len(str(info.value)) <= MAX_MESSAGE + 40
    # A label line that would clear the screen is shown escaped, in the problem and in a tool's error line.
    label = tmp_path / "a.txt"
    label.write_bytes(b"0 0.5 0.5 0.1 0.1\n\x1b[2J\x1b[H\x1b]0;owned\x07 hello\n")
    _, problems = read_label_file(label, 1)
    assert len(problems) == 1 and "\x1b" not in str(problems[0]) and "\\x1b[2J" in str(problems[0])
    with pytest.raises(SystemExit):
        fail(f"bad: \x1b[2J{'y' * 1_000_000}")
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1 and len(err) < MAX_MESSAGE + 100


# ------------------------------------------------------------------------------- silent nonsense
@pytest.mark.parametrize("head, filters, anchors_line", [
    ("[yolo]\nmask=0,1,2\nanchors=10,10, 0,20, 40,40\nclasses=5\nnum=3\n", 30, 12),
    ("[yolo]\nmask=0,1,2\nanchors=10,10, 20,-20, 40,40\nclasses=5\nnum=3\n", 30, 12),
    ("[region]\nanchors=1,1, -1,2\nclasses=5\nnum=2\n", 20, 11),
    ("[Gaussian_yolo]\nmask=0\nanchors=0,10\nclasses=5\nnum=1\n", 14, 12),
])
def test_anchors_of_no_or_negative_size_are_refused_with_their_line(head, filters, anchors_line):
    from yolo.errors import CfgError
    from yolo.models.cfg import parse_cfg_text

    with pytest.raises(CfgError, match=rf"^bad.cfg:{anchors_line}: .*anchor sizes must be positive"):
        Darknet(parse_cfg_text(HEAD_CFG.format(filters=filters, head=head), "bad.cfg"))


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
                                                     str(_noisy_images(tmp_path / "img", 1, 64)), "--device", "cpu"]))
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


@pytest.mark.parametrize("hyp, words", [
    ("momentum: .nan", "hyp.yaml: momentum=nan is not a finite number"),
    ("momentum: 1.5", "hyp.yaml: momentum=1.5 is out of range: it must be at least 0 and below 1"),
    ("decay: -0.1", "hyp.yaml: decay=-0.1 is out of range"),
    ("learning_rate: .inf", "hyp.yaml: learning_rate=inf is not a finite number"),
    ("batch: 100000000", "hyp.yaml: batch=100000000 is out of range: it must be between 1 and 65,536"),
    ("iou_thres: 2", "hyp.yaml: iou_thres=2.0 is out of range"),
    ("img_size: [100000, 64]", "hyp.yaml: img_size=[100000, 64] is out of range"),
])
def test_hyperparameters_out_of_range_are_refused_naming_the_key(tmp_path, hyp, words):
    from yolo.engine.config import resolve_hyp
    from yolo.errors import ConfigError
    from yolo.models.cfg import parse_cfg_text

    sections = parse_cfg_text(ONE_HEAD_CFG, "tiny.cfg")
    (tmp_path / "hyp.yaml").write_text(hyp + "\n")
    with pytest.raises(ConfigError) as info:
        resolve_hyp(sections[0], sections[-1:], tmp_path / "hyp.yaml", {})
    assert str(info.value).startswith(str(tmp_path / words.split(":")[0])) and words.split(": ", 1)[1] in \
        str(info.value), str(info.value)


def test_a_cfg_momentum_out_of_range_names_the_cfg_line(tmp_path):
    from yolo.engine.config import resolve_hyp
    from yolo.errors import ConfigError
    from yolo.models.cfg import parse_cfg_text

    sections = parse_cfg_text(ONE_HEAD_CFG.replace("policy=constant", "policy=constant\nmomentum=1"), "tiny.cfg")
    with pytest.raises(ConfigError, match=r"^tiny.cfg:10: momentum=1.0 is out of range"):
        resolve_hyp(sections[0], sections[-1:], None, {})


def test_a_class_filter_the_model_does_not_have_is_an_error(capsys, tiny, tmp_path):
    from yolo.cli import detect

    err = one_line_error(capsys, lambda: detect.cli(["--weights", str(tiny[1]), "--source",
                                                     str(_noisy_images(tmp_path / "img", 1, 64)), "--device", "cpu",
                                                     "--classes", "1", "7", "9"]))
    assert "--classes 7 9: the model has 5 classes (0..4)" in err, err


def test_the_detector_refuses_a_class_filter_the_model_does_not_have(tiny):
    from yolo.inference.detector import Detector

    with pytest.raises(ValueError, match=r"^classes -1 5: the model has 5 classes \(0\.\.4\)"):
        Detector(None, str(tiny[1]), device="cpu", classes=[0, 5, -1])
    assert Detector(None, str(tiny[1]), device="cpu", classes=[0, 4]).settings.classes == (0, 4)


def test_a_label_path_that_is_a_folder_is_reported_as_a_folder(tmp_path):
    from yolo.data import ensure_shapes_dataset
    from yolo.data.dataset import scan_yolo

    root = ensure_shapes_dataset(tmp_path / "data", num_train=3, num_val=1, seed=3, size_range=(64, 80),
                                 max_shapes=2)
    label = root / "labels" / "train" / "00001.txt"
    label.unlink()
    label.mkdir()
    records, report = scan_yolo(root / "images" / "train", len(SHAPE_NAMES), cache=False)
    texts = [str(p) for p in report.problems]
    assert any(t.startswith(f"{label}: is a folder where the image's label file belongs") for t in texts), texts
    assert len(records) == 2 and not any("no matching image" in t for t in texts)


# ------------------------------------------------------------------------------- tracebacks left
EVAL_DRIVER = """
import os, signal, sys, time
sys.path.insert(0, {repo!r})
import yolo.cli.eval as eval_cli

def interrupted(*args, **kwargs):  # Ctrl-C in the middle of the evaluation: a real SIGINT to this process
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)

eval_cli.evaluate_model = interrupted
eval_cli.cli(sys.argv[1:])
"""


def test_ctrl_c_during_eval_is_one_line_and_leaves_no_empty_run_folder(tiny, train_setup):
    runs = train_setup / "runs"
    proc = subprocess.run([sys.executable, "-c", EVAL_DRIVER.format(repo=str(REPO)), "--weights", str(tiny[1]),
                           "--data", str(train_setup / "data.yaml"), "--device", "cpu", "--workers", "0",
                           "--project", str(runs), "--no-progress"],
                          capture_output=True, text=True, timeout=120, cwd=train_setup)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == "interrupted (Ctrl-C): stopped", proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr[-2000:]
    assert not runs.exists() or not any(runs.rglob("*")), sorted(runs.rglob("*"))


def _png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width x height`` pixels, with one row of data."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * (1 + 3 * width)))
            + chunk(b"IEND", b""))


def test_detect_skips_a_png_claiming_60000x60000_pixels_and_goes_on(capsys, tiny, tmp_path):
    source = _noisy_images(tmp_path / "images", 2, side=64)
    (source / "huge.png").write_bytes(_png_claiming(60000, 60000))
    _detect(tiny, source, tmp_path / "runs")()
    out_dir = tmp_path / "runs" / "exp"
    captured = capsys.readouterr()
    assert f"warning: {source / 'huge.png'}: cannot decode the image: its header claims more pixels than OpenCV " \
           "decodes" in captured.err, captured.err
    assert "2 image(s)" in captured.out and "1 source(s) skipped" in captured.out
    assert sorted(p.name for p in out_dir.glob("*.jpg")) == ["img0.jpg", "img1.jpg"]


# ------------------------------------------------------------------------------- writes outside the folder
@pytest.mark.parametrize("name", ["../../../elsewhere", "a/b", "..", ".", "", "run\x1b[2J"])
def test_a_run_name_that_is_a_path_is_refused_by_every_tool(capsys, tiny, train_setup, name):
    from yolo.cli import eval as eval_cli, train as train_cli

    cfg, pt, _ = tiny
    output = train_setup / "out" / "D"
    source = _noisy_images(train_setup / "images", 1, side=64)
    runs = {
        "detect": lambda: _detect(tiny, source, output, "--name", name)(),
        "eval": lambda: eval_cli.cli(["--weights", str(pt), "--data", str(train_setup / "data.yaml"), "--device",
                                      "cpu", "--project", str(output), "--name", name, "--workers", "0"]),
        "train": lambda: train_cli.cli(["--cfg", str(cfg), "--data", str(train_setup / "data.yaml"), "--hyp",
                                        str(train_setup / "hyp.yaml"), "--epochs", "1", "--device", "cpu",
                                        "--project", str(output), "--name", name, "--no-progress"]),
    }
    def written():  # what is on disk but the label caches the dataset scans keep
        return sorted(str(p) for p in train_setup.parent.rglob("*") if not p.name.endswith(".cache.json"))

    from yolo.cli import demo
    runs["demo"] = lambda: demo.cli(["--name", name, "--device", "cpu"])
    before = written()
    for tool, run in runs.items():
        err = one_line_error(capsys, run)
        assert "a run name must be one folder name" in err and "\x1b" not in err, (tool, err)
    assert written() == before


HOLDING_DRIVER = """
import sys, time
sys.path.insert(0, {repo!r})
sys.path.insert(0, {tests!r})
from training_helpers import made_up_evaluation
from yolo.engine import Trainer

def hold(self):  # the run is open (its folder locked): say so, then train for a long time
    print("training", flush=True)
    time.sleep(120)

Trainer._train = hold
Trainer._evaluate = made_up_evaluation
from yolo.cli.train import cli
cli(sys.argv[1:])
"""


def test_two_resumes_of_one_run_at_once_the_second_refuses(capsys, train_setup, monkeypatch):
    import yolo.cli.train as train_cli
    from yolo.engine import TrainOptions, Trainer

    monkeypatch.setattr(Trainer, "_evaluate", made_up_evaluation)
    first = Trainer.from_options(TrainOptions(cfg=str(train_setup / "tiny.cfg"), data=str(train_setup / "data.yaml"),
                                              hyp=ONE_HEAD_HYP, epochs=1, device="cpu",
                                              project=str(train_setup / "runs"),
                                              name="run", progress=False, workers=0)).fit()
    last = first.run_dir / "last.pt"
    holder = subprocess.Popen([sys.executable, "-c", HOLDING_DRIVER.format(repo=str(REPO), tests=str(REPO / "tests")),
                               "--resume", str(last), "--epochs", "2", "--device", "cpu", "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=train_setup)
    try:
        assert holder.stdout.readline().strip() == "training", holder.stderr.read()[-2000:]
        err = one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args(
            ["--resume", str(last), "--epochs", "2", "--device", "cpu", "--no-progress"])))
        assert f"{first.run_dir}: another training is running in this run folder" in err, err
    finally:
        holder.kill()
        holder.communicate()
    # The lock goes with its process (even killed): the run resumes and finishes.
    result = Trainer.from_options(TrainOptions(resume=str(last), epochs=2, progress=False, workers=0)).fit()
    assert result.status == "finished" and result.epochs_done == 2


def test_a_label_line_with_terminal_escapes_is_printed_escaped_by_the_tools(tiny, train_setup):
    """tools/eval.py on a val split whose label file holds a line that would clear the screen and set the
    terminal title: the line is reported, escaped, and no escape character reaches the terminal."""
    label = train_setup / "data" / "labels" / "val" / "00000.txt"
    label.write_bytes(label.read_bytes() + b"\x1b[2J\x1b[H\x1b]0;owned\x07 0.5 0.5 0.1 0.1\n")
    proc = run_tool("eval", "--weights", tiny[1], "--data", train_setup / "data.yaml", "--device", "cpu",
                    "--workers", "0", "--no-progress", "--project", train_setup / "runs", "--no-plots",
                    timeout=120, cwd=train_setup, env={**os.environ, "YOLO_CACHE_DIR": str(train_setup / "cache")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\\x1b[2J\\x1b[H\\x1b]0;owned\\x07" in proc.stderr, proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr


def test_every_tool_turns_file_system_errors_and_ctrl_c_into_one_line(capsys):
    from yolo.cli.args import run_tool

    def raising(exc):
        def main(args):
            raise exc
        return lambda: run_tool(main, None)

    err = one_line_error(capsys, raising(OSError(errno.ENOSPC, "No space left on device", "runs/x/labels/a.txt")))
    assert err.startswith("error: runs/x/labels/a.txt: cannot write: the disk is full"), err
    err = one_line_error(capsys, raising(PermissionError(errno.EACCES, "Permission denied", "my.cfg")))
    assert err == "error: my.cfg: Permission denied", err
    with pytest.raises(SystemExit) as info:
        raising(KeyboardInterrupt())()
    assert info.value.code == 130 and capsys.readouterr().err == "interrupted (Ctrl-C): stopped\n"
    with pytest.raises(ZeroDivisionError):  # a bug stays a bug
        raising(ZeroDivisionError())()


def test_the_nan_check_of_weights_does_not_refuse_finite_values_whose_sum_overflows():
    from yolo.errors import WeightsError
    from yolo.models.weights import check_finite

    layers = [(0, [torch.empty(6)]), (3, [torch.empty(4)])]
    check_finite(torch.full((10,), 3e38), layers, "big.weights")  # the float32 sum is inf, every value finite
    values = torch.full((10,), 3e38)
    values[7] = float("-inf")
    with pytest.raises(WeightsError, match=r"^big.weights: layer 3 holds 1 NaN or infinite value\(s\) of 4"):
        check_finite(values, layers, "big.weights")
