"""The built-in shapes dataset: exact labels, deterministic files, safe generation."""
import filecmp

import cv2
import numpy as np
import pytest

from yolo.data import SHAPE_NAMES, YoloDataset, ensure_shapes_dataset, load_data_config
from yolo.errors import DataError
from yolo.data.shapes import render_sample

SMALL = dict(num_train=6, num_val=3, seed=1)


pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.mark.parametrize("seed", range(8))
def test_labels_are_the_tight_boxes_of_the_drawn_shapes(seed):
    image, boxes, labels = render_sample(np.random.default_rng(seed), texture=False)
    # Independent measurement: connected components of everything that is not the flat background.
    mask = (np.abs(image.astype(int) - 128).max(axis=2) > 0).astype(np.uint8)
    count, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    measured = sorted((int(x), int(y), int(x + w), int(y + h)) for x, y, w, h, _ in stats[1:count])
    assert measured == sorted(tuple(int(v) for v in b) for b in boxes)
    assert len(labels) >= 1 and set(labels.tolist()) <= set(range(len(SHAPE_NAMES)))
    short = min(image.shape[:2])
    assert ((boxes[:, 2:] - boxes[:, :2]).min(1) >= 0.1 * short).all()  # not too small to learn


def test_generation_is_deterministic_and_valid(tmp_path):
    a = ensure_shapes_dataset(tmp_path / "a", **SMALL)
    b = ensure_shapes_dataset(tmp_path / "b", **SMALL)
    for sub in ("images/train", "images/val", "labels/train", "labels/val"):
        names = sorted(p.name for p in (a / sub).iterdir())
        assert names == sorted(p.name for p in (b / sub).iterdir()) and names
        match, mismatch, errors = filecmp.cmpfiles(a / sub, b / sub, names, shallow=False)
        assert not mismatch and not errors
    assert len(list((a / "images" / "train").iterdir())) == 6 and len(list((a / "images" / "val").iterdir())) == 3
    other = ensure_shapes_dataset(tmp_path / "c", num_train=6, num_val=3, seed=2)
    assert (other / "labels/train/00000.txt").read_text() != (a / "labels/train/00000.txt").read_text()

    ds = YoloDataset(a / "images" / "train", SHAPE_NAMES)
    assert len(ds) == 6 and not ds.report.problems and ds.report.num_background == 0
    assert (a / "shapes.names").read_text().split() == list(SHAPE_NAMES)


def test_existing_dataset_is_reused_and_foreign_folders_are_left_alone(tmp_path):
    root = ensure_shapes_dataset(tmp_path / "s", **SMALL)
    first = root / "images" / "train" / "00000.jpg"
    stamp = first.stat().st_mtime_ns
    ensure_shapes_dataset(root, **SMALL)
    assert first.stat().st_mtime_ns == stamp  # not regenerated

    foreign = tmp_path / "mine"
    (foreign / "keep.txt").parent.mkdir()
    (foreign / "keep.txt").write_text("user data")
    with pytest.raises(DataError, match="refusing to overwrite"):
        ensure_shapes_dataset(foreign, **SMALL)
    assert (foreign / "keep.txt").read_text() == "user data"


def test_yaml_generate_key_builds_the_dataset_on_first_use(tmp_path):
    yaml_path = tmp_path / "shapes.yaml"
    yaml_path.write_text("path: data/shapes\ntrain: images/train\nval: images/val\n"
                         "names: [circle, square, triangle, cross, star]\n"
                         "generate: {name: shapes, num_train: 4, num_val: 2, seed: 0}\n")
    cfg = load_data_config(yaml_path)
    assert cfg.train.is_dir() and len(list(cfg.val.iterdir())) == 2
    assert cfg.root == (tmp_path / "data" / "shapes").resolve()
