"""COCO JSON datasets (:class:`CocoDataset`): a split read through pycocotools, every image and annotation checked
up front."""
from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from pycocotools.coco import COCO

from yolo.data.dataset import DetectionDataset
from yolo.data.image_record import ImageRecord, PathLike
from yolo.data.scan_files import transient_reason
from yolo.data.validation import Problem, ValidationReport
from yolo.errors import DataError
from yolo.files.images import image_file_size
from yolo.ops.sizes import SizeLike

logger = logging.getLogger(__name__)


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
