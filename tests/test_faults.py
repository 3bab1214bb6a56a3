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

from test_kill_resume import CFG as TINY_CFG
from test_robustness import one_line_error
from yolo.data import SHAPE_NAMES
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.models.model import Darknet

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny(tmp_path):
    """The tiny one-head cfg (5 classes), its .pt checkpoint and its Darknet .weights, random weights."""
    torch.manual_seed(0)
    cfg = tmp_path / "tiny.cfg"
    cfg.write_text(TINY_CFG)
    model = Darknet(cfg)
    pt = tmp_path / "tiny.pt"
    save_checkpoint(model_checkpoint(model, names=list(SHAPE_NAMES)), pt)
    weights = tmp_path / "tiny.weights"
    model.save_darknet_weights(weights)
    return cfg, pt, weights


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
    assert cfg.read_text() == TINY_CFG


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
    assert cfg.read_text() == TINY_CFG


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
    """8 tiny shapes images, the tiny cfg and the test hyperparameters of test_kill_resume."""
    import yaml
    from test_kill_resume import HYP
    from yolo.data import ensure_shapes_dataset

    root = ensure_shapes_dataset(tmp_path / "data", num_train=8, num_val=2, seed=3, size_range=(64, 80),
                                 max_shapes=2)
    (tmp_path / "data.yaml").write_text(yaml.safe_dump({"path": str(root), "train": "images/train",
                                                        "val": "images/val", "names": list(SHAPE_NAMES)}))
    (tmp_path / "tiny.cfg").write_text(TINY_CFG)
    (tmp_path / "hyp.yaml").write_text(yaml.safe_dump(HYP))
    return tmp_path


def test_a_failing_report_hook_logs_one_warning_and_the_run_goes_on(train_setup, monkeypatch, caplog):
    import yolo.engine.hooks.writers as writers
    from test_kill_resume import HYP, made_up_evaluation
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.checkpoint import load_checkpoint_file

    def broken(*args, **kwargs):
        raise OverflowError("Python int too large to convert to C int")

    monkeypatch.setattr(writers, "sample_predictions", broken)
    monkeypatch.setattr(Trainer, "_evaluate", made_up_evaluation)
    options = TrainOptions(cfg=str(train_setup / "tiny.cfg"), data=str(train_setup / "data.yaml"),
                           hyp={**HYP, "tensorboard": True, "tb_images": 2}, epochs=3, device="cpu",
                           project=str(train_setup / "runs"), name="run", progress=False, workers=0)
    with caplog.at_level("DEBUG"):
        result = Trainer(options).fit()
    assert result.status == "finished" and result.epochs_done == 3
    assert load_checkpoint_file(result.last)["train"]["epoch"] == 3
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "TensorBoard writer failed" in r.message]
    assert len(warnings) == 1 and "OverflowError" in warnings[0].message and "goes on" in warnings[0].message
