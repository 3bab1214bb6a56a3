"""The :class:`Evaluator`: COCO detection metrics over one dataset split (reset / process / evaluate).

    evaluator = Evaluator(names, dataset.ground_truth())
    evaluator.reset()
    evaluator.process(image_ids, detections)   # per batch, boxes xyxy in original-image pixels
    metrics = evaluator.evaluate()             # {"mAP50", "mAP50_95", ..., "per_class": {...}}

Inside the package classes are contiguous indices ``0..C-1`` and boxes are xyxy pixels; the COCO side
(category ids, corner ``xywh`` boxes) is :mod:`yolo.ops.coco`. The numbers are pycocotools'
``COCOeval`` (or :class:`~yolo.evaluation.fast_cocoeval.FastCOCOeval`, its vectorized subclass, for
quick per-epoch checks); :mod:`yolo.evaluation.metrics` reads the per-class values from it.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from pycocotools.coco import COCO

from yolo.evaluation import report
from yolo.evaluation.confusion import confusion_matrix
from yolo.evaluation.inputs import (box_array, check_finite_detections, checked_ground_truth, flat_array,
                                    require_keys)
from yolo.evaluation.metrics import (COCO_STAT_NAMES, area_all_stats, coco_ground_truth, per_class_ap,
                                     precision_recall_at_confidence, run_cocoeval)
from yolo.ops.coco import (ImageId, coco_category_ids, detections_to_coco_results, ground_truth_to_coco,
                           xyxy_to_coco_xywh)
from yolo.ops.postprocess_defaults import CONFUSION_MATCH_IOU, DETECT_CONF_THRES

logger = logging.getLogger(__name__)

__all__ = ["Evaluator"]

Detections = Mapping[str, torch.Tensor]
GroundTruthArrays = Tuple[np.ndarray, np.ndarray]  # (boxes float64[G, 4] COCO xywh, labels int64[G])
DetectionArrays = Tuple[np.ndarray, np.ndarray, np.ndarray]  # (boxes [D, 4] COCO xywh, scores [D], labels [D])


class Evaluator:
    """COCO detection metrics over one dataset split (reset / process / evaluate).

    Args:
        names: class names; the contiguous label ``i`` is ``names[i]``.
        ground_truth: one dict per image: ``image_id``, ``file_name``, ``height``, ``width``,
            ``boxes`` ``Float[K, 4]`` xyxy original pixels, ``labels`` ``Int64[K]`` (``dataset.ground_truth()``).
        category_ids: COCO category id per class (default :func:`~yolo.ops.coco.coco_category_ids`).
        use_pycocotools: score with pycocotools' stock ``COCOeval`` (the reference, every area range).
            When False, :class:`~yolo.evaluation.fast_cocoeval.FastCOCOeval` gives the same ``mAP50`` /
            ``mAP50_95`` / ``mAP75`` / ``AR100`` faster, without the area breakdown.
        conf_thres_confusion, iou_thres_confusion: operating point of the confusion matrix.
        annotation_file: for a COCO-format split, its JSON: COCOeval then scores against the original
            annotations (crowd regions ignored as COCO does) instead of ``ground_truth``. Image ids and
            ``category_ids`` must then be the file's.

    Image ids are passed as the dataset gives them. COCO needs integers: when some id is not an
    integer (a file stem), every image gets ``1..N`` in ground-truth order instead, and the results
    JSON and :attr:`coco_gt_dict` (which keeps each ``file_name``) use those.
    """

    def __init__(
        self,
        names: Sequence[str],
        ground_truth: Iterable[Mapping[str, Any]],
        category_ids: Optional[Sequence[int]] = None,
        use_pycocotools: bool = True,
        conf_thres_confusion: float = DETECT_CONF_THRES,
        iou_thres_confusion: float = CONFUSION_MATCH_IOU,
        annotation_file: Union[str, Path, None] = None,
    ):
        self.names = [str(n) for n in names]
        self.num_classes = len(self.names)
        self.category_ids = list(category_ids) if category_ids is not None else coco_category_ids(self.names)
        if len(self.category_ids) != self.num_classes:
            raise ValueError(f"{len(self.category_ids)} category ids for {self.num_classes} class names")
        self.use_pycocotools = use_pycocotools
        self.conf_thres_confusion = conf_thres_confusion
        self.iou_thres_confusion = iou_thres_confusion
        self.annotation_file = Path(annotation_file) if annotation_file is not None else None

        gt_list = [checked_ground_truth(g, n, self.num_classes) for n, g in enumerate(ground_truth)]
        raw_ids = [g["image_id"] for g in gt_list]
        if len(set(raw_ids)) != len(raw_ids):
            raise ValueError("ground truth lists an image id twice")
        integer_ids = all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in raw_ids)
        self._coco_id = {i: (int(i) if integer_ids else n + 1) for n, i in enumerate(raw_ids)}
        self._gt: Dict[int, GroundTruthArrays] = {}
        coco_gt_input = []
        for g in gt_list:
            cid = self._coco_id[g["image_id"]]
            self._gt[cid] = (xyxy_to_coco_xywh(g["boxes"]), g["labels"])
            coco_gt_input.append({**g, "image_id": cid})
        self.coco_gt_dict = ground_truth_to_coco(coco_gt_input, self.names, self.category_ids)
        self._coco_gt: Optional[COCO] = None  # built on the first evaluate()
        self.results: Dict[str, Any] = {}  # arrays of the last evaluate(): curves, confusion matrix
        self.reset()

    # ---------------------------------------------------------------- protocol
    def reset(self) -> None:
        """Forget every processed detection."""
        self._dt: Dict[int, DetectionArrays] = {}
        self.results = {}

    def process(self, image_ids: Sequence[ImageId], detections: Sequence[Detections]) -> None:
        """Record one batch: ``detections[i]`` (``boxes`` ``Float[K, 4]`` xyxy original-image pixels,
        ``scores`` ``Float[K]``, ``labels`` ``Int64[K]``) belongs to ``image_ids[i]``."""
        if len(image_ids) != len(detections):
            raise ValueError(f"{len(image_ids)} image ids for {len(detections)} detection dicts")
        batch = [self._detection_arrays(image_id, det) for image_id, det in zip(image_ids, detections)]
        check_finite_detections(batch)  # the whole batch in one test; nothing is recorded when it fails
        for image_id, cid, boxes, scores, labels in batch:
            self._dt[cid] = (xyxy_to_coco_xywh(boxes), scores, labels)

    def _detection_arrays(self, image_id: ImageId, det: Detections
                          ) -> Tuple[ImageId, int, np.ndarray, np.ndarray, np.ndarray]:
        """One image's detections checked: ``(image id, COCO id, boxes float64[K, 4] xyxy, scores float64[K],
        labels int64[K])``; a ValueError naming the image for a missing key, a wrong shape or a bad label."""
        if isinstance(image_id, torch.Tensor):
            image_id = image_id.item()
        cid = self._coco_id.get(image_id)
        if cid is None:
            raise KeyError(f"image id {image_id!r} is not in the ground truth")
        where = f"image {image_id!r}: detections"
        require_keys(det, ("boxes", "scores", "labels"), where)
        boxes = box_array(det["boxes"], where)
        labels = flat_array(det["labels"], np.int64, where, "labels")
        # Scores go through float32 -> Python float exactly as in the results JSON.
        scores = flat_array(det["scores"], np.float32, where, "scores").astype(np.float64)
        if not len(boxes) == len(scores) == len(labels):
            raise ValueError(f"{where} hold {len(boxes)} boxes, {len(scores)} scores and {len(labels)} labels: "
                             "each needs boxes Float[K, 4], scores [K] and labels [K]")
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise ValueError(f"image {image_id!r}: detection label outside 0..{self.num_classes - 1}")
        return image_id, cid, boxes, scores, labels

    @property
    def num_processed(self) -> int:
        return len(self._dt)

    def state(self) -> Dict[int, DetectionArrays]:
        """The processed detections (picklable), e.g. for ``torch.distributed.all_gather_object``."""
        return dict(self._dt)

    def merge(self, states: Iterable[Mapping[int, DetectionArrays]]) -> None:
        """Add detections recorded by other evaluators (other processes) from their :meth:`state`."""
        for state in states:
            self._dt.update(state)

    def _evaluated_ids(self) -> List[int]:
        """The images scored: those processed (all ground-truth images when none was processed)."""
        ids = sorted(self._dt) if self._dt else sorted(self._gt)
        if self._dt and len(ids) < len(self._gt):
            logger.info("evaluating %d of %d ground-truth images (only those processed)", len(ids), len(self._gt))
        return ids

    def results_json(self) -> List[Dict[str, Any]]:
        """COCO results entries ``{image_id, category_id, bbox [x, y, w, h] original pixels, score}``."""
        out: List[Dict[str, Any]] = []
        for cid in sorted(self._dt):
            boxes, scores, labels = self._dt[cid]
            out.extend(detections_to_coco_results(cid, boxes, scores, labels, self.category_ids))
        return out

    def save_results_json(self, path: Union[str, Path]) -> Path:
        """Write :meth:`results_json` to ``path``; returns it."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.results_json()))
        return path

    def _coco_ground_truth(self) -> COCO:
        """The COCO ground truth scored against: the annotation file when given, else :attr:`coco_gt_dict`."""
        if self._coco_gt is None:
            self._coco_gt = (COCO(str(self.annotation_file)) if self.annotation_file is not None
                             else coco_ground_truth(self.coco_gt_dict))
        return self._coco_gt

    def evaluate(self, use_pycocotools: Optional[bool] = None) -> Dict[str, Any]:
        """Score the processed detections.

        Returns a JSON-ready dict: ``mAP50``, ``mAP50_95``, ``mAP75``, ``AP_small``, ``AP_medium``,
        ``AP_large``, ``AR1``, ``AR10``, ``AR100``, ``AR_small``, ``AR_medium``, ``AR_large`` (fractions
        0..1; -1 where COCO leaves a value undefined, e.g. no small objects), ``precision``/``recall``
        (mean over classes at ``conf``, the confidence of best mean F1, IoU 0.5), ``per_class``
        ``{name: {images, instances, P, R, AP50, AP}}`` for classes with ground truth, ``num_images``,
        ``num_detections`` and ``source`` (``"pycocotools"`` or ``"fast"``). The fast path fills the
        area-range entries with -1. Arrays for plots are kept in :attr:`results`.
        """
        reference = self.use_pycocotools if use_pycocotools is None else use_pycocotools
        self.results = {}
        ids = self._evaluated_ids()
        empty_dt = (np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=np.int64))
        gts = [self._gt[i] for i in ids]
        dts = [self._dt.get(i, empty_dt) for i in ids]
        num_det = int(sum(len(d[1]) for d in dts))

        num_gt, num_images = _class_counts(gts, self.num_classes)
        has_gt = num_gt > 0
        coco_eval, coco_summary = run_cocoeval(self._coco_ground_truth(), self.results_json(), ids,
                                               fast=not reference)
        if not reference:
            stats = area_all_stats(coco_eval)
        elif num_det == 0 and has_gt.any():  # COCO's summary would mix 0 and -1: nothing detected is 0 everywhere
            logger.warning("no detections: every AP and AR is 0")
            stats = {name: 0.0 for name in COCO_STAT_NAMES}
            coco_summary = ""
        else:
            stats = {name: float(v) for name, v in zip(COCO_STAT_NAMES, coco_eval.stats)}
        per_class_arrays = per_class_ap(coco_eval, self.category_ids)
        op = precision_recall_at_confidence(coco_eval, self.category_ids)

        per_class = {}
        for c in np.flatnonzero(has_gt):
            per_class[self.names[c]] = {
                "images": int(num_images[c]), "instances": int(num_gt[c]),
                "P": float(op["precision"][c]), "R": float(op["recall"][c]),
                "AP50": float(max(per_class_arrays["ap50"][c], 0.0)), "AP": float(max(per_class_arrays["ap"][c], 0.0)),
            }
        metrics: Dict[str, Any] = dict(stats)
        metrics.update({
            "precision": float(op["precision"][has_gt].mean()) if has_gt.any() else 0.0,
            "recall": float(op["recall"][has_gt].mean()) if has_gt.any() else 0.0,
            "conf": op["conf"],
            "num_images": len(ids),
            "num_instances": int(num_gt.sum()),
            "num_detections": num_det,
            "source": "pycocotools" if reference else "fast",
            "per_class": per_class,
        })
        if not has_gt.any():
            # Without a box no AP or AR is defined (COCO's -1, with or without detections); training's fitness
            # and the class table read -1 as 0.
            logger.warning("the ground truth holds no boxes: every AP and AR is undefined (-1)")
        pr_curves = per_class_arrays["pr_curves"]
        self.results.update({
            "recall_thresholds": np.asarray(coco_eval.params.recThrs).copy(),
            "pr_curves": np.where(pr_curves > -1, pr_curves, np.nan),  # [R, C], NaN for classes without GT
            "ap50_per_class": per_class_arrays["ap50"],
            "confusion_matrix": confusion_matrix(gts, dts, self.num_classes, self.conf_thres_confusion,
                                                 self.iou_thres_confusion),
            "metrics": metrics,
        })
        if coco_summary:
            self.results["coco_summary"] = coco_summary
        return metrics

    # ---------------------------------------------------------------- reports (yolo.evaluation.report)
    def _last(self, what: str) -> Dict[str, Any]:
        if "metrics" not in self.results:
            raise RuntimeError(f"call evaluate() before {what}()")
        return self.results["metrics"]

    def class_table(self, metrics: Optional[Mapping[str, Any]] = None) -> str:
        """The per-class table (images, instances, P, R, AP50, AP) with an ``all`` row first."""
        return report.class_table(metrics if metrics is not None else self._last("class_table"))

    def summary_text(self, metrics: Optional[Mapping[str, Any]] = None) -> str:
        """COCO's 12-line summary (pycocotools' own text when it ran) followed by the class table."""
        metrics = metrics if metrics is not None else self._last("summary_text")
        return report.summary_text(metrics, self.results.get("coco_summary"))

    def figures(self) -> Dict[str, Any]:
        """Matplotlib figures of the last :meth:`evaluate`: ``pr_curves``, ``pr_curves_per_class``,
        ``confusion_matrix`` (see :func:`yolo.evaluation.report.figures`)."""
        self._last("figures")
        return report.figures(self.results, self.names, self.conf_thres_confusion, self.iou_thres_confusion)

    def save_plots(self, save_dir: Union[str, Path]) -> List[Path]:
        """Write ``pr_curves.png``, ``pr_curves_per_class.png`` and ``confusion_matrix.png`` into ``save_dir``."""
        return report.save_plots(self.figures(), save_dir)

    def write_tensorboard(self, writer, step: int, prefix: str = "val", plots: bool = True) -> None:
        """Log the last metrics to a ``torch.utils.tensorboard.SummaryWriter``: the COCO scalars,
        precision/recall, per-class AP50 and (with ``plots``) the figures of :meth:`figures`."""
        metrics = self._last("write_tensorboard")
        report.write_tensorboard(writer, metrics, step, prefix, self.figures() if plots else None)

    def save_metrics(self, path: Union[str, Path], extra: Optional[Mapping[str, Any]] = None) -> Path:
        """Write the last metrics (plus ``extra`` entries) as JSON; returns the path."""
        return report.save_metrics(self._last("save_metrics"), path, extra)


def _class_counts(gts: Sequence[GroundTruthArrays], num_classes: int) -> Tuple[np.ndarray, np.ndarray]:
    """Per class, the ground-truth boxes and the images holding at least one: two ``int64[C]``."""
    num_gt = np.zeros(num_classes, dtype=np.int64)
    num_images = np.zeros(num_classes, dtype=np.int64)
    for _, labels in gts:
        count = np.bincount(labels, minlength=num_classes)
        num_gt += count
        num_images += count > 0
    return num_gt, num_images
