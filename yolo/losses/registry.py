"""The registry of per-head-type training losses: each head type registers the function that computes its
loss (:func:`register_head_loss`); :class:`yolo.losses.yolo_loss.YoloLoss` looks heads up here.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from torch import Tensor

HeadLossFn = Callable[[Any, Tensor, Tensor, Tensor, Tuple[int, int]], Tuple[Tensor, Tensor, Tensor, int]]
HEAD_LOSSES: Dict[type, HeadLossFn] = {}
HEAD_CHECKS: Dict[type, Callable[[Any, int], None]] = {}
# The head types whose loss also takes ``images_seen=`` (images trained on, the current batch included): Darknet's
# [region] prior term.
HEAD_NEEDS_IMAGES_SEEN = set()


def register_head_loss(head_type: type, check: Optional[Callable[[Any, int], None]] = None,
                       images_seen: bool = False):
    """Register the training loss of one head type (a decorator).

    The decorated ``fn(head, out, targets, keep, img_size_hw) -> (box, obj, cls, num_positive)`` gets
    ``out`` Float[N, A, Hg, Wg, 5 + C] (float32, the head's training-mode output; [detection]: Float[N, K]), ``targets`` Float[M, 6]
    (image, class, cx, cy, w, h in input pixels), ``keep`` Bool[M] (the rows :func:`yolo.losses.targets.usable_targets` lets
    through; both on the CPU in training while ``out`` may be on a GPU: see :mod:`yolo.losses.targets`) and the
    network input ``img_size_hw`` (H, W); it returns the head's box, objectness and class
    terms *summed over the batch* (0-dim tensors) and its number of positive slots. ``check(head, index)``,
    if given, runs once when :class:`YoloLoss` is built and raises ``ValueError`` for a head it cannot train.
    Subclasses of ``head_type`` use the same loss unless they register their own. With ``images_seen`` the
    function also gets ``images_seen=N``, the images training has seen, this batch included (the criterion's
    argument of that name).
    """
    def wrap(fn: HeadLossFn) -> HeadLossFn:
        HEAD_LOSSES[head_type] = fn
        if check is not None:
            HEAD_CHECKS[head_type] = check
        if images_seen:
            HEAD_NEEDS_IMAGES_SEEN.add(head_type)
        else:
            HEAD_NEEDS_IMAGES_SEEN.discard(head_type)
        return fn
    return wrap


def registered_type(head) -> Optional[type]:
    """The nearest class in ``type(head)``'s MRO that has a registered loss, or None."""
    return next((cls for cls in type(head).__mro__ if cls in HEAD_LOSSES), None)
