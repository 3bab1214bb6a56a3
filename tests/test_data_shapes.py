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


def test_a_users_folder_with_a_shapes_json_of_other_parameters_is_not_deleted(tmp_path):
    """A ``path:`` folder of the user's holding any valid-JSON ``shapes.json``: nothing in it was made by the
    generator, so nothing is deleted; one line says why."""
    mine = tmp_path / "mine"
    (mine / "photos").mkdir(parents=True)
    (mine / "photos" / "holiday.jpg").write_bytes(b"not ours")
    (mine / "shapes.json").write_text('{"version": 1, "num_train": 1}')
    yaml_path = tmp_path / "data.yaml"
    yaml_path.write_text(f"path: {mine}\ntrain: images/train\nval: images/val\nnames: [a]\n"
                         "generate: {name: shapes, num_train: 2, num_val: 1, seed: 0}\n")
    with pytest.raises(DataError, match="did not make") as error:
        load_data_config(yaml_path)
    assert "\n" not in str(error.value) and "(first: photos/)" in str(error.value)
    assert (mine / "photos" / "holiday.jpg").read_bytes() == b"not ours"
    assert (mine / "shapes.json").read_text() == '{"version": 1, "num_train": 1}'


def test_regenerating_deletes_only_what_the_generator_made(tmp_path):
    root = ensure_shapes_dataset(tmp_path / "s", **SMALL)
    YoloDataset(root / "images" / "train", SHAPE_NAMES)  # the scan's label cache: made here too
    # a file of the user's beside the generated ones: the folder is refused as it is, and kept whole
    (root / "images" / "train" / "extra.jpg").write_bytes(b"mine")
    with pytest.raises(DataError, match="did not make"):
        ensure_shapes_dataset(root, num_train=4, num_val=2, seed=1)
    assert (root / "images" / "train" / "extra.jpg").read_bytes() == b"mine"
    assert len(list((root / "images" / "train").iterdir())) == 7
    # a generated label edited by the user is no longer what the generator made: kept too
    (root / "images" / "train" / "extra.jpg").unlink()
    (root / "labels" / "train" / "00001.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    with pytest.raises(DataError, match="changed"):
        ensure_shapes_dataset(root, num_train=4, num_val=2, seed=1)
    assert (root / "labels" / "train" / "00001.txt").read_text() == "0 0.5 0.5 0.1 0.1\n"
    # only its own files: regenerated with the new parameters
    (root / "labels" / "train" / "00001.txt").unlink()
    ensure_shapes_dataset(root, num_train=4, num_val=2, seed=1)
    assert len(list((root / "images" / "train").iterdir())) == 4
    assert len(list((root / "labels" / "val").iterdir())) == 2


@pytest.mark.slow
def test_a_generation_stopped_by_sigterm_leaves_no_temporary_folder(tmp_path):
    """SIGTERM during the drawing (the demo's held-out images): the half-written temporary folder is removed and
    the process ends with 143; one left by a process killed outright (SIGKILL) is removed by the next generation,
    and a folder of that name that is not the generator's is left alone."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from helpers import REPO

    code = ("import sys; from yolo.data import ensure_shapes_dataset\n"
            "ensure_shapes_dataset(sys.argv[1], num_train=0, num_val=100000, seed=0, size_range=(32, 32))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "held")],
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    for _ in range(1200):
        time.sleep(0.1)
        if len(list(tmp_path.glob(".held.tmp-*/images/val/*.jpg"))) > 3:
            break
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []

    dead = proc.pid  # a process that has ended
    killed = ensure_shapes_dataset(tmp_path / "k", num_train=1, num_val=0, seed=0, size_range=(32, 32))
    killed.rename(tmp_path / f".held.tmp-{dead}")  # as a SIGKILL leaves it, still marked in progress
    (tmp_path / f".held.tmp-{dead}" / ".shapes-generating").write_text(f"{dead}\n")
    (tmp_path / ".held.tmp-1x").mkdir()  # not a generator's name
    ensure_shapes_dataset(tmp_path / "held", num_train=0, num_val=1, seed=0, size_range=(32, 32))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".held.tmp-1x", "held"]
