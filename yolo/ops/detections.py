"""The detection result every path returns (torchvision's contract): one dict per image with ``boxes``
``Float[K, 4]`` xyxy, ``scores`` ``Float[K]`` and ``labels`` ``Int64[K]``; empty tensors, never ``None``."""
from __future__ import annotations

from typing import Dict, Union

import torch

__all__ = ["empty_detections"]


def empty_detections(device: Union[str, torch.device, None] = None, dtype=torch.float32) -> Dict[str, torch.Tensor]:
    """The no-detection result: ``boxes`` ``[0, 4]``, ``scores`` ``[0]``, ``labels`` ``[0]`` int64."""
    return {
        "boxes": torch.zeros((0, 4), dtype=dtype, device=device),
        "scores": torch.zeros((0,), dtype=dtype, device=device),
        "labels": torch.zeros((0,), dtype=torch.int64, device=device),
    }
