"""The weights download script: each model's weights and cfg and the COCO names, the README's first model by
default, and the names its README and its error list give."""

import re
from pathlib import Path

from helpers import run_download_script

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ weights/download.sh
DOWNLOADABLE = ["yolov3-tiny", "yolov3", "yolov3-spp", "yolov4", "yolov4-tiny", "darknet53"]


def test_download_script_fetches_each_models_weights_cfg_and_the_coco_names(tmp_path):
    folder = run_download_script(tmp_path, *DOWNLOADABLE)
    fetched = {p.name: p.read_text().strip() for p in folder.iterdir() if p.name != "download.sh"}
    expected = {"coco.names", "darknet53.conv.74"} | {f"{n}.{ext}" for n in DOWNLOADABLE if n != "darknet53"
                                                      for ext in ("weights", "cfg")}
    assert set(fetched) == expected
    for name, url in fetched.items():
        assert url.startswith("https://") and url.rsplit("/", 1)[1] == name, (name, url)
    assert fetched["coco.names"].endswith("/data/coco.names")
    assert not list(folder.glob("*.part"))


def test_download_script_default_is_the_readmes_first_model(tmp_path):
    folder = run_download_script(tmp_path)
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
