"""``evaluate_model``: a detector over a data loader into an :class:`~yolo.evaluation.Evaluator`.

The one evaluation loop, shared by ``yolo-eval`` (:mod:`yolo.cli.eval`) and the trainer, in the manner
of detectron2's ``inference_on_dataset``: reset the evaluator, feed it every batch, return its metrics.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from tqdm import tqdm

from yolo.data.loader import shut_down_workers
from yolo.evaluation.darknet_evaluator import DarknetMapEvaluator, check_darknet_map_model
from yolo.evaluation.evaluator import Evaluator
from yolo.inference.postprocess import PostprocessOptions, postprocess, warn_if_not_finite
from yolo.ops.letterbox import LetterboxInfo
from yolo.ops.pixels import images_to_float
from yolo.ops.postprocess_defaults import EVAL_CONF_THRES, EVAL_IOU_THRES, MAX_DET
from yolo.progress import ProgressLines

logger = logging.getLogger(__name__)

__all__ = ["EvaluationStopped", "evaluate_model"]


class EvaluationStopped(Exception):
    """:func:`evaluate_model` was asked to stop (its ``stop`` returned True) before the last batch: there are no
    metrics."""


def _placements(infos: Sequence[Mapping[str, Any]]) -> Tuple[List[LetterboxInfo], List[Tuple[int, int]]]:
    """Each image's ``letterbox`` placement and ``orig_shape`` (the data pipeline's info keys,
    :mod:`yolo.data.dataset`)."""
    if any(info.get("letterbox") is None for info in infos):
        raise ValueError("each batch info needs the original 'orig_shape' and the 'letterbox' "
                         "placement: evaluate on a dataset built with augment=False")
    return [info["letterbox"] for info in infos], [tuple(info["orig_shape"]) for info in infos]


def _length(loader: Iterable) -> Optional[int]:
    """The number of batches of ``loader``, None when it has no length."""
    try:
        return len(loader)  # type: ignore[arg-type]
    except TypeError:
        return None


def _sync(device: torch.device) -> None:
    """Wait for the device, so that the wall-clock timings measure finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate_model(
    model: torch.nn.Module,
    loader: Iterable,
    evaluator: Evaluator,
    conf_thres: float = EVAL_CONF_THRES,
    iou_thres: float = EVAL_IOU_THRES,
    device: Union[str, torch.device, None] = None,
    max_det: int = MAX_DET,
    multi_label: bool = True,
    amp: bool = False,
    progress: bool = True,
    desc: str = "evaluating",
    stop: Optional[Callable[[], bool]] = None,
    darknet_map: Optional[DarknetMapEvaluator] = None,
) -> Dict[str, Any]:
    """Run ``model`` over ``loader``, feed ``evaluator`` and return its metrics plus ``speed_ms``.

    Args:
        model: a detector whose eval-mode forward maps ``Float[B, 3, H, W]`` (RGB 0..1) to
            ``Float[B, N, 5 + C]`` (cx, cy, w, h input pixels, objectness, class probabilities).
            Its train/eval mode is restored afterwards.
        loader: yields ``(images, targets, infos)``: images ``uint8`` or float ``[B, 3, H, W]``;
            ``infos[i]`` (a dict, as :mod:`yolo.data.dataset` makes it) gives ``image_id``, the original
            ``orig_shape`` ``(h, w)`` and the ``letterbox`` :class:`yolo.ops.letterbox.LetterboxInfo` placement.
        evaluator: reset here, then fed every batch (boxes xyxy original-image pixels).
        conf_thres, iou_thres, max_det, multi_label: the :class:`~yolo.inference.postprocess.PostprocessOptions`
            of :func:`yolo.inference.postprocess.postprocess`, the ``Detector``'s post-processing (the
            defaults are evaluation's, :mod:`yolo.ops.postprocess_defaults`: every class above 0.001 per box,
            NMS IoU 0.6, 300 per image).
        amp: autocast the forward pass (CUDA only).
        stop: asked before each batch; when it returns True the evaluation ends with :class:`EvaluationStopped`
            (a training run told to stop: within one batch, not after the whole split).
        darknet_map: also fed every batch, from the same forward passes, with Darknet's own detections
            (:class:`~yolo.evaluation.darknet_evaluator.DarknetMapEvaluator`: its thresholds, not ``conf_thres``
            / ``iou_thres``); its report is added as ``darknet_map``.

    Returns:
        :meth:`Evaluator.evaluate`'s dict plus ``speed_ms`` = ``{"preprocess", "inference", "nms"}``
        milliseconds per image (pre-processing is the wait for the loader plus the copy to the device; "nms"
        includes Darknet's post-processing with ``darknet_map``) and, with ``darknet_map``, ``darknet_map``
        (:meth:`~yolo.evaluation.darknet_map.DarknetMapReport.as_dict`).
    """
    # The Detector's post-processing (yolo.inference.postprocess.postprocess) at COCO's settings, with
    # Darknet's own NMS variant for the cfg (its last [yolo]'s nms_kind / beta_nms) and, with a [Gaussian_yolo]
    # head, Darknet's score for rows that end with four uncertainties.
    settings = PostprocessOptions.for_model(model, conf_thres=conf_thres, iou_thres=iou_thres, multi_label=multi_label,
                                           max_det=max_det)
    if darknet_map is not None:
        check_darknet_map_model(model)
        darknet_map.reset()
    if device is None:
        device = next(model.parameters()).device
    device = torch.device(device)
    was_training = model.training
    model.eval()
    evaluator.reset()
    times = {"preprocess": 0.0, "inference": 0.0, "nms": 0.0}
    num_images = 0
    batches_in = iter(loader)  # kept to end its loader workers at once if the evaluation fails
    bar = tqdm(batches_in, total=_length(loader), desc=desc, disable=not progress, leave=False)
    lines = ProgressLines(f"{desc} (batches)", _length(loader), not progress, logger)  # lines when no bar
    batches = 0
    it = iter(bar)
    try:
        with torch.inference_mode():
            while True:
                if stop is not None and stop():
                    raise EvaluationStopped(f"{desc}: stopped after {batches} batch(es)")
                t0 = time.perf_counter()
                try:
                    images, _targets, infos = next(it)
                except StopIteration:
                    break
                images = images.to(device, non_blocking=True)
                images = images_to_float(images)
                _sync(device)
                t1 = time.perf_counter()
                with torch.autocast(device_type=device.type, enabled=amp and device.type == "cuda"):
                    preds = model(images)
                if isinstance(preds, (list, tuple)):
                    raise TypeError("the model returned raw head maps: is it an eval-mode Darknet detector?")
                _sync(device)
                t2 = time.perf_counter()
                if batches == 0:  # once: the check waits for the device
                    warn_if_not_finite(preds, desc)
                placements, shapes = _placements(infos)
                image_ids = [info["image_id"] for info in infos]
                evaluator.process(image_ids, postprocess(preds, settings, placements, shapes))
                if darknet_map is not None:
                    darknet_map.process(image_ids, preds, placements, shapes, tuple(images.shape[-2:]), model)
                t3 = time.perf_counter()
                times["preprocess"] += t1 - t0
                times["inference"] += t2 - t1
                times["nms"] += t3 - t2
                num_images += len(image_ids)
                batches += 1
                lines.update(batches, f"{num_images} images")
    except BaseException:
        # The exception's traceback holds the iterator: freed only by a later garbage collection, which would wait
        # 5 s for each worker. A caller that keeps the exception keeps no worker process running.
        shut_down_workers(batches_in)
        raise
    finally:
        bar.close()
        model.train(was_training)
    if batches == 0:  # else every ground-truth image would be scored as one with nothing detected
        raise ValueError(f"{desc}: the loader yielded no batches: nothing to evaluate")
    metrics = evaluator.evaluate()
    if darknet_map is not None:
        metrics["darknet_map"] = darknet_map.evaluate().as_dict()
    metrics["speed_ms"] = {k: 1000.0 * v / max(num_images, 1) for k, v in times.items()}
    return metrics
