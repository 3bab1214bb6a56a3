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

The YOLO layout's scan lives in :mod:`yolo.data.yolo_layout`, the COCO JSON dataset in
:mod:`yolo.data.coco_dataset`, Pascal VOC in :mod:`yolo.data.voc`; each makes :class:`ImageRecord` s
(:mod:`yolo.data.image_record`) that :class:`DetectionDataset` turns into items.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from yolo.ops import sizes
from yolo.ops.sizes import ImageSize, SizeLike
from yolo.data.darknet_batched import PendingImage
from yolo.data.image_cache import ImageCache
from yolo.data.image_record import ImageRecord, PathLike, read_image
from yolo.data.augment_hyp import NO_AUGMENT, augment_config
from yolo.data.transforms import (item_rng, matrix_to_letterbox, mosaic_tile, reduced_size, resize_sample, resized_boxes,
                                  train_transform)
from yolo.data.validation import ValidationReport
from yolo.data.yolo_layout import find_label_file, label_path_for, list_images, scan_yolo

logger = logging.getLogger(__name__)

# The record and the YOLO layout's scan are also imported from here (where they were before their own modules).
__all__ = ["DetectionDataset", "YoloDataset", "item_targets", "ImageRecord", "read_image", "scan_yolo",
           "label_path_for", "find_label_file", "list_images"]


class DetectionDataset(Dataset):
    """Items for training or evaluation from a list of :class:`ImageRecord`.

    Args:
        records: the usable images.
        names: class names.
        img_size: network input ``(h, w)`` (or one int); multiples of the model stride.
        augment: training augmentation (:func:`yolo.data.transforms.train_transform`) when True,
            the deterministic :attr:`resize` otherwise.
        hyp: augmentation hyperparameters (:func:`yolo.data.augment_hyp.augment_config`).
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


def item_targets(boxes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """An item's target rows, Float32[N, 6] ``(0, class, cx, cy, w, h)`` (the collate fills in the image index),
    from Float[N, 4] xyxy ``boxes`` in input pixels and Int[N] ``labels``: the centre and size computed as
    ``xyxy_to_cxcywh`` does, in numpy (one item's few boxes cost less there than as tensors)."""
    b = np.asarray(boxes, np.float32).reshape(-1, 4)
    targets = np.zeros((len(labels), 6), np.float32)
    targets[:, 1] = labels
    targets[:, 2:] = np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    return targets


# ---------------------------------------------------------------------------- YOLO layout
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
