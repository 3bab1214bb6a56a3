"""Detection and evaluation pre-process as the cfg says, as Darknet's ``detector test``/``detector map`` do
(src/detector.c: ``letterbox_image`` when ``[net]`` sets ``letter_box=1``, else ``resize_image``, a stretch);
an explicit mode (``resize=`` / ``--resize``) overrides the cfg."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from yolo.inference.detector import Detector

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cfgs(assets, tmp_path):
    """yolov3-tiny.cfg as shipped (no letter_box) and a copy with letter_box=1, with the real weights."""
    plain = assets("cfg/yolov3-tiny.cfg")
    boxed = tmp_path / "yolov3-tiny-letterbox.cfg"
    boxed.write_text(plain.read_text().replace("[net]", "[net]\nletter_box=1", 1))
    return plain, boxed, assets("weights/yolov3-tiny.weights")


@pytest.mark.slow
def test_detector_follows_the_cfg(cfgs, assets):
    plain, boxed, weights = cfgs
    image = cv2.imread(str(assets("images/dog.jpg")))  # 768x576: the two modes differ
    default_plain = Detector(plain, weights, device="cpu", img_size=128, fast=False, conf_thres=0.1)
    default_boxed = Detector(boxed, weights, device="cpu", img_size=128, fast=False, conf_thres=0.1)
    assert (default_plain.resize, default_boxed.resize) == ("stretch", "letterbox")
    # an explicit mode overrides the cfg: the other cfg with it detects as the default above
    for default, other, mode in ((default_plain, boxed, "stretch"), (default_boxed, plain, "letterbox")):
        explicit = Detector(other, weights, device="cpu", img_size=128, fast=False, conf_thres=0.1, resize=mode)
        assert explicit.resize == mode
        a, b = default(image)[0], explicit(image)[0]
        assert len(a["boxes"]) and np.array_equal(a["boxes"].numpy(), b["boxes"].numpy())
    stretched, boxed_out = default_plain(image)[0]["boxes"], default_boxed(image)[0]["boxes"]
    assert stretched.shape != boxed_out.shape or not np.allclose(stretched.numpy(), boxed_out.numpy())


def _eval_tool():
    from yolo.cli import eval as tool

    return tool


@pytest.mark.slow
@pytest.mark.parametrize("which,extra,expected", [("plain", [], "stretch"), ("boxed", [], "letterbox"),
                                                  ("boxed", ["--resize", "stretch"], "stretch")])
def test_eval_tool_follows_the_cfg(cfgs, assets, tmp_path, which, extra, expected):
    plain, boxed, weights = cfgs
    files = sorted(assets("coco128/images/train2017").glob("*.jpg"))[:2]
    (tmp_path / "val.txt").write_text("".join(f"{p}\n" for p in files))
    names = [n.strip() for n in assets("cfg/coco.names").read_text().splitlines() if n.strip()]
    data = tmp_path / "data.yaml"
    data.write_text(json.dumps({"path": str(assets("coco128")), "train": str(tmp_path / "val.txt"),
                                "val": str(tmp_path / "val.txt"), "names": names}))
    tool = _eval_tool()
    argv = ["--cfg", str(plain if which == "plain" else boxed), "--weights", str(weights), "--data", str(data),
            "--img-size", "64", "--device", "cpu", "--workers", "0", "--fast", "--no-plots", "--no-progress",
            "--save-dir", str(tmp_path / "run"), *extra]
    with contextlib.redirect_stdout(io.StringIO()):
        metrics = tool.main(tool.parse_args(argv))
    saved = json.loads((Path(metrics["save_dir"]) / "metrics.json").read_text())
    assert saved["settings"]["resize"] == expected
