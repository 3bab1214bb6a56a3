"""What the README's steps make and name: every file a command names is there or made by an earlier step, and
``git status`` stays clean after them (.gitignore)."""

import re
import subprocess
from pathlib import Path

import pytest

from helpers import run_download_script

REPO = Path(__file__).resolve().parents[1]


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
    downloaded = {f"weights/{p.name}" for p in run_download_script(tmp_path, "yolov3-tiny").iterdir()}
    made = set().union(*(made_by(argv) for argv in commands))
    for argv in commands:
        for flag, value in zip(argv, argv[1:]):
            if flag not in INPUT_FLAGS or value in USERS_OWN:
                continue
            assert (REPO / value).exists() or value in downloaded | made, f"{' '.join(argv)}: {value} comes from nowhere"
            if value.endswith(".yaml") and (REPO / value).exists():
                assert "YOLO_ASSETS" not in (REPO / value).read_text(), f"{' '.join(argv)}: {value} needs YOLO_ASSETS"
