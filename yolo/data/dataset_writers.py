"""Writing a dataset in another layout: YOLO txt, COCO JSON or Pascal VOC XML (``tools/convert_dataset.py``).

The splits are read by the datasets that train on them (:func:`yolo.data.splits.build_dataset`: a YOLO folder or
list, a COCO JSON through pycocotools, a VOC split through :mod:`yolo.data.voc`, a Darknet ``.data``), so the
converted boxes are the ones training would see: each record's xyxy boxes in original-image pixels. Into a new
(or empty) folder go a copy of every image, its labels in the chosen layout and a ``data.yaml`` that reads them:

- ``yolo``: ``images/<split>/NAME``, ``labels/<split>/STEM.txt`` (``class cx cy w h``, normalized);
- ``coco``: ``images/<split>/NAME``, ``annotations/<split>.json`` (``bbox`` ``[x, y, w, h]`` pixels; category ids
  1..C in the order of the names; image ids 1..N);
- ``voc``: ``JPEGImages/STEM.ext``, ``Annotations/STEM.xml`` (:func:`yolo.data.voc.voc_xml`: whole pixels, 1-based
  as ``voc_label.py`` reads them back), ``ImageSets/Main/<split>.txt``.

Two images of a folder with one stem get ``STEM_2``, ... (in VOC's one ``JPEGImages``, an image two splits list with
the same boxes is copied once). Difficult VOC objects are not converted (the VOC reader skips them, as Darknet's
``voc_label.py`` does), nor are COCO's crowd annotations (training skips them too).

supervision's ``DetectionDataset``, which reads and writes all three layouts, is not used: it keeps VOC's difficult
objects, reads VOC boxes in the devkit's inclusive convention (a pixel wider than ``voc_label.py``'s), reads YOLO
label lines otherwise than Darknet's ``fscanf`` (which the YOLO reader here follows, line by line), names no file
in its errors, and brings PyAV (FFmpeg, about 100 MB) with it. The COCO side is pycocotools', as for training.
"""
from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
import yaml

from yolo.data.dataset import DetectionDataset
from yolo.data.image_record import ImageRecord
from yolo.data.voc import voc_xml
from yolo.errors import DataError
from yolo.files.atomic import write_text_atomic

FORMATS = ("yolo", "coco", "voc")


def prepare_output(folder: Path) -> Path:
    """``folder`` created, or an existing empty one: nothing the user has is written over."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise DataError("the output folder exists and is not empty: name a new folder", folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def _unique_name(path: str, used_stems: set) -> str:
    """The file name of ``path``, or ``STEM_2.ext``, ... when an earlier image of the folder took its stem
    (``used_stems``, lower case: the stem names its label file, so ``a.jpg`` and ``a.png`` need two)."""
    stem, suffix = Path(path).stem, Path(path).suffix
    candidate, i = stem, 1
    while candidate.lower() in used_stems:
        i += 1
        candidate = f"{stem}_{i}"
    return candidate + suffix


def _same_image(a: ImageRecord, b: ImageRecord) -> bool:
    """Whether two records are one image with one annotation (a VOC id listed in two splits)."""
    return (np.array_equal(a.boxes, b.boxes) and np.array_equal(a.labels, b.labels)
            and filecmp.cmp(a.path, b.path, shallow=False))


def _copy_images(records: Sequence[ImageRecord], folder: Path, copied: Dict[str, Tuple[ImageRecord, Path]]
                 ) -> List[Path]:
    """Copy each record's image into ``folder`` under a name no other image of it has; ``copied`` (name -> the
    record and its copy, shared by the splits written into one folder) lets a split reuse the copy of the same
    image with the same boxes that an earlier split made."""
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for record in records:
        earlier = copied.get(Path(record.path).name.lower())
        if earlier is not None and _same_image(earlier[0], record):
            copies.append(earlier[1])
            continue
        target = folder / _unique_name(record.path, {Path(n).stem for n in copied})
        shutil.copy2(record.path, target)
        copied.setdefault(Path(record.path).name.lower(), (record, target))
        copied.setdefault(target.name.lower(), (record, target))
        copies.append(target)
    return copies


def yolo_lines(record: ImageRecord) -> str:
    """``class cx cy w h`` lines of a record (normalized to its image size, 6 decimals)."""
    boxes = np.asarray(record.boxes, np.float64).reshape(-1, 4)
    lines = []
    for (x1, y1, x2, y2), label in zip(boxes, record.labels):
        cx, cy = (x1 + x2) / 2 / record.width, (y1 + y2) / 2 / record.height
        w, h = (x2 - x1) / record.width, (y2 - y1) / record.height
        lines.append(f"{int(label)} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}\n")
    return "".join(lines)


def coco_json(records: Sequence[ImageRecord], file_names: Sequence[str], names: Sequence[str]) -> Dict:
    """A COCO detection dict: images 1..N, categories 1..C named ``names``, one annotation per box."""
    images, annotations = [], []
    for image_id, (record, file_name) in enumerate(zip(records, file_names), start=1):
        images.append({"id": image_id, "file_name": file_name, "width": record.width, "height": record.height})
        for (x1, y1, x2, y2), label in zip(np.asarray(record.boxes, np.float64).reshape(-1, 4), record.labels):
            w, h = x2 - x1, y2 - y1
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": int(label) + 1,
                                "bbox": [round(x1, 3), round(y1, 3), round(w, 3), round(h, 3)],
                                "area": round(w * h, 3), "iscrowd": 0})
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(names)]
    return {"images": images, "annotations": annotations, "categories": categories}


def write_split(dataset: DetectionDataset, fmt: str, out: Path, split: str,
                copied: Dict[str, Tuple[ImageRecord, Path]]) -> Dict[str, str]:
    """Write one split of ``dataset`` under ``out`` in ``fmt``; returns its ``data.yaml`` keys (paths relative
    to ``out``). ``copied`` holds the images already in VOC's one image folder (yolo and coco: one a split)."""
    records, names = dataset.records, dataset.names
    if fmt == "yolo":
        copies = _copy_images(records, out / "images" / split, {})
        (out / "labels" / split).mkdir(parents=True, exist_ok=True)
        for record, copy in zip(records, copies):  # images/<split> -> labels/<split>: the YOLO reader's rule
            write_text_atomic(out / "labels" / split / f"{copy.stem}.txt", yolo_lines(record))
        return {split: f"images/{split}"}
    if fmt == "coco":
        copies = _copy_images(records, out / "images" / split, {})
        (out / "annotations").mkdir(exist_ok=True)
        document = coco_json(records, [c.name for c in copies], names)
        write_text_atomic(out / "annotations" / f"{split}.json", json.dumps(document, indent=1))
        return {split: f"annotations/{split}.json", f"{split}_images": f"images/{split}"}
    if fmt == "voc":
        copies = _copy_images(records, out / "JPEGImages", copied)
        (out / "Annotations").mkdir(exist_ok=True)
        for record, copy in zip(records, copies):
            xml = voc_xml(copy.name, (record.height, record.width), record.boxes, record.labels, names)
            write_text_atomic(out / "Annotations" / f"{copy.stem}.xml", xml)
        (out / "ImageSets" / "Main").mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "ImageSets" / "Main" / f"{split}.txt", "".join(f"{c.stem}\n" for c in copies))
        return {split: f"ImageSets/Main/{split}.txt"}
    raise ValueError(f"unknown dataset format {fmt!r} (known: {', '.join(FORMATS)})")


def write_dataset(splits: Sequence[Tuple[str, DetectionDataset]], names: Sequence[str], fmt: str,
                  out: Path) -> Path:
    """Every ``(split name, dataset)`` of ``splits`` in ``fmt`` under the new folder ``out``, and its
    ``data.yaml``; returns the YAML's path. A split given twice (a ``val`` that is the ``train`` list) is written
    once and named by both keys."""
    out = prepare_output(out)
    keys: Dict[str, str] = {}
    written: Dict[str, Dict[str, str]] = {}  # the dataset's source -> the keys its first split wrote
    copied: Dict[str, Tuple[ImageRecord, Path]] = {}  # VOC's one image folder
    for split, dataset in splits:
        if dataset.source in written:  # the same files under this split's keys (train -> val, train_images ...)
            first = next(iter(written[dataset.source]))
            keys.update({split + k[len(first):]: v for k, v in written[dataset.source].items()})
            continue
        written[dataset.source] = write_split(dataset, fmt, out, split, copied)
        keys.update(written[dataset.source])
    config = {"path": ".", **keys, "names": list(names)}
    return write_text_atomic(out / "data.yaml", yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


__all__ = ["FORMATS", "coco_json", "prepare_output", "write_dataset", "write_split", "yolo_lines"]
