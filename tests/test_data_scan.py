"""The dataset scan (:func:`yolo.data.dataset.scan_yolo`) against hostile and unusual files: images judged by the
reader that training uses (OpenCV), JPEGs with bytes after their end, EXIF orientations, verdicts cached only
about content, label files that are no regular file or too large, symlinked images in a list file, split folders
walked within bounds, and caches kept inside the dataset or the user's cache folder."""
import errno
import io
import logging
import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from yolo.data import YoloDataset
from yolo.data import scan_files
from yolo.data.dataset import scan_yolo
from yolo.data.validation import MAX_LABEL_FILE_BYTES
from yolo.errors import DataError
from yolo.files import images as image_files

pytestmark = pytest.mark.usefixtures("private_cache")

NAMES = ["a", "b", "c"]


def _pixels(h: int = 40, w: int = 60) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, (h, w, 3), dtype=np.uint8)


def _jpeg(path: Path, h: int = 40, w: int = 60) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), _pixels(h, w))
    return path


def _label(image: Path, text: str = "0 0.5 0.5 0.4 0.4\n") -> Path:
    parts = list(image.parts)
    parts[len(parts) - 1 - parts[::-1].index("images")] = "labels"
    path = Path(*parts).with_suffix(".txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _split(tmp_path: Path, count: int = 2) -> Path:
    folder = tmp_path / "images" / "train"
    for i in range(count):
        _label(_jpeg(folder / f"{i}.jpg"))
    return folder


def _reasons(report):
    return {Path(p.path).name: p.reason for p in report.problems}


# ------------------------------------------------------------------------------------------ images
@pytest.mark.parametrize("trailer", [b"\n", b"written by a camera app\n", bytes(64)])
def test_a_complete_jpeg_with_bytes_after_its_end_is_kept(tmp_path, trailer):
    folder = _split(tmp_path, 1)
    image = folder / "0.jpg"
    image.write_bytes(image.read_bytes() + trailer)
    assert cv2.imread(str(image)).shape == (40, 60, 3)  # OpenCV decodes it whole
    records, report = scan_yolo(folder, 3, cache=False)
    assert len(records) == 1 and not report.problems, _reasons(report)


@pytest.mark.slow
def test_a_truncated_jpeg_is_still_dropped_with_or_without_a_thumbnail(tmp_path):
    folder = _split(tmp_path, 2)
    whole = folder / "0.jpg"
    whole.write_bytes(whole.read_bytes()[:-200])
    # a JPEG with an EXIF thumbnail (a whole JPEG, end marker included, inside its APP1 segment), cut short
    thumbnail = io.BytesIO()
    Image.fromarray(_pixels(8, 8)).save(thumbnail, format="JPEG")
    exif = Image.Exif()
    buffer = io.BytesIO()
    Image.fromarray(_pixels()).save(buffer, format="JPEG", exif=exif.tobytes())
    data = buffer.getvalue()
    marker = data.index(b"\xff\xe1")  # APP1: put the thumbnail's bytes into a comment segment before the image
    comment = b"\xff\xfe" + (len(thumbnail.getvalue()) + 2).to_bytes(2, "big") + thumbnail.getvalue()
    (folder / "1.jpg").write_bytes((data[:marker] + comment + data[marker:])[:-300])
    records, report = scan_yolo(folder, 3, cache=False)
    reasons = _reasons(report)
    assert not records and "truncated" in reasons["0.jpg"] and "truncated" in reasons["1.jpg"], reasons


def test_an_image_pil_reads_but_opencv_cannot_is_dropped_by_the_scan(tmp_path):
    folder = _split(tmp_path, 2)
    Image.fromarray(_pixels()).save(folder / "1.jpg", format="PCX")  # a PCX named .jpg
    assert cv2.imread(str(folder / "1.jpg")) is None
    records, report = scan_yolo(folder, 3, cache=False)
    assert [Path(r.path).name for r in records] == ["0.jpg"]
    assert "OpenCV" in _reasons(report)["1.jpg"]


@pytest.mark.parametrize("fmt, suffix", [("TIFF", ".tif"), ("JPEG", ".jpg"), ("PNG", ".png"), ("WEBP", ".webp")])
def test_the_scanned_size_is_the_one_every_load_returns_for_every_exif_orientation(tmp_path, caplog, fmt, suffix):
    folder = tmp_path / "images" / "train"
    folder.mkdir(parents=True)
    for orientation in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        path = folder / f"{orientation}{suffix}"
        Image.fromarray(_pixels()).save(path, format=fmt, exif=exif.tobytes())
        _label(path)
    dataset = YoloDataset(folder, NAMES, img_size=64)
    assert len(dataset) == 8
    with caplog.at_level(logging.WARNING):
        for index, record in enumerate(dataset.records):
            # the reader (OpenCV's imdecode, EXIF applied as it applies it) called directly: the size to agree with
            decoded = cv2.imdecode(np.fromfile(record.path, np.uint8), cv2.IMREAD_COLOR)
            assert (record.height, record.width) == decoded.shape[:2], record.path
            assert dataset.decode_image(index).shape[:2] == (record.height, record.width)
    assert "differs from the checked" not in caplog.text


@pytest.mark.parametrize("error", [OSError(errno.EMFILE, "Too many open files"), OSError(errno.EIO, "I/O error"),
                                   MemoryError()])
def test_an_error_of_the_moment_is_not_cached_as_a_corrupt_image(tmp_path, monkeypatch, error):
    folder = _split(tmp_path, 2)
    real_open = image_files.Image.open

    def failing_open(path, *args, **kwargs):
        if Path(path).name == "1.jpg":
            raise error
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(image_files.Image, "open", failing_open)
    records, report = scan_yolo(folder, 3)
    assert len(records) == 1 and "checked again next time" in _reasons(report)["1.jpg"]
    monkeypatch.setattr(image_files.Image, "open", real_open)
    records, report = scan_yolo(folder, 3)  # the cache holds no verdict on 1.jpg: it is read again, and kept
    assert len(records) == 2 and not report.problems, _reasons(report)


# ------------------------------------------------------------------------------------------ label files
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "broken-link"])
def test_a_label_file_that_is_no_regular_file_is_reported_never_read(tmp_path, kind):
    folder = _split(tmp_path, 2)
    label = tmp_path / "labels" / "train" / "1.txt"
    label.unlink()
    if kind == "fifo":
        os.mkfifo(label)  # reading it would wait for a writer forever
    else:
        label.symlink_to("/dev/zero" if kind == "dev-zero" else tmp_path / "nowhere.txt")
    records, report = scan_yolo(folder, 3)
    texts = [str(p) for p in report.problems]
    assert [Path(r.path).name for r in records] == ["0.jpg"], texts  # its image is not a background image
    assert len(texts) == 1 and texts[0].startswith(f"{label}: "), texts
    assert ("not a regular file" if kind != "broken-link" else "cannot read label file") in texts[0]
    assert "no matching image" not in texts[0]


def test_a_label_file_over_the_size_limit_is_refused_unread(tmp_path):
    folder = _split(tmp_path, 2)
    label = tmp_path / "labels" / "train" / "1.txt"
    with open(label, "r+b") as f:  # sparse: its size without its bytes
        f.truncate(MAX_LABEL_FILE_BYTES + 1)
    records, report = scan_yolo(folder, 3)
    (problem,) = report.problems
    assert problem.path == str(label) and "more than the 16,777,216 a label file may have" in problem.reason
    assert [Path(r.path).name for r in records] == ["0.jpg"]


# ------------------------------------------------------------------------------------------ list files
def test_symlinked_images_in_a_list_file_take_the_labels_beside_the_links(tmp_path):
    """Darknet (src/utils.c replace_image_to_label) makes the label path from the image path as written in
    train.txt, never from the link's target: a subset of links with labels of its own trains on those."""
    original = tmp_path / "coco" / "images" / "train"
    subset = tmp_path / "subset" / "images" / "train"
    subset.mkdir(parents=True)
    for i in range(2):
        _label(_jpeg(original / f"{i}.jpg"), "45 0.5 0.5 0.4 0.4\n")  # the original labels: class 45
        (subset / f"{i}.jpg").symlink_to(original / f"{i}.jpg")
        _label(subset / f"{i}.jpg", "2 0.5 0.5 0.4 0.4\n")  # the subset's: class 2
    listing = tmp_path / "subset" / "train.txt"
    listing.write_text("".join(f"{subset / f'{i}.jpg'}\n" for i in range(2)))
    for source in (listing, subset):  # a list of links, and the folder of the links: the same labels
        records, report = scan_yolo(source, 3, cache=False)
        assert [r.labels.tolist() for r in records] == [[2], [2]], (source, _reasons(report))
        assert all(r.path.startswith(str(subset)) for r in records)


# ------------------------------------------------------------------------------------------ split folders
def test_a_split_folder_walk_stops_at_its_limit_with_one_line(tmp_path):
    folder = _split(tmp_path, 6)
    with pytest.raises(DataError) as info:
        scan_files.images_under(folder, limit=5)
    assert str(info.value).startswith(f"{folder}: more than 5 files and folders") and "\n" not in str(info.value)
    assert len(scan_files.images_under(folder, limit=6)) == 6


def test_a_split_folder_walk_never_enters_system_folders_or_follows_folder_links(tmp_path, monkeypatch):
    root = tmp_path / "root"
    _jpeg(root / "a.jpg")
    _jpeg(root / "proc" / "maps.jpg")
    (root / "loop").symlink_to(root)  # followed, it would list everything again, without end
    assert all(scan_files._is_system_folder(p) for p in ("/proc", "/proc/1/maps", "/sys/kernel", "/dev/shm"))
    assert not any(scan_files._is_system_folder(p) for p in ("/", "/process", "/home/sys", "/devices"))
    monkeypatch.setattr(scan_files, "SYSTEM_FOLDERS", (str(root / "proc"),))  # a stand-in for /proc
    assert scan_files.images_under(root) == [root / "a.jpg"]


def test_the_cache_of_a_flat_split_goes_to_the_user_cache_never_into_the_folder_above(tmp_path, private_cache):
    flat = tmp_path / "home" / "pictures"
    for i in range(2):
        _jpeg(flat / f"{i}.jpg")
        (flat / f"{i}.txt").write_text("0 0.5 0.5 0.4 0.4\n")
    records, _ = scan_yolo(flat, 3)
    assert len(records) == 2
    assert sorted(p.name for p in flat.parent.iterdir()) == ["pictures"]  # nothing written beside the split
    assert sorted(p.name for p in flat.iterdir()) == ["0.jpg", "0.txt", "1.jpg", "1.txt"]
    assert len(list((private_cache / "labels").glob("*.json"))) == 1
    # a split with a labels folder keeps its cache there, inside the dataset
    scan_yolo(_split(tmp_path / "ds", 1), 3)
    assert (tmp_path / "ds" / "labels" / "train.cache.json").is_file()


@pytest.mark.parametrize("content", ["zeros", "long-line"])
def test_a_list_file_without_line_ends_is_refused_at_its_first_line_unread(tmp_path, content):
    listing = tmp_path / "train.txt"
    if content == "zeros":
        with open(listing, "wb") as f:  # sparse: 3 GB of zeros, no line end; read whole, a MemoryError
            f.truncate(3 << 30)
    else:
        listing.write_text("images/" + "x" * 70_000 + ".jpg\n")
    with pytest.raises(DataError) as info:
        scan_yolo(listing, 3)
    assert str(info.value) == f"{listing}:1: not a text list of image paths (this line is longer than 65,536 bytes)"


def test_a_split_that_is_a_fifo_is_named_as_such_never_read(tmp_path):
    listing = tmp_path / "train.txt"
    os.mkfifo(listing)
    with pytest.raises(DataError) as info:
        scan_yolo(listing, 3)
    assert str(info.value).startswith(f"{listing}: not a folder or a regular file (a FIFO or a device)")


def test_a_split_folder_that_is_a_link_takes_the_labels_beside_the_link(tmp_path):
    """``subset/images/train -> coco/images/train``: Darknet reads ``subset/images/train/0.jpg`` and its label
    ``subset/labels/train/0.txt`` (the path as given), never the target's ``coco/labels/train/0.txt``."""
    from yolo.data import build_dataset, load_data_config

    original = tmp_path / "coco" / "images" / "train"
    _label(_jpeg(original / "0.jpg"), "45 0.5 0.5 0.4 0.4\n")
    subset = tmp_path / "subset"
    (subset / "images").mkdir(parents=True)
    (subset / "images" / "train").symlink_to(original)
    _label(subset / "images" / "train" / "0.jpg", "2 0.5 0.5 0.4 0.4\n")
    data = tmp_path / "subset.yaml"
    data.write_text(f"path: {subset}\ntrain: images/train\nval: images/train\nnames: [a, b, c]\n")
    dataset = build_dataset(load_data_config(data), "train")
    assert [r.labels.tolist() for r in dataset.records] == [[2]]
    assert dataset.records[0].path == str(subset / "images" / "train" / "0.jpg")
