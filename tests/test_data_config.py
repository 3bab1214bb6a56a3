"""Dataset YAML configs: env expansion, relative paths, names, errors that name the file."""
import os
from pathlib import Path

import pytest

from conftest import asset
from yolo.data import load_data_config
from yolo.errors import DataError

REPO = Path(__file__).resolve().parents[1]


def _layout(root: Path) -> None:
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_env_expansion_and_relative_split_paths(tmp_path, monkeypatch):
    _layout(tmp_path / "data" / "ds")
    monkeypatch.setenv("MY_DATA_ROOT", str(tmp_path / "data"))
    cfg = load_data_config(_write(tmp_path / "cfgs" / "ds.yaml",
                                  "path: ${MY_DATA_ROOT}/ds\ntrain: images/train\nval: images/val\nnames: [a, b]\n"))
    assert cfg.root == (tmp_path / "data" / "ds").resolve()
    assert cfg.train == cfg.root / "images" / "train"
    assert cfg.val == cfg.root / "images" / "val"
    assert cfg.names == ["a", "b"] and cfg.num_classes == 2


def test_relative_root_resolves_against_yaml_folder_not_cwd(tmp_path, monkeypatch):
    _layout(tmp_path / "datasets" / "ds")
    yaml_path = _write(tmp_path / "configs" / "ds.yaml",
                       "path: ../datasets/ds\ntrain: images/train\nval: images/val\nnames: [a]\n")
    monkeypatch.chdir(REPO)  # somewhere else entirely
    cfg = load_data_config(yaml_path)
    assert cfg.root == (tmp_path / "datasets" / "ds").resolve()


def test_env_default_and_missing_variable(tmp_path, monkeypatch):
    _layout(tmp_path / "ds")
    monkeypatch.delenv("UNSET_DATA_VAR", raising=False)
    text = "path: ${UNSET_DATA_VAR:-%s}\ntrain: images/train\nval: images/val\nnames: [a]\n" % (tmp_path / "ds")
    assert load_data_config(_write(tmp_path / "ok.yaml", text)).root == (tmp_path / "ds").resolve()

    bad = _write(tmp_path / "bad.yaml", "path: ${UNSET_DATA_VAR}/ds\ntrain: images/train\nval: images/val\nnames: [a]\n")
    with pytest.raises(DataError, match="UNSET_DATA_VAR") as err:
        load_data_config(bad)
    assert "bad.yaml" in str(err.value)


def test_names_from_names_file_and_mapping(tmp_path):
    _layout(tmp_path)
    _write(tmp_path / "my.names", "cat\ndog\nbird\n\n")  # a blank line at the end is no class
    cfg = load_data_config(_write(tmp_path / "a.yaml", "train: images/train\nval: images/val\nnames: my.names\n"))
    assert cfg.names == ["cat", "dog", "bird"] and cfg.root == tmp_path.resolve()
    cfg = load_data_config(_write(tmp_path / "b.yaml", "train: images/train\nval: images/val\nnames: {1: dog, 0: cat}\n"))
    assert cfg.names == ["cat", "dog"]


@pytest.mark.parametrize("text, message", [
    ("train: images/train\nval: images/val\nnames: [a, b]\nnc: 3\n", "class count mismatch"),
    ("train: images/train\nval: images/val\n", "names"),
    ("val: images/val\nnames: [a]\n", "'train'"),
    ("train: images/nowhere\nval: images/val\nnames: [a]\n", "does not exist"),
    ("train: images/train\nval: images/val\nnames: [a, a]\n", "duplicate"),
    ("train: images/train\nval: images/val\nnames: missing.names\n", "not found"),
    ("train: [images/train\n", "not valid YAML"),
])
def test_errors_name_the_yaml_file(tmp_path, text, message):
    _layout(tmp_path)
    path = _write(tmp_path / "broken.yaml", text)
    with pytest.raises(DataError, match=message) as err:
        load_data_config(path)
    assert str(path) in str(err.value)


def test_coco128_yaml_points_at_assets_with_coco_names():
    root = asset("coco128")
    cfg = load_data_config(REPO / "configs" / "coco128.yaml")
    assert cfg.root == root.resolve()
    assert cfg.train == cfg.val == root.resolve() / "images" / "train2017"
    reference = [line.strip() for line in asset("cfg/coco.names").read_text().splitlines() if line.strip()]
    assert cfg.names == reference and cfg.num_classes == 80


def test_a_dataset_path_under_a_file_names_the_variable_that_must_be_a_folder(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("YOLO_DATASETS", str(tmp_path / "a-file"))
    with pytest.raises(DataError) as info:
        load_data_config(REPO / "configs" / "shapes.yaml")
    assert str(info.value) == (f"{REPO / 'configs' / 'shapes.yaml'}:4: 'path: ${{YOLO_DATASETS:-../datasets}}/shapes' "
                               f"is {tmp_path / 'a-file' / 'shapes'}, but {tmp_path / 'a-file'} is a file, not a "
                               "folder; YOLO_DATASETS must name a folder")


def test_shapes_yaml_without_generating(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO_DATASETS", str(tmp_path))
    cfg = load_data_config(REPO / "configs" / "shapes.yaml", prepare=False)
    assert cfg.root == (tmp_path / "shapes").resolve()
    assert cfg.generate["name"] == "shapes"
    assert not (tmp_path / "shapes").exists()
    monkeypatch.delenv("YOLO_DATASETS")
    cfg = load_data_config(REPO / "configs" / "shapes.yaml", prepare=False)
    assert cfg.root == REPO / "datasets" / "shapes"  # git-ignored folder of the repository


def test_roboflow_parent_paths_fall_back_to_the_folders_beside_the_yaml(tmp_path):
    """Roboflow's export: data.yaml in the dataset folder beside train/ valid/, its paths written from one folder
    down (``../train/images``); read as ultralytics does, from the YAML's own folder when ``../`` leads nowhere."""
    root = tmp_path / "export"
    for split in ("train", "valid"):
        (root / split / "images").mkdir(parents=True)
        (root / split / "labels").mkdir(parents=True)
    # as Roboflow writes it, with its roboflow: block (where the export came from), which is ignored
    cfg = load_data_config(_write(root / "data.yaml", "train: ../train/images\nval: ../valid/images\n"
                                                      "test: ../test/images\n\nnc: 2\nnames: ['a', 'b']\n\n"
                                                      "roboflow:\n  workspace: me\n  project: things\n  version: 3\n"
                                                      "  license: CC BY 4.0\n"
                                                      "  url: https://universe.roboflow.com/me/things/dataset/3\n"))
    assert cfg.train == (root / "train" / "images").resolve() and cfg.val == (root / "valid" / "images").resolve()
    # where ../ does lead somewhere, it is read as written
    (tmp_path / "valid" / "images").mkdir(parents=True)
    assert load_data_config(root / "data.yaml").val == (tmp_path / "valid" / "images").resolve()


def test_a_parent_path_that_leads_nowhere_either_way_names_the_written_one(tmp_path):
    path = _write(tmp_path / "ds" / "data.yaml", "train: ../nowhere/images\nval: ../nowhere/images\nnames: [a]\n")
    with pytest.raises(DataError, match="'train'") as info:
        load_data_config(path)
    assert str(tmp_path / "nowhere" / "images") in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse"])
@pytest.mark.parametrize("config", ["yaml", "data"])
def test_a_names_or_data_file_that_is_no_regular_file_or_too_large_is_one_line_unread(tmp_path, kind, config):
    images = tmp_path / "images" / "train"
    images.mkdir(parents=True)
    odd = tmp_path / ("odd.data" if config == "data" and kind == "sparse" else "odd.names")
    if kind == "fifo":
        os.mkfifo(odd)  # reading it would wait for a writer forever
    elif kind == "dev-zero":
        odd.symlink_to("/dev/zero")  # reading it would never end
    else:
        with open(odd, "wb") as f:  # sparse: 3 GB of zeros, a MemoryError read whole
            f.truncate(3 << 30)
    if config == "yaml":
        path = tmp_path / "data.yaml"
        path.write_text(f"path: {tmp_path}\ntrain: images/train\nval: images/train\nnames: {odd}\n")
    elif odd.suffix == ".data":
        path = odd
    else:
        path = tmp_path / "obj.data"
        path.write_text(f"classes=1\ntrain={images}\nnames={odd}\n")
    with pytest.raises(DataError) as info:
        load_data_config(path)
    message = str(info.value)
    assert "\n" not in message and str(odd) in message
    assert ("more than the 16,777,216" in message if kind == "sparse" else
            "not a regular file" in message or "is not a file" in message), message
