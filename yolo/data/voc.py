"""Pascal VOC datasets: ``Annotations/*.xml``, ``ImageSets/Main/<split>.txt`` and ``JPEGImages/``.

A split is the file ``ROOT/ImageSets/Main/<split>.txt`` (one image id a line); image ``ID`` is
``ROOT/JPEGImages/ID.jpg`` (or another image suffix) and its boxes are in ``ROOT/Annotations/ID.xml``::

    <annotation>
      <size><width>500</width><height>375</height><depth>3</depth></size>
      <object>
        <name>dog</name>
        <difficult>0</difficult>
        <bndbox><xmin>48</xmin><ymin>240</ymin><xmax>195</xmax><ymax>371</ymax></bndbox>
      </object>
    </annotation>

The boxes are read as Darknet's ``scripts/voc_label.py`` converts them (and ultralytics' VOC.yaml after it): VOC
pixels count from 1, so the box moves 1 pixel to 0-based pixels on both corners (centre ``(xmin + xmax) / 2 - 1``,
width ``xmax - xmin``); an object marked ``<difficult>1</difficult>`` is skipped, as ``voc_label.py`` skips it (a
missing tag is 0); an object whose name is not among the dataset's names is skipped and reported (``voc_label.py``
skips those without a word). :func:`voc_xml` writes the same convention back (corners + 1, rounded to whole pixels).

The XML is read with the standard library's parser: it resolves no external entity, and the Expat it bundles
(2.4.1 and later) refuses entity-expansion bombs.
"""
from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo.data.dataset import DetectionDataset
from yolo.data.image_record import ImageRecord
from yolo.data.validation import Problem, ValidationReport
from yolo.errors import DataError, shown
from yolo.files.images import DATASET_IMAGE_SUFFIXES, image_file_size
from yolo.ops.sizes import SizeLike

logger = logging.getLogger(__name__)

Boxes = np.ndarray  # Float32[N, 4] xyxy, 0-based pixels


def is_voc_split(path) -> bool:
    """Whether ``path`` is a VOC split file: ``ROOT/ImageSets/Main/NAME.txt`` beside ``ROOT/Annotations``."""
    path = Path(path)
    return (path.suffix == ".txt" and path.parent.name == "Main" and path.parent.parent.name == "ImageSets"
            and (voc_root(path) / "Annotations").is_dir())


def voc_root(split_file: Path) -> Path:
    """The VOC folder (``VOC2007``) of a split file ``ROOT/ImageSets/Main/NAME.txt``."""
    return Path(split_file).parent.parent.parent


def _number(element: ET.Element, tag: str, path: Path, what: str) -> float:
    child = element.find(tag)
    text = child.text.strip() if child is not None and child.text else ""
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{what}: <{tag}> must be a number, got {shown(repr(text), 40)}", path) from None
    if not np.isfinite(value):
        raise DataError(f"{what}: <{tag}> must be a finite number, got {shown(repr(text), 40)}", path)
    return value


def read_voc_annotation(path: Path, names: Sequence[str]) -> Tuple[Tuple[int, int], Boxes, np.ndarray, List[Problem]]:
    """``((height, width), boxes, labels, problems)`` of the VOC XML ``path``: the ``<size>`` it records, each
    kept object's box (xyxy, 0-based pixels: ``voc_label.py``'s conversion) and its index in ``names``; the
    skipped objects of unknown classes as problems. A file that is not VOC XML is a :class:`DataError` naming it
    (and the line, for malformed XML)."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise DataError(f"not valid XML: {shown(str(exc), 80)}", path, exc.position[0]) from None
    except OSError as exc:
        raise DataError(f"cannot read it: {exc.strerror}", path) from None
    if root.tag != "annotation":
        raise DataError(f"not a VOC annotation (its root element is <{shown(root.tag, 40)}>, not <annotation>)", path)
    size = root.find("size")  # a record only: the image's own size is what the boxes are checked against
    hw = (0, 0) if size is None or size.find("width") is None or size.find("height") is None else (
        int(_number(size, "height", path, "<size>")), int(_number(size, "width", path, "<size>")))
    boxes, labels, problems = [], [], []
    index = {name: i for i, name in enumerate(names)}
    for number, obj in enumerate(root.findall("object"), start=1):
        what = f"object {number}"
        name = (obj.findtext("name") or "").strip()
        difficult = (obj.findtext("difficult") or "0").strip()
        if difficult not in ("0", "1"):
            raise DataError(f"{what}: <difficult> must be 0 or 1, got {shown(repr(difficult), 40)}", path)
        if difficult == "1":  # voc_label.py: `if cls not in classes or int(difficult) == 1: continue`
            continue
        if name not in index:
            problems.append(Problem(str(path), f"{what}: class {shown(repr(name), 40)} is not in the dataset's names "
                                    "(skipped)", None, "box", "unknown_name"))
            continue
        bndbox = obj.find("bndbox")
        if bndbox is None:
            raise DataError(f"{what} ({shown(name, 40)}) has no <bndbox>", path)
        xmin, ymin, xmax, ymax = (_number(bndbox, tag, path, what) for tag in ("xmin", "ymin", "xmax", "ymax"))
        if xmax <= xmin or ymax <= ymin:
            problems.append(Problem(str(path), f"{what}: an empty box (xmin {xmin:g} xmax {xmax:g}, ymin {ymin:g} "
                                    f"ymax {ymax:g}; skipped)", None, "box", "malformed"))
            continue
        boxes.append([xmin - 1, ymin - 1, xmax - 1, ymax - 1])  # 1-based VOC pixels -> 0-based, as voc_label.py
        labels.append(index[name])
    return hw, np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(labels, np.int64), problems


def voc_image(root: Path, image_id: str) -> Optional[Path]:
    """``ROOT/JPEGImages/<image_id>.jpg``, or the first other image suffix that exists; None when none does."""
    for suffix in (".jpg", *(s for s in DATASET_IMAGE_SUFFIXES if s != ".jpg")):
        candidate = root / "JPEGImages" / f"{image_id}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def read_split_ids(split_file: Path) -> List[Tuple[int, str]]:
    """``(line number, image id)`` of each line of a VOC split file (its first word: ``<class>_<split>.txt``
    lines carry a second one)."""
    try:
        text = split_file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError("not a VOC split file (one image id a line, UTF-8 text)", split_file) from None
    return [(n, line.split()[0]) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def scan_voc(split_file: Path, names: Sequence[str]) -> Tuple[list, ValidationReport]:
    """The usable :class:`yolo.data.dataset.ImageRecord` s of a VOC split and its report: an id without its image
    or an unreadable image is dropped; one without its XML is a background image, as a YOLO image without a label
    file is."""
    split_file = Path(split_file).resolve()
    root = voc_root(split_file)
    ids = read_split_ids(split_file)
    report = ValidationReport(source=str(split_file), num_images=len(ids), num_classes=len(names),
                              expected_labels_at=str(root / "Annotations"))
    records, problems = [], []
    for line, image_id in ids:
        image = voc_image(root, image_id)
        if image is None:
            problems.append(Problem(str(split_file), f"image id {shown(image_id, 40)}: no image "
                                    f"JPEGImages/{shown(image_id, 40)}.jpg", line, "image", "missing_image"))
            continue
        shape, reason = image_file_size(image)
        if shape is None:
            problems.append(Problem(str(image), reason, None, "image", "bad_image"))
            continue
        xml = root / "Annotations" / f"{image_id}.xml"
        boxes, labels = np.zeros((0, 4), np.float32), np.zeros(0, np.int64)
        if xml.is_file():
            report.num_label_files += 1
            _, boxes, labels, xml_problems = read_voc_annotation(xml, names)
            problems += xml_problems
            # inside the image, as Darknet's loader constrains each box (0-based xmin 0 of VOC's 1-based 0 -> -1)
            boxes[:, 0::2] = boxes[:, 0::2].clip(0, shape[1])
            boxes[:, 1::2] = boxes[:, 1::2].clip(0, shape[0])
            inside = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
            if not inside.all():
                problems.append(Problem(str(xml), f"{int((~inside).sum())} box(es) outside the image (skipped)", None,
                                        "box", "outside"))
                boxes, labels = boxes[inside], labels[inside]
        records.append(ImageRecord(str(image), int(shape[0]), int(shape[1]), boxes, labels,
                                   image_id=len(records)))
    report.problems = problems
    report.num_kept_images = len(records)
    report.num_background = sum(1 for r in records if len(r.labels) == 0)
    report.num_boxes = int(sum(len(r.labels) for r in records))
    return records, report


class VocDataset(DetectionDataset):
    """A Pascal VOC split (``ROOT/ImageSets/Main/<split>.txt``), validated on construction (:func:`scan_voc`);
    the arguments are :class:`yolo.data.dataset.YoloDataset`'s. Raises :class:`DataError` when no image has a
    usable box (unless ``allow_empty``)."""

    def __init__(self, split_file, names: Sequence[str], img_size: SizeLike = 416, augment: bool = False,
                 hyp: Optional[Dict[str, Any]] = None, seed: int = 0, allow_empty: bool = False):
        records, report = scan_voc(Path(split_file), names)
        report.log(logger)
        if not allow_empty:
            report.raise_if_unusable()
        super().__init__(records, names, img_size, augment, hyp, seed, report, str(split_file))
        self.root = voc_root(Path(split_file).resolve())

    def annotation_file(self, record: ImageRecord) -> Path:
        """The VOC XML of ``record`` (``ROOT/Annotations/ID.xml``; it may not exist: a background image)."""
        return self.root / "Annotations" / f"{Path(record.path).stem}.xml"


def voc_xml(file_name: str, hw: Tuple[int, int], boxes: Boxes, labels: np.ndarray, names: Sequence[str]) -> str:
    """The VOC XML of one image (``hw`` its height and width) with its xyxy 0-based ``boxes``: corners + 1, rounded
    to whole pixels, the inverse of :func:`read_voc_annotation`; every object ``<difficult>0``."""
    annotation = ET.Element("annotation")
    ET.SubElement(annotation, "filename").text = file_name
    size = ET.SubElement(annotation, "size")
    for tag, value in (("width", hw[1]), ("height", hw[0]), ("depth", 3)):
        ET.SubElement(size, tag).text = str(int(value))
    for box, label in zip(np.asarray(boxes, np.float64).reshape(-1, 4), labels):
        obj = ET.SubElement(annotation, "object")
        ET.SubElement(obj, "name").text = names[int(label)]
        ET.SubElement(obj, "difficult").text = "0"
        bndbox = ET.SubElement(obj, "bndbox")
        for tag, value in zip(("xmin", "ymin", "xmax", "ymax"), box):
            ET.SubElement(bndbox, tag).text = str(int(round(value + 1)))
    ET.indent(annotation)
    return ET.tostring(annotation, encoding="unicode") + "\n"


__all__ = ["VocDataset", "is_voc_split", "read_split_ids", "read_voc_annotation", "scan_voc", "voc_image", "voc_root", "voc_xml"]
