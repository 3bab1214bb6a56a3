"""The Darknet pair an export writes (yolo.export.darknet): at the size it was checked at, and checked by our loader
alone where OpenCV DNN has no layer for the head ([Gaussian_yolo])."""

import pytest

from cfg_snippets import GAUSSIAN_CFG, ONE_HEAD_CFG
from helpers import model_files, run_export_cli
from yolo.export.darknet import cfg_at_size
from yolo.models.model import Darknet


def test_a_gaussian_cfg_exports_to_darknet_checked_by_our_loader(tmp_path, capsys):
    cfg, weights = model_files(tmp_path, GAUSSIAN_CFG, "gauss")
    out = tmp_path / "out" / "gauss.weights"
    run_export_cli(["--cfg", cfg, "--weights", weights, "--format", "darknet", "--output", out])
    printed = capsys.readouterr().out
    assert "verified in our loader (bit-exact read-back; OpenCV has no [Gaussian_yolo]) on inputs" in printed
    assert out.read_bytes() == weights.read_bytes() and out.with_suffix(".cfg").read_text() == GAUSSIAN_CFG


@pytest.mark.slow
def test_the_darknet_cfg_is_written_at_the_size_the_export_was_checked_at(tmp_path, capsys):
    cfg, weights = model_files(tmp_path, ONE_HEAD_CFG, "tiny")
    out = tmp_path / "out" / "tiny.weights"
    run_export_cli(["--cfg", cfg, "--weights", weights, "--format", "darknet", "--img-size", "64", "96",
                    "--output", out])
    assert "verified in OpenCV DNN on inputs 1x3x64x96" in capsys.readouterr().out
    written = out.with_suffix(".cfg").read_text()
    assert written == ONE_HEAD_CFG.replace("width=64\nheight=64", "width=96\nheight=64")
    assert Darknet(out.with_suffix(".cfg")).input_size == (64, 96)


def test_a_cfg_that_would_be_written_over_keeps_its_size_or_the_export_stops(tmp_path, capsys):
    """--output beside --cfg with the same name: the cfg is not rewritten, so another size is refused."""
    cfg, weights = model_files(tmp_path, ONE_HEAD_CFG, "tiny")
    source = tmp_path / "w.weights"
    weights.rename(source)
    with pytest.raises(SystemExit) as stop:
        run_export_cli(["--cfg", cfg, "--weights", source, "--format", "darknet", "--img-size", "64", "96",
                        "--output", tmp_path / "tiny.weights"])
    assert stop.value.code == 1
    assert capsys.readouterr().err.strip() == (
        f"error: {cfg}: the written cfg would be --cfg itself, which stays at its 64x64; give another --output "
        "to write the cfg at 64x96")
    assert cfg.read_text() == ONE_HEAD_CFG and not (tmp_path / "tiny.weights").exists()


def test_cfg_at_size_sets_only_the_net_sections_size():
    text = "# a comment\n[net]\n# the size\nwidth = 416\nchannels=3\n\n[convolutional]\nwidth=5\n"
    assert cfg_at_size(text, (64, 96)) == (
        "# a comment\n[net]\nheight=64\n# the size\nwidth=96\nchannels=3\n\n[convolutional]\nwidth=5\n")
