"""Pixel values: a batch of ``uint8`` images (0..255, as decoded and as the data loader carries them) to the network's
float input (0..1), written once for every path that feeds a model from uint8 batches (training, evaluation, the
sample pictures of a run, the GPU report). The Detector fuses the same division into its resize
(:mod:`yolo.inference.preprocess`, :mod:`yolo.inference.device_preprocess`)."""
from __future__ import annotations

import torch

__all__ = ["images_to_float"]


def images_to_float(images: torch.Tensor) -> torch.Tensor:
    """``UInt8[B, 3, H, W]`` 0..255 -> ``Float[B, 3, H, W]`` 0..1 (float input: as float32, unscaled)."""
    return images.float().div_(255.0) if images.dtype == torch.uint8 else images.float()
