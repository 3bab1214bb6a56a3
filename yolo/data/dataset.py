"""Detection datasets: the YOLO txt layout and COCO JSON, checked up front.

Both produce the same items (see :meth:`DetectionDataset.__getitem__`)::

    image   uint8 Tensor[3, H, W] RGB (the collate converts to float 0..1: 4x less data between workers)
    targets Float[n, 6] rows (0, class, cx, cy, w, h); cx, cy, w, h in pixels of the H x W input;
            column 0 is filled with the image's index in the batch by the collate
    info    dict(index, image_id, path, orig_shape=(h, w), input_shape=(H, W),
                 letterbox=LetterboxInfo | None, transform=Float64[3,3] | None)

``letterbox`` maps original-image pixels to input pixels (``x * scale_x + pad_x``); it is always
set without augmentation, and with augmentation whenever the placement is a plain per-axis scale
and shift (no flip, rotation or mosaic). ``transform`` is the full 3x3 original -> input matrix
(``None`` for mosaics).

YOLO layout: ``.../images/<split>/name.jpg`` with ``.../labels/<split>/name.txt`` beside it (the
last ``images`` folder of the path becomes ``labels``; Darknet's ``JPEGImages`` works too; a
``name.txt`` next to the image is the fallback), each line ``class cx cy w h`` normalized to 0..1.
A split is a folder of images or a list file with one image path per line (Darknet's train.txt).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
from pycocotools.coco import COCO
from torch.utils.data import Dataset

from yolo.ops import sizes
from yolo.ops.sizes import ImageSize, SizeLike
from yolo.data.cache import LabelCache, fallback_path
from yolo.data.cache_entries import valid_entry
from yolo.data.darknet_batched import PendingImage
from yolo.data.image_cache import ImageCache
from yolo.data.scan_files import check_images, images_under, transient_reason
from yolo.errors import DataError, ImageReadError, shown
from yolo.files.images import DATASET_IMAGE_SUFFIXES, image_file_size, load_image
from yolo.data.transforms import (NO_AUGMENT, augment_config, item_rng, matrix_to_letterbox, mosaic_tile, reduced_size,
                                  resize_sample, resized_boxes, train_transform)
from yolo.data.validation import MAX_LABEL_FILE_BYTES, Problem, ValidationReport, read_label_file

logger = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]
# The longest line of a list file read (a path is at most 4,096 bytes on Linux).
MAX_LIST_LINE = 1 << 16


@dataclass
class ImageRecord:
    """One usable image and its ground truth in original-image pixels."""

    path: str
    height: int
    width: int
    boxes: np.ndarray  # Float32[N, 4] xyxy, original pixels
    labels: np.ndarray  # Int64[N]
    image_id: int


def read_image(path: PathLike, decode: str = "opencv") -> np.ndarray:
    """RGB ``uint8`` ``H x W x 3`` (:func:`yolo.files.images.load_image`, ``decode`` one of its decoders); an
    unreadable file is a :class:`DataError` naming it, as every dataset problem."""
    try:
        return load_image(path, rgb=True, decode=decode)
    except ImageReadError as exc:
        if decode == "opencv":
            raise DataError("cannot read image (missing or corrupt)", path) from None
        raise DataError(str(exc).split(": ", 1)[-1], path) from None  # stb_image's reason, after the path


class DetectionDataset(Dataset):
    """Items for training or evaluation from a list of :class:`ImageRecord`.

    Args:
        records: the usable images.
        names: class names.
        img_size: network input ``(h, w)`` (or one int); multiples of the model stride.
        augment: training augmentation (:func:`yolo.data.transforms.train_transform`) when True,
            the deterministic :attr:`resize` otherwise.
        hyp: augmentation hyperparameters (:func:`yolo.data.transforms.augment_config`).
        seed: base seed; item ``i`` of epoch ``e`` is augmented with ``item_rng(seed, e, i)``.
        report: the validation report of the source.

    ``category_ids`` is ``None`` here; COCO JSON datasets set it to the COCO id of each label.
    ``resize`` is the input made without augmentation: ``"letterbox"`` (Darknet's ``letterbox_image``)
    or ``"stretch"`` (Darknet's ``resize_image``), as Darknet's ``detector map`` picks it from the cfg;
    ``resample`` how it is resampled: ``"darknet"`` (Darknet's float resize, what ``detector map`` feeds the
    network: the item is then a ``Float32`` 0..1 image) or ``"opencv"`` (``cv2.resize``, a ``uint8`` item);
    ``decode`` how each file is read: ``"opencv"`` or ``"stb"`` (Darknet's default build's pixels).
    """

    category_ids: Optional[List[int]] = None
    resize: str = "letterbox"
    resample: str = "darknet"
    decode: str = "opencv"

    def __init__(self, records: List[ImageRecord], names: Sequence[str], img_size: SizeLike = 416,
                 augment: bool = False, hyp: Optional[Dict[str, Any]] = None, seed: int = 0,
                 report: Optional[ValidationReport] = None, source: str = ""):
        self.records = records
        self.names = list(names)
        self.num_classes = len(self.names)
        self.img_size: ImageSize = sizes.image_size(img_size, "img_size")
        self.augment = augment
        self.hyp = augment_config(hyp) if augment else dict(NO_AUGMENT)
        self.seed = int(seed)
        self.epoch = 0
        self.report = report
        self.source = source
        self.images: Optional[ImageCache] = None  # decoded images kept in memory (cache_images)
        self.images_for: Optional[ImageSize] = None  # the one item size they serve, when kept reduced

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.records)

    def set_epoch(self, epoch: int) -> None:
        """Select the augmentation of ``epoch``. Call before creating the epoch's iterator (workers
        receive a copy of the dataset when the iterator starts; with ``persistent_workers`` they
        would keep the old epoch)."""
        self.epoch = int(epoch)

    def cache_shapes(self, size_hw: Optional[ImageSize] = None) -> np.ndarray:
        """``Int64[N, 3]``: the ``(h, w, 3)`` each image is kept at by :meth:`cache_images`; ``ImageCache.nbytes_of``
        of it is the memory the cache takes. That is the size the label scan checked, or, when every training item
        is made at the one size ``size_hw`` and the pipeline first reduces each image to a size of its own
        (:func:`yolo.data.transforms.reduced_size`), that smaller size."""
        return np.array([(*self._kept_hw(r, size_hw), 3) for r in self.records], np.int64).reshape(-1, 3)

    def _kept_hw(self, record: ImageRecord, size_hw: Optional[ImageSize]) -> Tuple[int, int]:
        original = (record.height, record.width)
        if not self.augment or size_hw is None:
            return original
        return reduced_size(self.hyp, original, size_hw)

    def cache_images(self, progress: bool = False, size_hw: Optional[ImageSize] = None) -> int:
        """Decode every image once and keep it in this process's memory (opt-in; returns the bytes held): items
        then skip the JPEG decode and are otherwise the same. ``size_hw``: the one size every training item is
        made at, where the images may be kept smaller (:meth:`cache_shapes`); items at another size then read
        the disk. Call it before the loader starts its worker processes, which then share the decoded images
        with this process (never written: the images are read-only). Training checks the size first and shares
        one copy per machine (:func:`yolo.engine.shared_images.cache_train_images`)."""
        self.images = None
        cache = ImageCache.in_memory(self.cache_shapes(size_hw))
        cache.fill(lambda index: self.image_to_cache(index, size_hw), progress)
        self.use_image_cache(cache, size_hw)
        return cache.nbytes

    def image_to_cache(self, index: int, size_hw: Optional[ImageSize] = None) -> np.ndarray:
        """Image ``index`` as :meth:`cache_images` keeps it: decoded, and reduced as its pipeline would first do."""
        image = self.decode_image(index)
        kept = self._kept_hw(self.records[index], size_hw)
        return image if kept == image.shape[:2] else mosaic_tile(image, size_hw)

    def use_image_cache(self, cache: Optional[ImageCache], size_hw: Optional[ImageSize] = None) -> None:
        """Read images from ``cache`` (laid out as ``cache_shapes(size_hw)``, filled by :meth:`image_to_cache`),
        or from disk again (None)."""
        shapes = self.cache_shapes(size_hw)
        if cache is not None and not np.array_equal(cache.shapes, shapes):
            raise ValueError("the image cache was laid out for other images")
        reduced = cache is not None and not np.array_equal(shapes, self.cache_shapes())
        self.images = cache
        self.images_for = size_hw if reduced else None

    def decode_image(self, index: int) -> np.ndarray:
        """Image ``index`` read from disk: RGB ``uint8`` ``h x w x 3`` at its checked size."""
        record = self.records[index]
        image = read_image(record.path, self.decode)
        h, w = image.shape[:2]
        if (h, w) != (record.height, record.width):
            # The header said otherwise (unusual EXIF handling): keep the checked size, which the
            # ground truth and the evaluation use.
            logger.warning("%s: decoded size %dx%d differs from the checked %dx%d; resizing it",
                           record.path, w, h, record.width, record.height)
            image = cv2.resize(image, (record.width, record.height), interpolation=cv2.INTER_LINEAR)
        return image

    def load_sample(self, index: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(image RGB uint8 HxWx3, boxes Float32[N,4] xyxy in its pixels, labels Int64[N])``: the original
        image, or, read-only, the one kept by :meth:`cache_images` (smaller where it was kept reduced)."""
        record = self.records[index]
        if self.images is None:
            return self.load_from_disk(index)
        image, boxes = self.images[index], record.boxes.copy()
        if image.shape[:2] != (record.height, record.width):
            boxes = resized_boxes(boxes, (record.height, record.width), image.shape[:2])
        return image, boxes, record.labels.copy()

    def load_from_disk(self, index: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`load_sample` without the image cache: the original image, boxes in original pixels."""
        record = self.records[index]
        return self.decode_image(index), record.boxes.copy(), record.labels.copy()

    def __getitem__(self, item):
        """Item ``index`` at ``img_size``, or ``(index, (h, w))`` at that size (multi-scale batches), or
        ``(index, (h, w), epoch)`` augmented as in ``epoch`` (else :meth:`set_epoch`'s), or ``(index, (h, w),
        epoch, pending)``: with ``pending``, a ``darknet`` pipeline's training image is a
        :class:`yolo.data.darknet_batched.PendingImage`, its float steps left for the training device."""
        request = (item,) if isinstance(item, (int, np.integer)) else tuple(item)
        index, size_hw, epoch, pending = request + (self.img_size, self.epoch, False)[len(request) - 1:]
        record = self.records[index]
        # images kept reduced (cache_images) serve the training items of their one size only
        reduced_fits = self.images_for is None or (self.augment and tuple(size_hw) == tuple(self.images_for))
        load = self.load_sample if reduced_fits else self.load_from_disk
        if self.augment:
            rng = item_rng(self.seed, epoch, index)
            image, boxes, labels, matrix = train_transform(load, index, len(self), rng, size_hw, self.hyp,
                                                           pending=pending)
            letterbox = matrix_to_letterbox(matrix) if matrix is not None else None
        else:
            image, boxes, labels = load(index)
            image, boxes, letterbox = resize_sample(image, boxes, size_hw, self.hyp["fill"], self.resize,
                                                    self.resample)
            matrix = np.array([[letterbox.scale_x, 0, letterbox.pad_x],
                               [0, letterbox.scale_y, letterbox.pad_y], [0, 0, 1]], np.float64)
        targets = torch.from_numpy(item_targets(boxes, labels))
        if isinstance(image, PendingImage):  # UInt8[3, h, w] once its batch is finished
            tensor, input_shape = image, tuple(size_hw)
        else:
            tensor, input_shape = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), image.shape[:2]
        info = {
            "index": index,
            "image_id": record.image_id,
            "path": record.path,
            "orig_shape": (record.height, record.width),
            "input_shape": tuple(input_shape),
            "letterbox": letterbox,
            "transform": matrix,
        }
        return tensor, targets, info

    # ------------------------------------------------------------------ evaluation
    def ground_truth(self) -> List[Dict[str, Any]]:
        """Ground truth in original-image pixels, one dict per image (dataset order)::

            image_id int, file_name str (the image path), height, width,
            boxes Float[K, 4] xyxy original pixels, labels Int64[K]
        """
        return [{
            "image_id": r.image_id,
            "file_name": r.path,
            "height": r.height,
            "width": r.width,
            "boxes": torch.from_numpy(r.boxes.astype(np.float32).reshape(-1, 4)),
            "labels": torch.from_numpy(r.labels.astype(np.int64).reshape(-1)),
        } for r in self.records]

    def num_boxes(self) -> int:
        return int(sum(len(r.labels) for r in self.records))

    def class_counts(self) -> np.ndarray:
        """Int64[C]: number of boxes per class."""
        counts = np.zeros(self.num_classes, np.int64)
        for r in self.records:
            np.add.at(counts, r.labels, 1)
        return counts

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.source!r}, images={len(self)}, boxes={self.num_boxes()}, "
                f"classes={self.num_classes}, img_size={self.img_size}, augment={self.augment})")


# ---------------------------------------------------------------------------- YOLO layout
def item_targets(boxes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """An item's target rows, Float32[N, 6] ``(0, class, cx, cy, w, h)`` (the collate fills in the image index),
    from Float[N, 4] xyxy ``boxes`` in input pixels and Int[N] ``labels``: the centre and size computed as
    ``xyxy_to_cxcywh`` does, in numpy (one item's few boxes cost less there than as tensors)."""
    b = np.asarray(boxes, np.float32).reshape(-1, 4)
    targets = np.zeros((len(labels), 6), np.float32)
    targets[:, 1] = labels
    targets[:, 2:] = np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    return targets


def label_path_for(image_path: PathLike) -> Path:
    """Where the label file of an image is expected: the last ``images`` (or Darknet's ``JPEGImages``)
    folder of the path becomes ``labels``, the extension ``.txt``; without such a folder, next to it."""
    path = Path(image_path)
    folders = list(path.parts[:-1])
    for marker in ("images", "JPEGImages"):
        if marker in folders:
            i = len(folders) - 1 - folders[::-1].index(marker)
            folders[i] = "labels"
            return Path(*folders, path.stem + ".txt")
    return path.with_suffix(".txt")


def find_label_file(image_path: Path) -> Optional[Path]:
    """The label file of an image: :func:`label_path_for`, else ``name.txt`` next to the image. A folder of
    that name is returned too, to be reported (its image must not pass for a background image), as is anything
    else of that name that is no regular file (a FIFO, a link to ``/dev/zero``, a broken link)."""
    for candidate in (label_path_for(image_path), image_path.with_suffix(".txt")):
        if os.path.lexists(candidate):  # a FIFO, a device or a broken link too: reported, never read as empty
            return candidate
    return None


def list_images(source: Path, search_dirs: Sequence[Path] = ()) -> Tuple[List[Path], List[Problem], int]:
    """Images of a split: every image under a folder (sorted), or the lines of a list file.

    A relative list line is looked up as Darknet opens it, from the working directory, then from the list
    file's folder, the folder above it (Darknet's ``data/train.txt`` listing ``data/obj/x.jpg``, read from
    elsewhere) and ``search_dirs`` (the dataset root; a ``.data`` file's folder and the one above it). The
    bases that found entries other than the working directory are logged once, with their counts.

    Returns:
        ``(images, problems, listed)``: existing image paths, list lines that point nowhere, and the
        number of entries listed.
    """
    if source.is_dir():
        images = images_under(source)
        return images, [], len(images)
    if not source.is_file():
        raise DataError("not a folder or a regular file (a FIFO or a device): give the folder of the split's images or "
                        "a .txt list of them" if source.exists() else "image folder or list file not found", source)
    if source.suffix.lower() in DATASET_IMAGE_SUFFIXES:
        raise DataError("an image, not a text list of image paths: give the folder of the split's images or a "
                        ".txt list of them", source)
    images, listed = [], 0
    bad: Dict[str, List[Tuple[int, str]]] = {"missing_image": [], "bad_image": []}  # code -> (line, entry)
    bases = list_bases(source, search_dirs)
    found_from: Dict[Path, int] = {}  # base -> entries found from it
    with open(source, "rb") as f:
        for lineno, raw in enumerate(iter(lambda: f.readline(MAX_LIST_LINE + 1), b""), start=1):
            entry = _list_line(raw, source, lineno).strip()
            if not entry or entry.startswith("#"):
                continue
            listed += 1
            path = Path(os.path.expanduser(entry))
            candidates = [(None, path)] if path.is_absolute() else [(b, b / path) for b in bases]
            base, found = next(((b, c) for b, c in candidates if c.is_file()), (None, None))
            if found is None:
                bad["missing_image"].append((lineno, entry))
                continue
            if base is not None:
                found_from[base] = found_from.get(base, 0) + 1
            if found.suffix.lower() not in DATASET_IMAGE_SUFFIXES:
                bad["bad_image"].append((lineno, entry))
            else:
                images.append(found.absolute())  # as written: its label is found beside the link, as Darknet does
    cwd = Path.cwd()
    elsewhere = {b: n for b, n in found_from.items() if b != cwd}
    if elsewhere:
        logger.info("%s: relative entries read from %s", source, "; ".join(
            f"{b} ({n:,} of {listed:,})" for b, n in elsewhere.items()))
    problems = [_bad_list_lines(source, code, lines, listed, bases) for code, lines in bad.items() if lines]
    return images, problems, listed


def list_bases(source: Path, search_dirs: Sequence[Path] = ()) -> List[Path]:
    """The folders a relative line of the list file ``source`` is looked up from, in order (see
    :func:`list_images`), each once."""
    return list(dict.fromkeys([Path.cwd(), source.parent, source.parent.parent, *search_dirs]))


def _bad_list_lines(source: Path, code: str, lines: List[Tuple[int, str]], listed: int,
                    bases: Sequence[Path] = ()) -> Problem:
    """One problem for the lines of a list file that name no image (``code`` missing_image) or a file that is no
    image (bad_image): their count and line numbers, and only the first entry, cut short and escaped; for missing
    files, the folders relative lines were looked up from. A list file may be anything a dataset config names
    (``train: /etc/passwd``, a private key): its lines never go to a log."""
    numbers = ", ".join(str(n) for n, _ in lines[:10]) + (", ..." if len(lines) > 10 else "")
    looked = (f"; relative lines were looked up from {', '.join(shown(str(b), 80) for b in bases)}"
              if bases and code == "missing_image" else "")
    what = ("name no existing file" if code == "missing_image"
            else f"name a file that is not an image (extensions: {' '.join(DATASET_IMAGE_SUFFIXES)})")
    first_line, first = lines[0]
    return Problem(str(source), f"{len(lines):,} of {listed:,} entries {what} (line{'s' if len(lines) > 1 else ''} "
                   f"{numbers}); the first: '{shown(first, 40)}'{looked}", first_line, "image", code, len(lines))


def _list_line(raw: bytes, source: Path, lineno: int) -> str:
    """One line of an image list file as text; a line that is not UTF-8 is a :class:`DataError` at its line (the
    file is not a list: an image, an archive, or text saved in another encoding such as UTF-16), as is a line longer
    than :data:`MAX_LIST_LINE` bytes (no path is; a file of zeros has no line end at all)."""
    if len(raw) > MAX_LIST_LINE:
        raise DataError(f"not a text list of image paths (this line is longer than {MAX_LIST_LINE:,} bytes)", source,
                        lineno)
    try:
        return raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError:
        raise DataError("not a text list of image paths (this line is not UTF-8 text)", source, lineno) from None


def _cache_file(source: Path) -> Path:
    """Where the label cache of a split is kept: beside its labels (``labels/<split>.cache.json``) or its list
    file, inside the dataset. A folder of images with no ``images`` folder above them (a flat split, the labels
    next to the images) has no such place of its own: its cache goes to the user's cache folder, never into the
    folder above the split (which may be a user's home or ``/``)."""
    if source.is_dir():
        labels_dir = label_path_for(source / "x.jpg").parent
        beside = labels_dir.parent / f"{labels_dir.name}.cache.json"
        own_folder = labels_dir != source and labels_dir.parent != Path(labels_dir.anchor)
        return beside if own_folder else fallback_path(beside)
    return source.with_name(source.stem + ".cache.json")


def _fingerprint(path: Optional[Path]) -> List[int]:
    """An image's cache key: its size and mtime (decoding it again is what the cache saves)."""
    if path is None:
        return [-1, -1]
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _label_key(path: Optional[Path]) -> list:
    """The label file's part of an image's cache key: its path and :func:`_label_fingerprint`."""
    return [str(path)] + _label_fingerprint(path)


def _label_fingerprint(path: Optional[Path]) -> list:
    """A label file's cache key: its size, mtime and a hash of its bytes, so a label edited in place with its mtime
    kept (``cp -p``, ``rsync -t``, ``touch -r``, a file system with 1-second times) is read again. Hashing a label
    file costs little next to decoding its image. A folder (reported by the scan) has no bytes to hash."""
    if path is None:
        return [-1, -1, ""]
    try:
        st = path.stat()
    except OSError:  # a broken link: the scan reports it
        return [-1, -1, "unreadable"]
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_LABEL_FILE_BYTES:  # reported, never read
        return [st.st_size, st.st_mtime_ns, ""]
    digest = hashlib.blake2b(digest_size=16)
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:  # unreadable: the scan reports it; the key then never matches a readable file's
        return [st.st_size, st.st_mtime_ns, "unreadable"]
    return [st.st_size, st.st_mtime_ns, digest.hexdigest()]


def scan_yolo(source: PathLike, num_classes: int, search_dirs: Sequence[Path] = (), cache: bool = True
              ) -> Tuple[List[ImageRecord], ValidationReport]:
    """Check every image and label file of a YOLO-layout split.

    Returns the usable records (boxes in original pixels) and the report listing everything
    dropped. Results are cached per file (an image's size and mtime, a label file's size, mtime and content hash)
    so a second scan reads no images.
    """
    source = Path(os.path.abspath(source))  # links kept: labels are found beside the path as given (Darknet)
    images, problems, listed = list_images(source, search_dirs)
    report = ValidationReport(source=str(source), num_images=listed, num_classes=int(num_classes))
    if images:
        report.expected_labels_at = str(label_path_for(images[0]).parent)

    label_cache = LabelCache(_cache_file(source), {"num_classes": int(num_classes), "source": str(source)})
    old = label_cache.load() if cache else {}
    entries: Dict[str, Any] = {}
    changed = False
    used_labels = set()
    records: List[ImageRecord] = []

    # the images and label files the cache has no valid entry for are read (the images decoded, several at once)
    fingerprints: List[Tuple[str, list]] = []  # an image listed twice is used twice
    for image_path in images:
        key = str(image_path)
        try:
            fingerprints.append((key, _fingerprint(image_path) + _label_key(find_label_file(image_path))))
        except OSError as e:
            problems.append(Problem(key, f"cannot stat file: {e}", None, "image", "missing_image"))
    to_check = list({key: Path(key) for key, fp in fingerprints
                     if not (isinstance(old.get(key), dict) and old[key].get("fp") == fp
                             and valid_entry(old[key], num_classes))}.values())
    checked = dict(zip(map(str, to_check), check_images(to_check, source.name)))
    for key, fingerprint in fingerprints:
        image_path = Path(key)
        label_path = find_label_file(image_path)
        entry, keep = entries.get(key, old.get(key)), True
        if key in checked and key not in entries:
            result = checked[key]
            if isinstance(result, BaseException):  # this time only (too many open files, out of memory)
                problems.append(Problem(key, f"{transient_reason(result)}; dropped this time, checked again next "
                                        "time", None, "image", "unreadable_image"))
                continue
            shape, reason = result
            labels, label_problems = (read_label_file(label_path, num_classes) if label_path is not None
                                      else (np.zeros((0, 5), np.float32), []))
            entry = {"fp": fingerprint, "shape": shape, "reason": reason, "labels": labels.tolist(),
                     "problems": [p.to_json() for p in label_problems]}
            keep = not any(p.code == "unreadable_label_file" for p in label_problems)  # read again next time
            changed = True
        if keep:
            entries[key] = entry
        if label_path is not None:
            used_labels.add(label_path)
            report.num_label_files += 1
        file_problems = [Problem.from_json(p) for p in entry["problems"]]
        problems.extend(file_problems)
        if entry["shape"] is None:
            problems.append(Problem(key, entry["reason"], None, "image", "bad_image"))
            continue
        if any(p.kind == "file" for p in file_problems):
            continue
        height, width = entry["shape"]
        labels = np.asarray(entry["labels"], np.float32).reshape(-1, 5)
        cx, cy, w, h = labels[:, 1] * width, labels[:, 2] * height, labels[:, 3] * width, labels[:, 4] * height
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1).astype(np.float32)
        records.append(ImageRecord(key, int(height), int(width), boxes, labels[:, 0].astype(np.int64),
                                   image_id=len(records)))
    if cache and (changed or set(entries) != set(old)):
        where = label_cache.save(entries)
        logger.debug("label cache for %s saved to %s", source, where)

    if source.is_dir():
        problems.extend(_orphan_labels(images, used_labels))
    report.problems = problems
    report.num_kept_images = len(records)
    report.num_background = sum(1 for r in records if len(r.labels) == 0)
    report.num_boxes = int(sum(len(r.labels) for r in records))
    return records, report


def _orphan_labels(images: Sequence[Path], used: set) -> List[Problem]:
    """Label files in the labels folders of a split that belong to no image (often a naming mistake)."""
    folders = {label_path_for(p).parent for p in images}
    image_folders = {p.parent for p in images}
    problems = []
    for folder in sorted(folders - image_folders):  # .txt next to images may be anything
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.txt")):
            if path not in used and path.name != "classes.txt":
                what = "a folder named like a label file" if path.is_dir() else "label file"
                problems.append(Problem(str(path), f"{what} has no matching image (ignored)", None, "orphan",
                                        "orphan_label"))
    return problems


class YoloDataset(DetectionDataset):
    """A YOLO-layout split (image folder or list file), validated on construction.

    Args:
        source: image folder or list file.
        names: class names (their count is checked against every label's class).
        img_size, augment, hyp, seed: see :class:`DetectionDataset`.
        cache: use/update the label-scan cache.
        search_dirs: extra folders for relative paths in list files (e.g. the dataset root).
        allow_empty: do not raise when no image has a usable box.

    Raises:
        DataError: when the split has no usable labels (the message says why, with details).
    """

    def __init__(self, source: PathLike, names: Sequence[str], img_size: SizeLike = 416, augment: bool = False,
                 hyp: Optional[Dict[str, Any]] = None, seed: int = 0, cache: bool = True,
                 search_dirs: Sequence[PathLike] = (), allow_empty: bool = False):
        records, report = scan_yolo(source, len(names), [Path(d) for d in search_dirs], cache=cache)
        report.log(logger)
        if not allow_empty:
            report.raise_if_unusable()
        super().__init__(records, names, img_size, augment, hyp, seed, report, str(source))


# ---------------------------------------------------------------------------- COCO JSON
class CocoDataset(DetectionDataset):
    """A COCO-format split read through pycocotools, validated on construction.

    Category ids are mapped to contiguous labels in increasing id order; ``category_ids[label]``
    gives the id back (for writing COCO results). ``image_id`` is the JSON's image id. Crowd
    annotations are skipped (COCO evaluation ignores them). Problems are reported as
    ``annotations.json: annotation id N (image file): reason``.

    Args:
        annotation_file: the COCO ``.json``.
        image_dir: folder that ``file_name`` entries are relative to.
        names: class names; default the categories' names. Their count must match the categories.
    """

    def __init__(self, annotation_file: PathLike, image_dir: PathLike, names: Optional[Sequence[str]] = None,
                 img_size: SizeLike = 416, augment: bool = False, hyp: Optional[Dict[str, Any]] = None,
                 seed: int = 0, allow_empty: bool = False):
        annotation_file, image_dir = Path(annotation_file), Path(image_dir)
        if not annotation_file.is_file():
            raise DataError("COCO annotation file not found", annotation_file)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
                coco = COCO(str(annotation_file))
        except (ValueError, KeyError, TypeError, AssertionError) as e:
            raise DataError(f"not a valid COCO annotation file: {type(e).__name__}: {e}", annotation_file) from None
        categories = sorted(coco.loadCats(coco.getCatIds()), key=lambda c: c["id"])
        if not categories:
            raise DataError("no categories", annotation_file)
        self.category_ids = [int(c["id"]) for c in categories]
        category_names = [str(c["name"]) for c in categories]
        if names is None:
            names = category_names
        elif len(names) != len(categories):
            raise DataError(f"class count mismatch: {len(names)} names given but the file has "
                            f"{len(categories)} categories", annotation_file)
        elif list(names) != category_names:
            logger.warning("%s: category names differ from the given names; labels follow category id order",
                           annotation_file)
        records, report = self._scan(coco, annotation_file, image_dir)
        report.log(logger)
        if not allow_empty:
            report.raise_if_unusable()
        super().__init__(records, names, img_size, augment, hyp, seed, report, str(annotation_file))

    def _scan(self, coco, annotation_file: Path, image_dir: Path) -> Tuple[List[ImageRecord], ValidationReport]:
        label_of = {cid: i for i, cid in enumerate(self.category_ids)}
        source = str(annotation_file)
        report = ValidationReport(source=source, num_images=len(coco.imgs), expected_labels_at=source,
                                  num_classes=len(self.category_ids))
        problems: List[Problem] = []
        records: List[ImageRecord] = []
        for image_id in sorted(coco.imgs):
            info = coco.imgs[image_id]
            path = image_dir / info.get("file_name", "")
            try:
                shape, reason = image_file_size(path)
            except (OSError, MemoryError) as e:  # this time only: a file-system error, out of memory
                shape, reason = None, transient_reason(e)
            if shape is None:
                problems.append(Problem(str(path), f"{reason} (image id {image_id} in {annotation_file.name})",
                                        None, "image", "bad_image"))
                continue
            height, width = shape
            declared = (info.get("height"), info.get("width"))
            if declared != (height, width):
                problems.append(Problem(str(path), f"size {width}x{height} differs from the JSON's "
                                        f"{declared[1]}x{declared[0]} (image id {image_id}); image dropped",
                                        None, "image", "size_mismatch"))
                continue
            boxes, labels = [], []
            for ann in coco.imgToAnns.get(image_id, []):
                if ann.get("iscrowd", 0):
                    continue
                why = self._check_annotation(ann, label_of, width, height)
                if why:
                    code = "unknown_class" if why.startswith("unknown category") else "bad_annotation"
                    problems.append(Problem(source, f"annotation id {ann.get('id')} (image {info.get('file_name')}): "
                                            f"{why}", None, "box", code))
                    continue
                x, y, w, h = (float(v) for v in ann["bbox"])
                x1, y1 = max(x, 0.0), max(y, 0.0)
                x2, y2 = min(x + w, float(width)), min(y + h, float(height))
                boxes.append([x1, y1, x2, y2])
                labels.append(label_of[ann["category_id"]])
            records.append(ImageRecord(str(path), height, width, np.asarray(boxes, np.float32).reshape(-1, 4),
                                       np.asarray(labels, np.int64), image_id=int(image_id)))
        report.problems = problems
        report.num_label_files = 1
        report.num_kept_images = len(records)
        report.num_background = sum(1 for r in records if len(r.labels) == 0)
        report.num_boxes = int(sum(len(r.labels) for r in records))
        return records, report

    @staticmethod
    def _check_annotation(ann: Dict[str, Any], label_of: Dict[int, int], width: int, height: int) -> Optional[str]:
        bbox = ann.get("bbox")
        if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
            return f"bbox must be [x, y, width, height], got {bbox!r}"
        try:
            x, y, w, h = (float(v) for v in bbox)
        except (TypeError, ValueError):
            return f"bbox has a non-numeric value: {bbox!r}"
        if not all(np.isfinite([x, y, w, h])):
            return f"bbox has a non-finite value: {bbox!r}"
        if ann.get("category_id") not in label_of:
            return f"unknown category_id {ann.get('category_id')} (categories: {sorted(label_of)})"
        if w <= 0 or h <= 0:
            return f"bbox has zero or negative size: {bbox!r}"
        tol_x, tol_y = 0.01 * width, 0.01 * height
        if x < -tol_x or y < -tol_y or x + w > width + tol_x or y + h > height + tol_y:
            return f"bbox {bbox!r} lies outside the {width}x{height} image"
        if max(x + w, y + h) <= 1.0 + 1e-6 and min(width, height) > 16:
            return f"bbox {bbox!r} looks normalized: COCO boxes are absolute pixels [x, y, width, height]"
        x1, y1 = max(x, 0.0), max(y, 0.0)
        if min(x + w, width) - x1 <= 0 or min(y + h, height) - y1 <= 0:
            return "bbox has no area inside the image"
        return None
