"""The label cache is untrusted input: an entry the scan could not have written (a class id beyond the class count,
labels that are no list, a box outside the image, a size of its own) is read again from the files, and a cache file
that is no regular file, too large or not a JSON object is ignored, never read without end."""
import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from yolo.data import cache as cache_module
from yolo.data.cache_entries import valid_entry
from yolo.data.dataset import scan_yolo

pytestmark = pytest.mark.usefixtures("private_cache")


def _split(tmp_path: Path) -> Path:
    folder = tmp_path / "images" / "train"
    folder.mkdir(parents=True)
    (tmp_path / "labels" / "train").mkdir(parents=True)
    for i in range(2):
        cv2.imwrite(str(folder / f"{i}.jpg"), np.full((40, 60, 3), 90, np.uint8))
        (tmp_path / "labels" / "train" / f"{i}.txt").write_text(f"{i + 1} 0.5 0.5 0.4 0.4\n")
    return folder


def _edit_cache(tmp_path: Path, edit) -> Path:
    path = tmp_path / "labels" / "train.cache.json"
    data = json.loads(path.read_text())
    for entry in data["entries"].values():
        edit(entry)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("edit", [
    lambda e: e["labels"][0].__setitem__(0, 99),  # class 99 of 5
    lambda e: e["labels"][0].__setitem__(0, 1.5),
    lambda e: e.__setitem__("labels", "garbage"),
    lambda e: e.__setitem__("labels", [[1, 0.5, 0.5, 3.0, 0.4]]),  # a box wider than the image
    lambda e: e.__setitem__("labels", [[1, 0.5, 0.5, float("nan"), 0.4]]),
    lambda e: e.__setitem__("shape", [-5, 60]),
    lambda e: e.__setitem__("shape", "40x60"),
    lambda e: e.__setitem__("problems", [["x", "y"]]),
    lambda e: e.__setitem__("problems", "garbage"),
], ids=["class-99", "class-1.5", "labels-garbage", "box-outside", "nan", "negative-size", "size-text",
        "short-problem", "problems-garbage"])
def test_an_entry_edited_in_the_cache_is_read_again_from_the_files(tmp_path, edit):
    folder = _split(tmp_path)
    first, _ = scan_yolo(folder, 5)
    _edit_cache(tmp_path, edit)
    records, report = scan_yolo(folder, 5)
    assert [r.labels.tolist() for r in records] == [r.labels.tolist() for r in first] == [[1], [2]]
    assert [(r.height, r.width) for r in records] == [(40, 60), (40, 60)] and not report.problems
    assert valid_entry(json.loads((tmp_path / "labels" / "train.cache.json").read_text())["entries"]
                       [str(folder / "0.jpg")], 5)  # and written back as the scan makes it


@pytest.mark.parametrize("entries", ["garbage", [1, 2], {"x": 1}])
def test_a_cache_whose_entries_are_no_mapping_is_ignored(tmp_path, entries):
    folder = _split(tmp_path)
    scan_yolo(folder, 5)
    path = tmp_path / "labels" / "train.cache.json"
    data = json.loads(path.read_text())
    data["entries"] = entries
    path.write_text(json.dumps(data))
    records, report = scan_yolo(folder, 5)
    assert [r.labels.tolist() for r in records] == [[1], [2]] and not report.problems


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "too-large"])
def test_a_cache_file_that_is_no_regular_file_or_too_large_is_not_read(tmp_path, monkeypatch, kind):
    folder = _split(tmp_path)
    path = tmp_path / "labels" / "train.cache.json"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would wait for a writer forever
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")  # reading it would never end
    else:
        scan_yolo(folder, 5)
        monkeypatch.setattr(cache_module, "MAX_CACHE_BYTES", path.stat().st_size - 1)

        def never(*args, **kwargs):
            raise AssertionError("the cache file was read")

        monkeypatch.setattr(json, "load", never)
    records, report = scan_yolo(folder, 5)
    assert [r.labels.tolist() for r in records] == [[1], [2]] and not report.problems


def test_a_cache_file_nested_too_deep_for_the_json_reader_is_ignored(tmp_path):
    folder = _split(tmp_path)
    (tmp_path / "labels" / "train.cache.json").write_text("[" * 200_000 + "]" * 200_000)
    records, report = scan_yolo(folder, 5)
    assert [r.labels.tolist() for r in records] == [[1], [2]] and not report.problems


# ------------------------------------------------------------------------------------------------ label cache
def test_a_label_edited_in_place_with_its_mtime_kept_is_read_again(own_shapes):
    """``cp -p``, ``rsync -t`` and ``touch -r`` keep the mtime, and an edit of one digit keeps the size: the
    cache must still serve the new labels."""
    from yolo.data.dataset import YoloDataset
    images = own_shapes / "data" / "images" / "train"
    label = own_shapes / "data" / "labels" / "train" / "00000.txt"
    label.write_text("1 0.5 0.5 0.4 0.4\n")
    first = YoloDataset(images, ["a", "b", "c"])
    assert first.records[0].labels.tolist() == [1]
    stat = label.stat()
    label.write_text("2 0.5 0.5 0.4 0.4\n")  # same size
    os.utime(label, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    assert label.stat().st_size == stat.st_size and label.stat().st_mtime_ns == stat.st_mtime_ns
    assert YoloDataset(images, ["a", "b", "c"]).records[0].labels.tolist() == [2]
