"""Our detection and training step on one device, timed on real images (coco128).

- :func:`detection_figures`: the :class:`yolo.inference.detector.Detector` pipeline (decode excluded: the
  images are in memory; pre-process + model + post-process) at batch 1 (ms per image) and at a large batch
  (images/s), the model alone at both batches, and the milliseconds of each stage per batch;
- :func:`step_throughput`: one training update without the loader (forward, loss, backward over
  ``subdivisions`` mini-batches, then SGD) on images already on the device (the targets on the CPU, as the
  trainer passes them), in fp32 or with AMP.

Every figure is a median over rounds after warm-up rounds (:mod:`yolo.timing`); CUDA work is
synchronized inside each timed call. Given an :class:`~gpu_lab.gpu_schedule.Allotment`, the first warm-up
round says what a round costs and the rounds are shortened to fit.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np
import torch

from yolo.benchmark.detection_stages import detection_stages
from gpu_lab.gpu_schedule import Allotment
from yolo.files.images import load_image
from yolo.inference.detector import Detector
from yolo.inference.preprocess import preprocess
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.model import Darknet
from yolo.ops.pixels import images_to_float
from yolo.timing import interleaved_medians, round_seconds

__all__ = ["load_images", "label_file", "training_batch", "detection_figures", "step_throughput"]


def load_images(paths: Sequence[Path]) -> List[np.ndarray]:
    """BGR ``uint8`` images, decoded once (the timings leave decoding out)."""
    return [load_image(p) for p in paths]


def label_file(image: Path) -> Path:
    """The YOLO label file of an image, as Darknet finds it: ``.../images/x/a.jpg`` -> ``.../labels/x/a.txt``."""
    parts = list(image.parts)
    index = len(parts) - 1 - parts[::-1].index("images")
    return Path(*parts[:index], "labels", *parts[index + 1:]).with_suffix(".txt")


def training_batch(paths: Sequence[Path], size: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The images stretched to ``size x size`` and their labels, as the trainer receives a batch:
    ``Float[B, 3, size, size]`` RGB 0..1 and ``Float[M, 6]`` rows (image index, class, cx, cy, w, h) in
    pixels of the input."""
    images, rows = [], []
    for i, path in enumerate(paths):
        image = cv2.resize(load_image(path), (size, size), interpolation=cv2.INTER_LINEAR)
        images.append(torch.from_numpy(np.ascontiguousarray(image[:, :, ::-1].transpose(2, 0, 1))))
        labels = np.loadtxt(label_file(path), ndmin=2, dtype=np.float32).reshape(-1, 5)
        for cls, cx, cy, w, h in labels:
            rows.append([i, cls, cx * size, cy * size, w * size, h * size])
    return images_to_float(torch.stack(images)), torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def _synchronize(device: torch.device) -> Optional[Callable[[], None]]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None


def _fitted_medians(tasks: Dict[str, Callable[[], object]], rounds: int, warmup: int, sync,
                    allotment: Optional[Allotment], share: float) -> Dict[str, float]:
    """:func:`interleaved_medians` of ``tasks``, the first warm-up round timed to fit the rounds into ``share`` of
    what is left of ``allotment`` (all ``rounds`` without one)."""
    first = round_seconds(tasks, sync)
    if allotment is not None:
        rounds = allotment.rounds(first, rounds, least=2, share=share)
    return interleaved_medians(tasks, rounds, max(warmup - 1, 0), sync)


def detection_figures(cfg: Path, weights: Path, images: Sequence[np.ndarray], device: str, half: bool,
                      img_size: int, batch: int, rounds: int, warmup: int,
                      allotment: Optional[Allotment] = None) -> Dict[str, float]:
    """The Detector at ``img_size``: ``pipeline_b1_ms`` (per image, batch 1), ``pipeline_img_s`` (batch
    ``batch``), ``model_b1_ms`` and ``model_img_s`` (the network alone on the pre-processed input), then where
    the time goes (:func:`yolo.benchmark.detection_stages.detection_stages`): ``stage_b1_<stage>_ms`` and
    ``stage_b_<stage>_ms`` per batch (``upload`` only where there is one). Rounds: ``rounds`` at batch 1, a quarter
    of it at ``batch``; with ``allotment``, shortened to fit it."""
    det = Detector(cfg=cfg, weights=weights, device=device, half=half, img_size=img_size)
    many = [images[i % len(images)] for i in range(batch)]
    x1, _ = preprocess(many[:1], det.img_size, det.resize, det.device, det.dtype, det.resample)
    xb, _ = preprocess(many, det.img_size, det.resize, det.device, det.dtype, det.resample)

    def model(x: torch.Tensor) -> Callable[[], object]:
        def run() -> None:
            with torch.inference_mode():
                det.net(x)
        return run

    sync = _synchronize(det.device)
    # shares of what is left: batch 1, then the large batch, then the stages at both
    ms = _fitted_medians({"pipeline_b1": lambda: det(many[:1]), "model_b1": model(x1)}, rounds, warmup, sync,
                         allotment, 0.3)
    ms.update(_fitted_medians({"pipeline_b": lambda: det(many), "model_b": model(xb)}, max(2, rounds // 4),
                              max(1, warmup // 2), sync, allotment, 0.5))
    out = {"pipeline_b1_ms": ms["pipeline_b1"], "model_b1_ms": ms["model_b1"],
           "pipeline_img_s": batch * 1e3 / ms["pipeline_b"], "model_img_s": batch * 1e3 / ms["model_b"]}
    for tag, part, share in (("b1", many[:1], 0.3), ("b", many, 1.0)):
        first = detection_stages(det, part, rounds=1, warmup=0)
        n = rounds if tag == "b1" else max(2, rounds // 4)
        if allotment is not None:
            n = allotment.rounds(first.total / 1e3, n, least=1, share=share)
        stages = detection_stages(det, part, n, warmup=0)
        out.update({f"stage_{tag}_{name}_ms": value for name, value in stages.as_dict().items() if value is not None})
    return out


def step_throughput(cfg: Path, weights: Optional[Path], images: torch.Tensor, targets: torch.Tensor, device: str,
                    subdivisions: int, amp: bool, updates: int, warmup: int,
                    channels_last: bool = False, allotment: Optional[Allotment] = None) -> float:
    """Training images/s without the loader: per update, ``subdivisions`` mini-batches of forward, loss and
    backward (with AMP's autocast and gradient scaling when ``amp``), then one SGD step with momentum and
    weight decay. ``images``/``targets``: one update's batch (:func:`training_batch`). With ``allotment``, fewer
    than ``updates`` timed updates where they would not fit (at least 2)."""
    dev = torch.device(device)
    model = Darknet(cfg)
    if weights is not None:
        model.load_darknet_weights(weights)
    model.to(dev).train()
    memory = torch.channels_last if channels_last else torch.contiguous_format
    model.to(memory_format=memory)
    criterion = YoloLoss(model)
    # a small rate keeps random weights finite over the run (the cost of a step does not depend on it)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9, weight_decay=5e-4)
    scaler = torch.amp.GradScaler(dev.type, enabled=amp and dev.type == "cuda")
    chunks = list(zip(images.to(dev).contiguous(memory_format=memory).chunk(subdivisions),
                      _split_targets(targets, images.shape[0], subdivisions)))
    size_hw = tuple(images.shape[-2:])

    def update() -> None:
        for x, t in chunks:
            with torch.autocast(device_type=dev.type, enabled=amp and dev.type == "cuda"):
                outputs = model(x)
            loss, _ = criterion(outputs, t, size_hw)
            scaler.scale(loss / len(chunks)).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    ms = _fitted_medians({"update": update}, updates, warmup, _synchronize(dev), allotment, 1.0)["update"]
    return images.shape[0] * 1e3 / ms


def _split_targets(targets: torch.Tensor, batch: int, parts: int) -> List[torch.Tensor]:
    """The target rows of each mini-batch of ``torch.chunk``, image indices made local to it, on the CPU as the
    trainer passes them (the loss works them out there without waiting for the GPU)."""
    size = -(-batch // parts)
    out = []
    for k in range(parts):
        rows = targets[(targets[:, 0] >= k * size) & (targets[:, 0] < (k + 1) * size)].clone()
        rows[:, 0] -= k * size
        out.append(rows)
    return out
