"""The detections Darknet's ``detector map`` makes from a network's output, from our model's eval rows.

``validate_detector_map`` (src/detector.c) takes ``get_network_boxes(thresh=.005, hier_thresh=0)`` and then
``do_nms_sort(nms=.45)`` (or ``diounms_sort`` for a cfg's ``nms_kind``), and keeps every class probability left
above zero. Here the same, per image, in Darknet's float32 arithmetic:

* ``get_yolo_detections`` (src/yolo_layer.c): a box is kept when its objectness is above the threshold; each
  class probability ``objectness * p`` is kept when above it too, else 0. Darknet lists the boxes head by head,
  cell by cell, anchor by anchor (our rows are anchor by anchor, then cell: :func:`darknet_row_order`).
* ``correct_yolo_boxes``: the box relative to the original image. For ``letter_box`` Darknet maps back with the
  float half of the padding, ``(x - (netw - new_w) / 2. / netw) / (new_w / netw)``, although ``letterbox_image``
  placed the image at the integer half: followed as it is. ``new_w``/``new_h`` are the size the pre-processing
  resized the image to (the placement's scale), so the map fits whatever pre-processing made the input.
* ``do_nms_sort`` / ``diounms_sort`` (src/box.c): for each class in turn, the boxes sorted by that class's
  probability (a stable sort of the previous order: Darknet's qsort is glibc's merge sort) and greedily suppressed
  (IoU, or DIoU for ``greedynms``/``diounms``, above 0.45). The boxes stay in the order of the last sort, which
  is the order in which ``validate_detector_map`` then reads them, class by class.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import torch

from yolo.evaluation.darknet_map import ImageDetections, pairwise_iou
from yolo.ops.letterbox import LetterboxInfo
from yolo.ops.postprocess_defaults import BETA_NMS

__all__ = ["DARKNET_MAP_THRESH", "DARKNET_MAP_NMS", "darknet_detections", "darknet_row_order", "head_grids"]

F32 = np.float32
DARKNET_MAP_THRESH = 0.005  # validate_detector_map's fixed `const float thresh = .005`
DARKNET_MAP_NMS = 0.45  # and `const float nms = .45`
_GREEDY_BETA = 0.6  # box_diou's fixed exponent


def head_grids(model: torch.nn.Module, input_hw: Tuple[int, int]) -> List[Tuple[int, int, int]]:
    """``(anchors, H, W)`` of each head of ``model`` (a Darknet model or a wrapper of one), in output order, from the
    stride each head recorded at its last forward on an input of ``input_hw``."""
    module = getattr(model, "module", model)
    grids = []
    for head in module.yolo_layers:
        stride = getattr(head, "stride", None)
        if stride is None:
            raise ValueError("the model's heads have not run yet: call the model first")
        grids.append((head.num_anchors, int(round(input_hw[0] / stride[0])), int(round(input_hw[1] / stride[1]))))
    return grids


def darknet_row_order(grids: Sequence[Tuple[int, int, int]]) -> np.ndarray:
    """The permutation of our eval rows (per head anchor by anchor, then cell) into Darknet's detection order (per
    head cell by cell, then anchor): ``Int64[rows]``."""
    parts, start = [], 0
    for anchors, h, w in grids:
        cells = h * w
        parts.append(start + (np.arange(anchors)[None, :] * cells + np.arange(cells)[:, None]).reshape(-1))
        start += anchors * cells
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _overlap_measure(a: np.ndarray, b: np.ndarray, kind: str, beta: float) -> np.ndarray:
    """Darknet's box_iou, box_diou (greedynms) or box_diounms (diounms) of every pair of ``a`` ``Float32[P, 4]`` and
    ``b`` ``Float32[Q, 4]`` -> ``Float32[P, Q]``, in Darknet's float32 (box_c's fmin/fmax of float edges; the
    ``pow`` in double)."""
    iou = pairwise_iou(a, b)
    if kind == "default":
        return iou
    a, b = a[:, None, :], b[None, :, :]
    two = F32(2)
    w = (np.maximum(a[..., 0] + a[..., 2] / two, b[..., 0] + b[..., 2] / two)
         - np.minimum(a[..., 0] - a[..., 2] / two, b[..., 0] - b[..., 2] / two)).astype(F32)
    h = (np.maximum(a[..., 1] + a[..., 3] / two, b[..., 1] + b[..., 3] / two)
         - np.minimum(a[..., 1] - a[..., 3] / two, b[..., 1] - b[..., 3] / two)).astype(F32)
    c = (w * w + h * h).astype(F32)
    dx, dy = a[..., 0] - b[..., 0], a[..., 1] - b[..., 1]
    d = (dx * dx + dy * dy).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (d / c).astype(F32)
    exponent = float(F32(_GREEDY_BETA if kind == "greedynms" else beta))
    u = np.power(ratio.astype(np.float64), exponent).astype(F32)
    return np.where(c == 0, iou, (iou - u).astype(F32))


_BLOCK = 512  # rows of the pairwise test done at once (memory: block x boxes)
_SHARED_MAX = 4096  # up to this many boxes, the pairwise test is done once for all classes (a bool matrix)


def _suppressors(boxes: np.ndarray, columns: np.ndarray, nms: float, kind: str, beta: float) -> np.ndarray:
    """``Bool[len(boxes), len(columns)]``: the overlap measure of each pair above ``nms`` (row blocks, so that
    the float intermediates stay small)."""
    thresh = F32(nms)
    out = np.empty((len(boxes), len(columns)), bool)
    for start in range(0, len(boxes), _BLOCK):
        out[start:start + _BLOCK] = _overlap_measure(boxes[start:start + _BLOCK], columns, kind, beta) > thresh
    return out


def _greedy(hit: np.ndarray, ranked: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Darknet's greedy pass: the boxes ``ranked`` (indices, in Darknet's order) each suppress the later candidates
    their row of ``hit`` (``Bool[N, N]``, a symmetric pairwise test) marks, unless suppressed first. Returns
    ``candidates`` (``Bool[N]``) less the suppressed boxes. Suppressing the earlier boxes too changes nothing: a
    kept box has no hit with an earlier kept one (it would have been suppressed), and suppressed ones are gone."""
    alive = candidates.copy()
    for r in ranked.tolist():
        if alive[r]:
            alive &= ~hit[r]
            alive[r] = True
    return alive


def _nms_sort(boxes: np.ndarray, probs: np.ndarray, nms: float, kind: str, beta: float) -> np.ndarray:
    """do_nms_sort / diounms_sort on ``probs`` ``Float32[K, C]`` (zeroed in place where suppressed); returns the
    final order of the boxes, ``Int64[K]``. The pairwise test depends on the boxes only: for up to
    ``_SHARED_MAX`` boxes it is done once for every class."""
    order = np.arange(len(boxes))
    shared = _suppressors(boxes, boxes, nms, kind, beta) if len(boxes) <= _SHARED_MAX else None
    for k in range(probs.shape[1]):
        order = order[np.argsort(-probs[order, k], kind="stable")]
        live = order[probs[order, k] > 0]  # a box at 0 suppresses nothing (Darknet's `continue`)
        if len(live) < 2:
            continue
        if shared is not None:
            candidates = np.zeros(len(boxes), bool)
            candidates[live] = True
            probs[candidates & ~_greedy(shared, live, candidates), k] = 0
        else:
            hit = _suppressors(boxes[live], boxes[live], nms, kind, beta)
            everyone = np.ones(len(live), bool)
            probs[live[~_greedy(hit, np.arange(len(live)), everyone)], k] = 0
    return order


def darknet_detections(rows: torch.Tensor, order: np.ndarray, placement: LetterboxInfo,
                       original_hw: Tuple[int, int], input_hw: Tuple[int, int], nms_kind: str = "default",
                       beta_nms: float = BETA_NMS, thresh: float = DARKNET_MAP_THRESH,
                       nms: float = DARKNET_MAP_NMS) -> ImageDetections:
    """One image's ``detector map`` detections from our model's eval rows.

    Args:
        rows: ``Float[B, 5 + C]`` one image's rows (cx, cy, w, h input pixels, objectness, class probabilities).
        order: :func:`darknet_row_order` of the model's heads at this input size.
        placement: how the pre-processing placed the image in the input (scale, padding).
        original_hw: the original image's ``(h, w)``; input_hw: the network input's ``(h, w)``.
        nms_kind, beta_nms: the cfg's NMS (``default``: do_nms_sort; ``greedynms``, ``diounms``: diounms_sort).

    Returns:
        :class:`ImageDetections`, boxes relative to the original image, in Darknet's order.
    """
    rows = rows.detach().float()
    thresh_t = F32(thresh)
    kept = torch.nonzero(rows[:, 4] > float(thresh_t)).flatten().cpu().numpy()  # few rows: the rest stay put
    kept = kept[np.argsort(np.argsort(order)[kept], kind="stable")]  # into Darknet's order
    data = rows[torch.from_numpy(kept).to(rows.device)].cpu().numpy().astype(F32)
    objectness = data[:, 4]
    keep = objectness > thresh_t  # the same test in numpy's float32 as Darknet's
    data, objectness = data[keep], objectness[keep]
    probs = (objectness[:, None] * data[:, 5:]).astype(F32)
    probs = np.where(probs > thresh_t, probs, F32(0)).astype(F32)
    boxes = _darknet_boxes(data[:, :4], placement, original_hw, input_hw)
    final = _nms_sort(boxes, probs, nms, nms_kind, beta_nms)
    box_index, classes = np.nonzero(probs[final] > 0)  # box by box, class by class
    return ImageDetections(boxes[final][box_index], probs[final][box_index, classes].astype(F32),
                           classes.astype(np.int64))


def _darknet_boxes(cxcywh: np.ndarray, placement: LetterboxInfo, original_hw: Tuple[int, int],
                   input_hw: Tuple[int, int]) -> np.ndarray:
    """Input-pixel cx, cy, w, h ``Float32[K, 4]`` -> fractions of the original image, as get_yolo_box (fractions of
    the input) then correct_yolo_boxes (letter or not: ``new_w = netw`` makes its map the identity) compute them."""
    net_h, net_w = input_hw
    orig_h, orig_w = original_hw
    new_w = int(round(placement.scale_x * orig_w))
    new_h = int(round(placement.scale_y * orig_h))
    rel = np.empty_like(cxcywh, dtype=F32)
    rel[:, 0] = cxcywh[:, 0] / F32(net_w)
    rel[:, 1] = cxcywh[:, 1] / F32(net_h)
    rel[:, 2] = cxcywh[:, 2] / F32(net_w)
    rel[:, 3] = cxcywh[:, 3] / F32(net_h)
    deltaw, deltah = F32(net_w - new_w), F32(net_h - new_h)
    ratiow, ratioh = F32(F32(new_w) / F32(net_w)), F32(F32(new_h) / F32(net_h))
    out = np.empty_like(rel)
    out[:, 0] = ((rel[:, 0].astype(np.float64) - float(deltaw) / 2.0 / net_w) / float(ratiow)).astype(F32)
    out[:, 1] = ((rel[:, 1].astype(np.float64) - float(deltah) / 2.0 / net_h) / float(ratioh)).astype(F32)
    out[:, 2] = rel[:, 2] * F32(F32(1) / ratiow)
    out[:, 3] = rel[:, 3] * F32(F32(1) / ratioh)
    return out
