"""The training loss of a detector: :class:`YoloLoss` sums the loss of every head of a model, each by the function
registered for the head's type (:mod:`yolo.losses.registry`): ``[yolo]`` (:mod:`yolo.losses.yolo_head_loss`),
``[region]`` (:mod:`yolo.losses.region_loss`), ``[Gaussian_yolo]`` (:mod:`yolo.losses.gaussian_yolo_loss`) and
``[detection]`` (:mod:`yolo.losses.detection_loss`), each equal to Darknet's delta of that layer type.
"""
from __future__ import annotations

import functools
from typing import Dict, Sequence, Tuple, Union

import torch
from torch import Tensor

from yolo.losses import detection_loss, gaussian_yolo_loss, region_loss, yolo_head_loss  # noqa: F401  (register the head losses)
from yolo.losses.registry import HEAD_CHECKS, HEAD_LOSSES, HEAD_NEEDS_IMAGES_SEEN, registered_type
from yolo.losses.targets import usable_targets


class YoloLoss:
    """The training loss over every head of a model, each head by the loss registered for its type.

    ``YoloLoss(model)`` reads ``model.yolo_layers`` (the heads; :data:`HEAD_LOSSES` maps each head type to its
    loss, see :func:`yolo.losses.registry.register_head_loss`). The heads are read at every call, so the
    criterion follows the model across devices.

    ``loss, parts = criterion(head_outputs, targets, img_size_hw, images_seen=0)``:

    * ``head_outputs``: list, one per head, of raw maps Float[N, A, Hg, Wg, 5 + C] (training-mode output;
      a [detection] head's is flat, Float[N, K], see yolo/losses/detection_loss.py);
    * ``targets``: Float[M, 6] rows (image index, class, cx, cy, w, h), boxes in pixels of the network input,
      on any device: the work that depends on them alone (their checks, which truth trains which slot) runs
      where they are, so on the CPU (as the trainer passes them) it never waits for the GPU;
    * ``img_size_hw``: the network input (H, W);
    * ``images_seen``: the images training has seen, this batch included (Darknet's ``*net.seen``; the trainer's
      step passes it): the [region] loss's prior term is on while it is below 12800.

    Returns the scalar loss, summed over the batch and divided by ``N`` (per image), and a dict of detached
    per-image parts ``box``, ``obj``, ``cls`` (0-dim tensors; for [yolo] heads Darknet's cost terms) and
    ``num_targets`` (int: the heads' counts; for [yolo], Darknet's truth-to-anchor assignments). The loss is
    computed in float32 with autocast disabled.
    """

    def __init__(self, model):
        heads = list(model.yolo_layers)
        if not heads:
            raise ValueError("the model has no detection heads to train")
        self.losses = []
        for index, head in enumerate(heads):
            head_type = registered_type(head)
            if head_type is None:
                known = ", ".join(sorted(t.__name__ for t in HEAD_LOSSES))
                raise ValueError(f"head {index} ({type(head).__name__}): no training loss is registered for this "
                                 f"head type (registered: {known})")
            if HEAD_CHECKS.get(head_type) is not None:
                HEAD_CHECKS[head_type](head, index)
            if head.num_classes != heads[0].num_classes:
                raise ValueError(f"head {index}: classes={head.num_classes} differs from head 0 ({heads[0].num_classes})")
            loss = HEAD_LOSSES[head_type]
            # every head loss called as fn(head, out, targets, keep, img_size_hw, images_seen)
            self.losses.append(functools.partial(_with_images_seen, loss) if head_type in HEAD_NEEDS_IMAGES_SEEN
                               else functools.partial(_without_images_seen, loss))
        self.heads = heads

    def __call__(self, head_outputs: Sequence[Tensor], targets: Tensor,
                 img_size_hw: Union[Tuple[int, int], Sequence[int]],
                 images_seen: int = 0) -> Tuple[Tensor, Dict[str, Union[Tensor, int]]]:
        if len(head_outputs) != len(self.heads):
            raise ValueError(f"expected {len(self.heads)} head outputs, got {len(head_outputs)}")
        img_size_hw = (int(img_size_hw[0]), int(img_size_hw[1]))
        batch_size = head_outputs[0].shape[0]
        device = head_outputs[0].device
        targets = targets.to(dtype=torch.float32).reshape(-1, 6)  # stays where it is (see the class docstring)
        num_classes = self.heads[0].num_classes
        keep = usable_targets(targets, batch_size, img_size_hw, num_classes)
        totals = {"box": [], "obj": [], "cls": []}
        num_targets = 0
        with torch.autocast(device_type=device.type, enabled=False):
            for index, (head, fn, out) in enumerate(zip(self.heads, self.losses, head_outputs)):
                _check_output_shape(index, head, out)
                box, obj, cls, count = fn(head, out.float(), targets, keep, img_size_hw, images_seen)
                totals["box"].append(box)
                totals["obj"].append(obj)
                totals["cls"].append(cls)
                num_targets += int(count)
        parts = {name: torch.stack(values).sum() / batch_size for name, values in totals.items()}
        loss = parts["box"] + parts["obj"] + parts["cls"]
        report: Dict[str, Union[Tensor, int]] = {name: value.detach() for name, value in parts.items()}
        report["num_targets"] = num_targets
        return loss, report


def _with_images_seen(loss, head, out: Tensor, targets: Tensor, keep: Tensor, img_size_hw: Tuple[int, int],
                      images_seen: int):
    return loss(head, out, targets, keep, img_size_hw, images_seen=images_seen)


def _without_images_seen(loss, head, out: Tensor, targets: Tensor, keep: Tensor, img_size_hw: Tuple[int, int],
                         images_seen: int):
    return loss(head, out, targets, keep, img_size_hw)  # a loss that does not depend on the images seen


def _check_output_shape(index: int, head, out: Tensor) -> None:
    """``out`` must be Float[N, A, Hg, Wg, 5 + C] for the head's A anchors and C classes ([detection]: its flat
    Float[N, K], K = ``head.flat_size``)."""
    flat = getattr(head, "flat_size", None)
    if flat is not None:
        if out.ndim != 2 or out.shape[1] != flat:
            raise ValueError(f"head {index}: output shape {tuple(out.shape)} is not [N, {flat}]")
        return
    depth = getattr(head, "num_outputs", 5 + head.num_classes)  # [Gaussian_yolo]: 9 + C
    if out.ndim != 5 or out.shape[1] != head.num_anchors or out.shape[4] != depth:
        raise ValueError(f"head {index}: output shape {tuple(out.shape)} does not match "
                         f"{head.num_anchors} anchors x {depth} values ({head.num_classes} classes)")


__all__ = ["YoloLoss"]
