"""What a new user meets in the first hour, beside the big features: the drawings' labels, the tools' messages,
the files a run records, what ``git status`` shows after the README's steps."""
import logging
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from helpers import run_export_cli

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------- drawings
def test_labels_of_boxes_sharing_a_corner_do_not_cover_each_other():
    """Two boxes with the same top-left corner: each label's background keeps its class colour in the drawing
    (before, the stronger label was drawn over the weaker one)."""
    from yolo.visualize import class_color, draw_detections, label_places

    image = np.zeros((240, 320, 3), np.uint8)
    boxes = torch.tensor([[60.0, 80.0, 200.0, 220.0], [60.0, 80.0, 160.0, 180.0]])
    scores, labels = torch.tensor([0.9, 0.6]), torch.tensor([0, 1])
    drawn = draw_detections(image, boxes, scores, labels, ["person", "dog"], line_width=2)
    # where the labels went, by the drawing's own rule; checked against the pixels below
    font_scale, thickness = 2 / 3, 1
    import cv2
    sizes = []
    for text in ("person 0.90", "dog 0.60"):
        (tw, th), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, thickness)
        sizes.append((tw + 3, th + baseline + 3))
    places = label_places(boxes.tolist(), sizes, image.shape[:2])
    rects = [(left, top, w, h) for (left, top), (w, h) in zip(places, sizes)]
    (l0, t0, w0, h0), (l1, t1, w1, h1) = rects
    assert l0 + w0 <= l1 or l1 + w1 <= l0 or t0 + h0 <= t1 or t1 + h1 <= t0, rects
    for (left, top, w, h), label in zip(rects, (0, 1)):
        patch = drawn[top:top + h, left:left + w].reshape(-1, 3)
        share = (patch == np.array(class_color(label), np.uint8)).all(1).mean()
        assert share > 0.5, f"label {label}'s background is mostly covered ({share:.0%} of its colour left)"


def test_a_lone_label_sits_on_its_box_as_before():
    from yolo.visualize import label_places

    assert label_places([[50, 40, 90, 90]], [(30, 12)], (100, 100)) == [(50, 29)]  # bottom row on the edge y=40
    assert label_places([[50, 5, 90, 90]], [(30, 12)], (100, 100)) == [(50, 5)]  # no room above: inside
    assert label_places([[90, 40, 99, 90]], [(30, 12)], (100, 100)) == [(71, 29)]  # kept inside the image


# ------------------------------------------------------------------------------------------ run records
def test_opt_yaml_records_no_hyp_as_null(tmp_path):
    from yolo.engine.run_folder import options_record, write_yaml

    for given, recorded in ((None, None), ("hyp.yaml", "hyp.yaml"), ({"lr0": 0.01}, "inline")):
        write_yaml(tmp_path / "opt.yaml", options_record({"epochs": 3, "hyp": given}))
        assert yaml.safe_load((tmp_path / "opt.yaml").read_text())["hyp"] == recorded


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


# -------------------------------------------------------------------------------------------- git status
@pytest.mark.parametrize("made_by_the_readme", ["weights/yolov3-tiny.weights", "weights/yolov3-tiny.cfg",
                                               "weights/coco.names", "weights/yolov4-tiny.conv.29",
                                               "yolov4-tiny.conv.29", "runs/train/exp/last.pt"])
def test_gitignore_covers_the_files_the_readme_makes(made_by_the_readme):
    if subprocess.run(["git", "-C", str(REPO), "rev-parse"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", "-q", made_by_the_readme])
    assert done.returncode == 0, f"{made_by_the_readme} is not ignored by .gitignore"


# ------------------------------------------------------------------------------------ weights/download.sh
# Stands in for curl: ``curl ... -o FILE URL`` writes URL into FILE, so a run shows what went where, offline.
FAKE_CURL = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in -o) out="$2"; shift 2 ;; -*) shift ;; *) url="$1"; shift ;; esac
done
echo "$url" > "$out"
"""
DOWNLOADABLE = ["yolov3-tiny", "yolov3", "yolov3-spp", "yolov4", "yolov4-tiny", "darknet53"]


def _download(tmp_path: Path, *names: str) -> Path:
    """weights/download.sh NAMES in a copy of weights/, curl replaced by FAKE_CURL (no network); the folder."""
    import os
    import shutil

    folder = tmp_path / "weights"
    folder.mkdir()
    shutil.copy(REPO / "weights" / "download.sh", folder / "download.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(FAKE_CURL)
    (bin_dir / "curl").chmod(0o755)
    for tool in ("dirname", "mv", "sh"):  # no md5sum: the fake files are URLs, not the real weights
        os.symlink(shutil.which(tool), bin_dir / tool)
    done = subprocess.run([shutil.which("bash"), str(folder / "download.sh"), *names], capture_output=True,
                          text=True, env={"PATH": str(bin_dir)}, timeout=60)
    assert done.returncode == 0, done.stderr
    return folder


def test_download_script_fetches_each_models_weights_cfg_and_the_coco_names(tmp_path):
    folder = _download(tmp_path, *DOWNLOADABLE)
    fetched = {p.name: p.read_text().strip() for p in folder.iterdir() if p.name != "download.sh"}
    expected = {"coco.names", "darknet53.conv.74"} | {f"{n}.{ext}" for n in DOWNLOADABLE if n != "darknet53"
                                                      for ext in ("weights", "cfg")}
    assert set(fetched) == expected
    for name, url in fetched.items():
        assert url.startswith("https://") and url.rsplit("/", 1)[1] == name, (name, url)
    assert fetched["coco.names"].endswith("/data/coco.names")
    assert not list(folder.glob("*.part"))


def test_download_script_default_is_the_readmes_first_model(tmp_path):
    folder = _download(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["coco.names", "download.sh", "yolov3-tiny.cfg",
                                                         "yolov3-tiny.weights"]


def test_download_script_names_are_the_ones_its_readme_and_error_list():
    script = (REPO / "weights" / "download.sh").read_text()
    cases = [n for line in script.splitlines() if re.fullmatch(r"\s+[\w|-]+\)", line)
             for n in line.strip()[:-1].split("|")]
    assert sorted(cases) == sorted(DOWNLOADABLE)
    known = script.split("(known: ", 1)[1].split(")", 1)[0].split()
    assert sorted(known) == sorted(DOWNLOADABLE)
    readme = (REPO / "weights" / "README.md").read_text()
    assert sorted(readme.split("# any of: ", 1)[1].split("\n", 1)[0].split()) == sorted(DOWNLOADABLE)


# ------------------------------------------------------------------------------------- the README's steps
# The user's own files in the README's examples: nothing the project can provide.
USERS_OWN = {"image.jpg", "images/", "my.yaml", "obj.data", "video.mp4"}  # files only the user has
INPUT_FLAGS = ("--cfg", "--weights", "--data", "--hyp", "--source", "--resume")


def readme_commands() -> list:
    """Each ``python tools/...`` command of the README's bash blocks, continuation lines joined, as argv lists."""
    import shlex

    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    joined = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(line, comments=True) for line in joined if line.strip().startswith("python tools/")]


def made_by(argv) -> set:
    """The files a README command leaves for a later one: a training run's checkpoints, convert's and export's
    --output."""
    tool = Path(argv[1]).stem
    if tool == "train" and "--resume" not in argv:
        return {"runs/train/exp/last.pt", "runs/train/exp/best.pt"}
    if tool in ("convert", "export") and "--output" in argv:
        return {argv[argv.index("--output") + 1]}
    return set()


def test_readme_commands_name_files_that_are_there_or_that_a_step_makes(tmp_path):
    """Every file a README command reads is in the repository, fetched by ``bash weights/download.sh
    yolov3-tiny`` (the README's download step), made by another README command, or the user's own; a dataset YAML
    it names works in a fresh clone (none reads $YOLO_ASSETS)."""
    commands = readme_commands()
    assert len(commands) >= 8
    downloaded = {f"weights/{p.name}" for p in _download(tmp_path, "yolov3-tiny").iterdir()}
    made = set().union(*(made_by(argv) for argv in commands))
    for argv in commands:
        for flag, value in zip(argv, argv[1:]):
            if flag not in INPUT_FLAGS or value in USERS_OWN:
                continue
            assert (REPO / value).exists() or value in downloaded | made, f"{' '.join(argv)}: {value} comes from nowhere"
            if value.endswith(".yaml") and (REPO / value).exists():
                assert "YOLO_ASSETS" not in (REPO / value).read_text(), f"{' '.join(argv)}: {value} needs YOLO_ASSETS"
