"""Training loss of a ``[cost]`` layer (classifier and regression cfgs), equal to Darknet's src/cost_layer.c.

**Convention.** For the loss returned by :func:`cost_loss` (summed over the batch), ``-d(loss)/d(x)`` is exactly
what Darknet's backward adds to the input's delta, ``scale * l.delta``, where ``x`` is the [cost] layer's input
Float[N, ...] (the previous layer's output) and ``truth`` holds one value per element of ``x`` (Darknet's truth
buffer for such a network). Divide by ``N`` for a per-image loss (``-N * d(loss/N)/d(x) == scale * delta``).

With ``d = truth - x`` per element (AlexeyAB's Darknet has the three types below; ``ratio`` is read but its
suppression threshold is forced to 0 on the GPU and absent on the CPU, so it changes nothing):

* ``sse``: ``0.5 * scale * d^2`` (Darknet's delta ``d``);
* ``masked``: the same, but elements whose truth is Darknet's ``SECRET_NUM`` (-1234) contribute nothing;
* ``smooth``: smooth L1, ``0.5 * scale * d^2`` where ``|d| < 1``, else ``scale * (|d| - 0.5)`` (delta ``sign(d)``).

The value is half of Darknet's printed cost (``sum d^2``, ``2|d| - 1`` in the linear part); the gradient is its.
"""
from __future__ import annotations

import torch
from torch import Tensor

from yolo.models.layer_types.cost import Cost

SECRET_NUM = -1234.0  # Darknet's marker for "no truth here" (include/darknet.h)


def cost_loss(cost: Cost, x: Tensor, truth: Tensor) -> Tensor:
    """The [cost] layer's loss, summed over the batch: ``x`` and ``truth`` Float[N, ...] of one shape."""
    if x.shape != truth.shape:
        raise ValueError(f"{cost.where}: [cost] truth shape {tuple(truth.shape)} differs from the input's "
                         f"{tuple(x.shape)}")
    diff = truth.to(x.dtype) - x
    if cost.loss == "masked":
        diff = torch.where(truth == SECRET_NUM, torch.zeros_like(diff), diff)
    if cost.loss == "smooth":
        small = diff.abs() < 1
        per_element = torch.where(small, 0.5 * diff * diff, diff.abs() - 0.5)
    else:
        per_element = 0.5 * diff * diff
    return cost.scale * per_element.sum()


__all__ = ["SECRET_NUM", "cost_loss"]
