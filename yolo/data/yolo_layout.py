"""The YOLO txt layout: finding a split's images and their label files, and checking them all once (:func:`scan_yolo`).

``.../images/<split>/name.jpg`` with ``.../labels/<split>/name.txt`` beside it (the last ``images`` folder of the
path becomes ``labels``; Darknet's ``JPEGImages`` works too; a ``name.txt`` next to the image is the fallback),
each line ``class cx cy w h`` normalized to 0..1. A split is a folder of images or a list file with one image path
per line (Darknet's train.txt). The scan's results are cached per file (:mod:`yolo.data.cache`).
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo.data.cache import LabelCache, fallback_path
from yolo.data.cache_entries import valid_entry
from yolo.data.image_record import ImageRecord, PathLike
from yolo.data.scan_files import check_images, images_under, transient_reason
from yolo.data.validation import MAX_LABEL_FILE_BYTES, Problem, ValidationReport, read_label_file
from yolo.errors import DataError, shown
from yolo.files.images import DATASET_IMAGE_SUFFIXES

logger = logging.getLogger(__name__)

# The longest line of a list file read (a path is at most 4,096 bytes on Linux).
MAX_LIST_LINE = 1 << 16


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
