"""Darknet's .data files: obj.data with train/valid lists and a .names file, as Darknet users bring them."""
import logging
import os

import numpy as np
import pytest
import yaml

from conftest import asset
from training_helpers import FAST, write_cfg
from yolo.cli import eval as eval_cli
from yolo.data import build_dataset, load_data_config
from yolo.errors import DataError


@pytest.fixture
def darknet_project(tmp_path, monkeypatch):
    """A Darknet-style project made from coco128, run from its root as Darknet is: ``data/obj.data``,
    ``data/train.txt`` and ``data/valid.txt`` (image paths relative to the working directory), ``data/obj.names``,
    the images under ``coco128/images/train2017`` with their labels in ``coco128/labels/train2017``."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    os.symlink(asset("coco128"), project / "coco128")
    images = sorted((project / "coco128" / "images" / "train2017").glob("*.jpg"))
    relative = [f"coco128/images/train2017/{p.name}" for p in images]
    (project / "data" / "train.txt").write_text("\n".join(relative[:16]) + "\n")
    (project / "data" / "valid.txt").write_text("\n".join(relative[16:24]) + "\n")
    (project / "data" / "obj.names").write_text(asset("cfg/coco.names").read_text())
    (project / "data" / "obj.data").write_text("classes= 80\ntrain  = data/train.txt\nvalid  = data/valid.txt\n"
                                               "names = data/obj.names\nbackup = backup/\n")
    monkeypatch.chdir(project)
    return project


def labels_by_hand(image_path, width, height):
    """The label file Darknet reads for an image (``images`` -> ``labels``, ``.jpg`` -> ``.txt``), as pixel xyxy."""
    label_file = str(image_path).replace("/images/", "/labels/").rsplit(".", 1)[0] + ".txt"
    rows = [[float(v) for v in line.split()] for line in open(label_file) if line.strip()]
    return [(int(c), (cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height)
            for c, cx, cy, w, h in rows]


def test_obj_data_reads_lists_names_and_labels(darknet_project, caplog):
    with caplog.at_level(logging.INFO, logger="yolo.data.darknet_data"):
        config = load_data_config("data/obj.data")
    assert "backup=backup/ ignored" in caplog.text and "run folder" in caplog.text
    assert config.names == asset("cfg/coco.names").read_text().split("\n")[:80] and config.num_classes == 80
    assert config.train == darknet_project / "data" / "train.txt"
    assert config.val == darknet_project / "data" / "valid.txt"

    for split, count in (("train", 16), ("val", 8)):
        dataset = build_dataset(config, split, img_size=320, augment=False)
        assert len(dataset) == count
        listed = (config.train if split == "train" else config.val).read_text().split()
        assert [os.path.basename(r.path) for r in dataset.records] == [os.path.basename(p) for p in listed]
        for record in dataset.records:
            expected = labels_by_hand(record.path, record.width, record.height)
            assert record.labels.tolist() == [c for c, *_ in expected]
            np.testing.assert_allclose(record.boxes, np.array([b for _, *b in expected]).reshape(-1, 4), atol=1e-3)

    # valid= missing: Darknet validates on the train list
    (darknet_project / "data" / "train-only.data").write_text("train=data/train.txt\nnames=data/obj.names\n")
    assert load_data_config("data/train-only.data").val == config.train


@pytest.mark.slow
def test_eval_takes_a_data_file_and_measures_what_the_yaml_does(darknet_project, tmp_path):
    (darknet_project / "same.yaml").write_text(yaml.safe_dump({"path": ".", "train": "data/train.txt",
                                                               "val": "data/valid.txt", "names": "data/obj.names"}))
    common = ["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
              "--img-size", "320", "--device", "cpu", "--workers", "0", "--no-plots", "--no-progress", "--fast"]
    from_data = eval_cli.main(eval_cli.parse_args([*common, "--data", "data/obj.data", "--save-dir", "a"]))
    from_yaml = eval_cli.main(eval_cli.parse_args([*common, "--data", "same.yaml", "--save-dir", "b"]))
    assert from_data["num_images"] == 8 and from_data["mAP50"] > 0.1
    assert (from_data["mAP50"], from_data["mAP50_95"]) == (from_yaml["mAP50"], from_yaml["mAP50_95"])


@pytest.mark.parametrize("text, line, message", [
    ("classes=80\ntrain data/train.txt\nnames=data/obj.names\n", 2, "expected key=value"),
    ("classes=3\ntrain=data/train.txt\nnames=data/obj.names\n", 1, "classes=3 but"),
    ("classes=eighty\ntrain=data/train.txt\nnames=data/obj.names\n", 1, "is not an integer"),
    ("train=data/missing.txt\nnames=data/obj.names\n", 1, "train=data/missing.txt: not found"),
    ("# comment\n\ntrain=data/train.txt\nvalid=data/train.txt\n", None, "missing 'names='"),
])
def test_bad_data_files_name_the_file_and_line(darknet_project, text, line, message):
    path = darknet_project / "data" / "bad.data"
    path.write_text(text)
    with pytest.raises(DataError, match=message) as info:
        load_data_config(path)
    assert str(path) in str(info.value)
    if line is not None:
        assert f"bad.data:{line}" in str(info.value)


@pytest.mark.slow
def test_training_takes_a_data_file(darknet_project, tmp_path, monkeypatch):
    """One update of a tiny cfg (its heads set to 80 classes) on obj.data; the run folder's data.yaml is the same
    dataset as a YAML that any tool reads back."""
    from yolo.engine import TrainOptions, Trainer

    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    options = TrainOptions(cfg=str(write_cfg(tmp_path)), data="data/obj.data", device="cpu", project=str(tmp_path),
                           name="obj", progress=False, img_size=64, epochs=1, adapt_classes=True,
                           hyp={**FAST, "batch": 8, "subdivisions": 1, "max_steps_per_epoch": 1, "burn_in": 0})
    result = Trainer.from_options(options).fit()
    assert result.status == "finished" and result.global_step == 1
    copy = load_data_config(result.run_dir / "data.yaml")
    original = load_data_config(darknet_project / "data" / "obj.data")
    assert (copy.train, copy.val, copy.names) == (original.train, original.val, original.names)


def small_darknet_layout(project):
    """``project/data/{obj.data,train.txt,valid.txt,obj.names}`` over two images (no labels needed to read it)."""
    (project / "data").mkdir(parents=True)
    for name in ("a.jpg", "b.jpg"):
        (project / "images").mkdir(exist_ok=True)
        (project / "images" / name).write_bytes(b"")
    (project / "data" / "train.txt").write_text("images/a.jpg\n")
    (project / "data" / "valid.txt").write_text("images/b.jpg\n")
    (project / "data" / "obj.names").write_text("thing\n")
    data = project / "data" / "obj.data"
    data.write_text("classes=1\ntrain=data/train.txt\nvalid=data/valid.txt\nnames=data/obj.names\nbackup=backup/\n")
    return data


def test_data_paths_are_also_found_from_the_folder_above_the_data_file(tmp_path, monkeypatch):
    """Darknet runs from the folder holding data/; from anywhere else, data/train.txt is found there too."""
    data = small_darknet_layout(tmp_path / "project")
    monkeypatch.chdir(tmp_path)  # not the project: Darknet itself would not find data/train.txt from here
    config = load_data_config(data)
    assert config.train == tmp_path / "project" / "data" / "train.txt"
    assert config.val == tmp_path / "project" / "data" / "valid.txt"
    assert config.names == ["thing"]


def test_evaluation_needs_no_train_and_says_nothing_of_backup(tmp_path, monkeypatch, caplog):
    data = small_darknet_layout(tmp_path / "project")
    data.write_text("classes=1\nvalid=data/valid.txt\nnames=data/obj.names\nbackup=backup/\n")
    monkeypatch.chdir(tmp_path / "project")
    with caplog.at_level(logging.INFO, logger="yolo.data.darknet_data"):
        config = load_data_config(data, training=False)
    assert config.val == tmp_path / "project" / "data" / "valid.txt" and "backup" not in caplog.text
    with pytest.raises(DataError, match="missing 'train='"):
        load_data_config(data)
    data.write_text("classes=1\nnames=data/obj.names\n")
    with pytest.raises(DataError, match="missing 'valid='"):
        load_data_config(data, training=False)


def test_eval_tool_reads_a_data_file_without_train(tmp_path, monkeypatch):
    """tools/eval.py on a .data with valid= only (a shapes dataset and a one-head model, no assets needed)."""
    from training_helpers import write_one_head_model, write_one_head_training

    folder = write_one_head_training(tmp_path)
    cfg, _, weights = write_one_head_model(tmp_path)
    images = sorted((folder / "data" / "images" / "val").glob("*"))
    (tmp_path / "valid.txt").write_text("".join(f"{p}\n" for p in images))
    (tmp_path / "shapes.names").write_text("\n".join(yaml.safe_load((folder / "data.yaml").read_text())["names"]))
    data = tmp_path / "shapes.data"
    data.write_text(f"classes=5\nvalid={tmp_path / 'valid.txt'}\nnames={tmp_path / 'shapes.names'}\nbackup=b/\n")
    metrics = eval_cli.main(eval_cli.parse_args(["--cfg", str(cfg), "--weights", str(weights), "--data", str(data),
                                                 "--device", "cpu", "--workers", "0", "--no-plots", "--fast",
                                                 "--save-dir", str(tmp_path / "run")]))
    assert metrics["num_images"] == len(images) == 2


def darknet_folder_layout(darknet):
    """Darknet's own example layout under ``darknet``: ``data/obj/*.jpg`` with their labels beside them,
    ``data/train.txt`` listing ``data/obj/NAME.jpg`` (relative to the Darknet folder, as Darknet's docs write it),
    ``data/obj.names`` and ``data/obj.data``."""
    import cv2

    (darknet / "data" / "obj").mkdir(parents=True)
    lines = []
    for i in range(3):
        image = np.full((48, 64, 3), 40 * i, np.uint8)
        cv2.imwrite(str(darknet / "data" / "obj" / f"{i:012d}.jpg"), image)
        (darknet / "data" / "obj" / f"{i:012d}.txt").write_text("0 0.5 0.5 0.25 0.5\n")
        lines.append(f"data/obj/{i:012d}.jpg")
    (darknet / "data" / "train.txt").write_text("\n".join(lines) + "\n")
    (darknet / "data" / "obj.names").write_text("thing\n")
    data = darknet / "data" / "obj.data"
    data.write_text("classes=1\ntrain=data/train.txt\nvalid=data/train.txt\nnames=data/obj.names\n")
    return data


def test_list_entries_relative_to_the_darknet_folder_are_found_from_anywhere(tmp_path, monkeypatch, caplog):
    """``data/train.txt`` listing ``data/obj/x.jpg``: Darknet finds the images only when run from its folder; here
    they are found from any working directory too (the folder above the list), and the log says from where."""
    data = darknet_folder_layout(tmp_path / "darknet")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_data_config(data)
    with caplog.at_level(logging.INFO, logger="yolo.data"):
        dataset = build_dataset(config, "train", img_size=64, augment=False, cache=False)
    assert [os.path.basename(r.path) for r in dataset.records] == [f"{i:012d}.jpg" for i in range(3)]
    for record in dataset.records:
        assert record.labels.tolist() == [0]
        np.testing.assert_allclose(record.boxes, [[24, 12, 40, 36]], atol=1e-4)
    assert f"relative entries read from {tmp_path / 'darknet'} (3 of 3)" in caplog.text
    # From the Darknet folder, as Darknet runs: the entries are read as written, and no base is named.
    monkeypatch.chdir(tmp_path / "darknet")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="yolo.data"):
        assert len(build_dataset(load_data_config("data/obj.data"), "train", img_size=64, cache=False)) == 3
    assert "relative entries read from" not in caplog.text


def test_list_entries_found_nowhere_say_where_they_were_looked_up(tmp_path, monkeypatch):
    data = darknet_folder_layout(tmp_path / "darknet")
    (tmp_path / "darknet" / "data" / "train.txt").write_text("data/elsewhere/x.jpg\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as error:
        build_dataset(load_data_config(data), "train", img_size=64, cache=False)
    assert "looked up from" in str(error.value) and str(tmp_path / "darknet") in str(error.value)
