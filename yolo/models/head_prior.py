"""Prior biases for the detection heads' objectness and class logits (an option of training from scratch)."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
import torch.nn as nn

from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer
from yolo.models.layer_types.region import RegionLayer
from yolo.models.layer_types.yolo_head import YOLOLayer

# Where objectness sits in each head's per-anchor channels; the classes follow it.
OBJECTNESS_INDEX = {YOLOLayer: 4, RegionLayer: 4, GaussianYOLOLayer: 8}  # Gaussian: x, y, w, h, 4 sigmas, obj


def prior_head_biases(model: nn.Module, img_hw: Tuple[int, int], layers: Optional[List[int]] = None,
                      objects_per_image: float = 8.0) -> List[int]:
    """Start the heads' objectness and class logits at a prior instead of 0 (probability 0.5).

    With zero biases every one of the thousands of predictions starts at objectness 0.5, and the
    background term swamps the first updates. The prior gives each cell ``objects_per_image / cells``
    objectness and each class ``0.6 / (classes - 0.99)``. Applies to the ``[convolutional]`` right before
    each ``[yolo]`` head at module index ``i`` for which ``i - 1`` is in ``layers`` (all heads when None),
    except heads with ``new_coords=1`` (their logistic is in the conv). ``img_hw`` is the training input
    (height, width). The conv's bias is viewed as ``(num_anchors, channels)``: box terms, objectness (index 4, 8 for
    [Gaussian_yolo]), classes; [detection] heads (YOLOv1) have no prior. Returns the conv layer indices set.
    """
    done = []
    for i, head in enumerate(model.module_list):
        obj = OBJECTNESS_INDEX.get(type(head))
        if obj is None or int(getattr(head.opts, "new_coords", 0)):
            continue
        prev = model.module_list[i - 1]
        conv = getattr(prev, "conv", None)
        if conv is None or conv.bias is None or (layers is not None and i - 1 not in layers):
            continue
        grid_h = model.layer_infos[i].out_shape[1]  # at the cfg's [net] size
        stride = model.input_size[0] / grid_h if grid_h else 32.0
        cells = (img_hw[0] / stride) * (img_hw[1] / stride)
        with torch.no_grad():
            bias = conv.bias.view(head.num_anchors, -1)
            bias[:, obj] = math.log(objects_per_image / cells)
            bias[:, obj + 1:] = math.log(0.6 / max(head.num_classes - 0.99, 0.01))
        done.append(i - 1)
    return done


__all__ = ["prior_head_biases"]
