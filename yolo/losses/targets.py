"""Which truths train which predictions: the rows of ``targets`` that take part, and Darknet's truth-to-anchor
assignment (``targets`` are Float[M, 6] rows: image index, class, cx, cy, w, h in pixels of the network input).

A *slot* is one prediction of a head: (image, anchor, grid row ``gy``, grid column ``gx``), flattened by
:func:`slot_index`. When several truths write one slot, Darknet keeps what the last one wrote
(:func:`last_writers`).

Everything here depends on the targets alone, so it runs where ``targets`` are: the trainer passes them on the
CPU (as the loader made them), where the data-dependent steps (``nonzero``, ``unique``, the checks) cost no wait
for the GPU; the losses then copy the few index tensors they need to the maps' device with :func:`to_device`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import torch
from torch import Tensor

from yolo.losses.darknet_box import elementwise_cxcywh_iou as darknet_iou
from yolo.losses.darknet_box import box_iou_kind as darknet_iou_kind


def to_device(tensor: Tensor, device: torch.device) -> Tensor:
    """``tensor`` on ``device`` without waiting for the GPU: a copy from the CPU is queued on the current
    stream from pinned memory (from ordinary memory the driver may first wait for the stream; torch keeps the
    pinned block until the copy is done)."""
    if tensor.device == device:
        return tensor
    if tensor.device.type == "cpu" and device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def anchors_on(head, device: torch.device) -> Tensor:
    """The cfg's anchors of ``head`` Float[total, 2] (input pixels) on ``device``: on the CPU its CPU copy
    ``host_anchors`` when the model lives elsewhere (reading the GPU buffer would wait for the GPU)."""
    anchors = head.all_anchors
    if anchors.device != device and device.type == "cpu":
        anchors = head.host_anchors
    return anchors.to(device=device, dtype=torch.float32)


def slot_index(image: Tensor, anchor: Tensor, gy: Tensor, gx: Tensor, num_anchors: int,
               grid_hw: Tuple[int, int]) -> Tensor:
    """Long[K]: the flat index of slots (image, anchor, gy, gx) in Float[N, A, Hg, Wg, ...] maps."""
    grid_h, grid_w = grid_hw
    return ((image * num_anchors + anchor) * grid_h + gy) * grid_w + gx


def last_writers(key: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """For writes to slots ``key`` Long[K] in order: the distinct slots Long[U] (sorted), each write's index
    into them Long[K], and for each slot the index of its last write Long[U] (the one Darknet keeps)."""
    unique, inverse = torch.unique(key, return_inverse=True)
    order = torch.arange(key.numel(), device=key.device)
    winner = torch.full((unique.numel(),), -1, dtype=torch.long, device=key.device)
    return unique, inverse, winner.scatter_reduce(0, inverse, order, reduce="amax")


def padded_truths(truth: Tensor, image: Tensor, batch: int) -> Tuple[Tensor, Tensor, Tensor]:
    """Truths Float[T, D] of images Long[T] (kept in order) -> per image Float[N, Tmax, D] (zeros past an
    image's own), their indices into ``truth`` Long[N, Tmax] (0 there) and a valid mask Bool[N, Tmax];
    ``Tmax`` is the largest count of an image (at least 1), read on ``truth``'s device."""
    device = truth.device
    order = torch.argsort(image, stable=True)
    counts = torch.bincount(image, minlength=batch)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(image.numel(), device=device) - starts[image[order]]
    t_max = max(1, int(counts.max())) if image.numel() else 1
    boxes = torch.zeros(batch, t_max, truth.shape[1], device=device, dtype=truth.dtype)
    index = torch.zeros(batch, t_max, dtype=torch.long, device=device)
    valid = torch.zeros(batch, t_max, dtype=torch.bool, device=device)
    boxes[image[order], slot] = truth[order]
    index[image[order], slot] = order
    valid[image[order], slot] = True
    return boxes, index, valid


@dataclass
class HeadTargets:
    """The assigned slots of one head, K rows, each slot unique (see :func:`assign_targets`).

    ``image``, ``anchor`` (index into the head's masked anchors), ``gy``, ``gx``: Long[K], the slot;
    ``truth``: Long[K], the row of ``targets`` written last to the slot (in the loss its objectness delta
    wins, while the box deltas of every truth of the slot add up);
    ``classes``: Float[K, C], multi-hot: every class written to the slot.
    """

    image: Tensor
    anchor: Tensor
    gy: Tensor
    gx: Tensor
    truth: Tensor
    classes: Tensor

    def __len__(self) -> int:
        return int(self.image.numel())


def usable_targets(targets: Tensor, batch_size: int, img_size_hw: Tuple[int, int], num_classes: int) -> Tensor:
    """Bool[M]: rows of ``targets`` (Float[M, 6] image, class, cx, cy, w, h in input pixels) that take part.

    Drops rows that are not finite, have a non-positive width or height, or a centre outside the input.
    Raises ``ValueError`` for an image index outside ``[0, batch_size)`` or a class outside ``[0, num_classes)``:
    free on the CPU, one wait for the GPU when ``targets`` are there (the trainer passes them on the CPU).
    """
    if targets.ndim != 2 or targets.shape[1] != 6:
        raise ValueError(f"targets must be Float[M, 6] (image, class, cx, cy, w, h), got shape {tuple(targets.shape)}")
    height, width = img_size_hw
    finite = torch.isfinite(targets).all(dim=1)
    image, cls = targets[:, 0], targets[:, 1]
    bad_image = finite & ((image < 0) | (image >= batch_size) | (image != image.floor()))
    bad_class = finite & ((cls < 0) | (cls >= num_classes) | (cls != cls.floor()))
    if (bad_image | bad_class).any():  # one read of the device for both checks (none is the common case)
        if bad_image.any():
            row = int(bad_image.nonzero()[0])
            raise ValueError(f"targets row {row}: image index {image[row].item()} is not in 0..{batch_size - 1}")
        row = int(bad_class.nonzero()[0])
        raise ValueError(f"targets row {row}: class {cls[row].item()} is not in 0..{num_classes - 1} "
                         f"(the cfg has classes={num_classes})")
    cx, cy, w, h = targets[:, 2:6].unbind(1)
    return finite & (w > 0) & (h > 0) & (cx >= 0) & (cx <= width) & (cy >= 0) & (cy <= height)


def darknet_assignments(truth: Tensor, head, iou_thresh: float, iou_thresh_kind: str,
                        img_size_hw: Tuple[int, int], grid_hw: Tuple[int, int]) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Darknet's truth-to-anchor assignment for one head (the second loop of ``process_batch``).

    ``truth`` Float[T, 4] normalized centre boxes. Each truth goes to its best anchor among *all* anchors of
    the cfg (IoU of the centred boxes, first maximum) and, with ``iou_thresh < 1``, to every other anchor
    whose ``iou_thresh_kind`` IoU exceeds ``iou_thresh``; only anchors in this head's ``mask`` count. The cell
    is ``(int(y * Hg), int(x * Wg))``. Returns Long[K] ``(truth index, anchor index in the mask, gy, gx)`` in
    Darknet's order: by truth, its best anchor first, then the others by anchor index.
    """
    device = truth.device
    height, width = img_size_hw
    grid_h, grid_w = grid_hw
    net_wh = torch.tensor([width, height], device=device, dtype=torch.float32)
    anchors = anchors_on(head, device) / net_wh  # [total, 2]
    total = anchors.shape[0]
    centred = torch.cat((torch.zeros_like(anchors), anchors), 1)
    shifted = torch.cat((torch.zeros_like(truth[:, :2]), truth[:, 2:]), 1)
    ious = darknet_iou(centred[None, :, :], shifted[:, None, :])  # [T, total]
    best_iou, best_n = ious.max(dim=1) if truth.numel() else (ious.sum(1), ious.sum(1).long())
    best_n = torch.where(best_iou > 0, best_n, torch.zeros_like(best_n))  # Darknet's scan starts at 0
    mask = torch.as_tensor(list(head.mask), dtype=torch.long, device=device)
    hit = torch.zeros(truth.shape[0], total, dtype=torch.bool, device=device)
    hit[torch.arange(truth.shape[0], device=device), best_n] = True
    if iou_thresh < 1.0:
        hit |= darknet_iou_kind(centred[None, :, :], shifted[:, None, :], iou_thresh_kind) > iou_thresh
    in_mask = torch.arange(total, device=device)[None, :] == mask[:, None]  # [A, total]
    hit &= in_mask.any(0)[None, :]
    t, n = hit.nonzero(as_tuple=True)
    key = t * (total + 1) + torch.where(n == best_n[t], torch.zeros_like(n), n + 1)
    order = torch.argsort(key)
    t, n = t[order], n[order]
    anchor = in_mask[:, n].float().argmax(0)
    # Darknet truncates x * Wg; the clamp only keeps a centre on the right or bottom edge inside the grid.
    gx = (truth[t, 0] * grid_w).long().clamp(0, grid_w - 1)
    gy = (truth[t, 1] * grid_h).long().clamp(0, grid_h - 1)
    return t, anchor, gy, gx


def _merge_slots(image: Tensor, anchor: Tensor, gy: Tensor, gx: Tensor, truth: Tensor, cls: Tensor,
                 num_anchors: int, grid_hw: Tuple[int, int], num_classes: int) -> HeadTargets:
    """Collapse rows that share a slot: the last row is kept, classes are united."""
    device = image.device
    if image.numel() == 0:
        empty = torch.zeros(0, dtype=torch.long, device=device)
        return HeadTargets(empty, empty, empty, empty, empty, torch.zeros(0, num_classes, device=device))
    unique, inverse, winner = last_writers(slot_index(image, anchor, gy, gx, num_anchors, grid_hw))
    classes = torch.zeros(unique.numel(), num_classes, device=device)
    classes[inverse, cls] = 1.0
    return HeadTargets(image[winner], anchor[winner], gy[winner], gx[winner], truth[winner], classes)


def assign_targets(targets: Tensor, head, grid_hw: Tuple[int, int], img_size_hw: Tuple[int, int],
                   batch_size: int) -> HeadTargets:
    """The slots Darknet's assignment writes in one ``[yolo]`` head (see :func:`darknet_assignments`), for
    ``targets`` Float[M, 6] (image, class, cx, cy, w, h in input pixels); ``grid_hw`` is the head's grid
    (Hg, Wg), ``img_size_hw`` the input (H, W). Per slot: the truth that writes it last (it sets the
    objectness delta) and the union of the classes written there. ``truth_thresh`` positives depend on the
    predictions and are not included.
    """
    keep = usable_targets(targets, batch_size, img_size_hw, head.num_classes)
    rows = keep.nonzero().squeeze(1)
    height, width = img_size_hw
    scale = torch.tensor([width, height, width, height], device=targets.device, dtype=torch.float32)
    t, anchor, gy, gx = darknet_assignments(targets[rows, 2:6] / scale, head, float(head.opts.iou_thresh),
                                            str(getattr(head.opts, "iou_thresh_kind", "iou")), img_size_hw, grid_hw)
    truth = rows[t]
    return _merge_slots(targets[truth, 0].long(), anchor, gy, gx, truth, targets[truth, 1].long(),
                        head.num_anchors, grid_hw, head.num_classes)


def darknet_truth_rows(targets: Tensor, keep: Tensor, max_boxes: int) -> Tensor:
    """Rows of ``targets`` that Darknet's truth buffer would hold: usable, at most ``max_boxes`` per image."""
    rows = keep.nonzero().squeeze(1)
    if rows.numel() == 0:
        return rows
    image = targets[rows, 0].long()
    order = torch.argsort(image, stable=True)
    sorted_image = image[order]
    counts = torch.bincount(sorted_image)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=rows.device) - starts[sorted_image]
    return rows[rank < max_boxes]
