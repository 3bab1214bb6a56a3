"""The training data path on one CPU core: milliseconds per training image for each augmentation pipeline.

One training image is what a loader worker makes of it: the JPEG decoded, augmented at the input size and put
in the ``uint8`` ``3 x H x W`` tensor the collate stacks (:meth:`yolo.data.DetectionDataset.__getitem__`). The
tasks run interleaved round by round (:mod:`yolo.timing`); a round makes every image once. Figures are
medians over the rounds, in milliseconds per image.

Darknet's pipeline is also timed as the trainer runs it on CUDA (:mod:`yolo.data.darknet_batched`): the worker's
part (decode, draws, truths, the pending image and the batch's packing) and, apart, the device stage that
finishes the packed batch (copy and float steps), in the training process's CPU time and in wall time, on CUDA
where there is one, else on this CPU.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import time

import cv2
import torch

from yolo.timing import median_ms, time_interleaved
from yolo.data.darknet_batched import PendingBatch
from yolo.data.dataset import DetectionDataset
from yolo.data.image_record import read_image
from yolo.data.augment_hyp import PIPELINES, augment_from_cfg
from yolo.models.cfg import parse_cfg
from yolo.models.head_sections import TRAINED_HEADS
from yolo.ops.sizes import ImageSize, size_text

__all__ = ["pipeline_settings", "data_figures", "training_settings"]


def pipeline_settings(cfg: Path) -> Tuple[Dict[str, Dict[str, float]], Dict[str, str]]:
    """The augmentation settings of each pipeline with ``cfg``'s ``[net]`` and last head's values
    (:func:`yolo.data.augment_hyp.augment_from_cfg`), and why a pipeline cannot take this cfg (e.g. the affine
    one refuses ``letter_box=1``)."""
    sections = parse_cfg(cfg)
    net, heads = sections[0], [s for s in sections if s.type in TRAINED_HEADS]
    settings, refused = {}, {}
    for pipeline in PIPELINES:
        try:
            settings[pipeline] = augment_from_cfg(net, heads, overrides={"pipeline": pipeline})
        except ValueError as exc:
            refused[pipeline] = str(exc)
    return settings, refused


def training_settings(cfg: Path) -> Dict[str, float]:
    """The augmentation a training run of ``cfg`` takes by default (its pipeline and values)."""
    sections = parse_cfg(cfg)
    return augment_from_cfg(sections[0], [s for s in sections if s.type in TRAINED_HEADS])


def _item_task(dataset: DetectionDataset, count: int, size: ImageSize) -> Callable[[], None]:
    def run() -> None:
        for index in range(count):
            dataset[(index, size)]
    return run


def _decode_task(dataset: DetectionDataset, count: int) -> Callable[[], None]:
    """The JPEG decode alone (the dataset's own read), the unit the items are compared with: machines of one kind
    differ in absolute milliseconds, the item's cost in decodes of the same image does not."""
    def run() -> None:
        for index in range(count):
            read_image(dataset.records[index].path)
    return run


def _pending_task(dataset: DetectionDataset, count: int, size: ImageSize, batches: List[PendingBatch]
                  ) -> Callable[[], None]:
    """A worker's part with the image steps left for the device: the items (decode, draws, truths, pending
    images) and their packing into one batch in shared memory, as a worker packs it (the previous batch
    released first, as the training process releases each once it has pinned it); kept in ``batches``."""
    def run() -> None:
        if batches:
            batches[0].release()
        batches[:] = [PendingBatch.pack([dataset[(index, size, 0, True)][0] for index in range(count)], shared=True)]
    return run


def device_stage_ms(batch: PendingBatch, device: torch.device, rounds: int) -> Tuple[float, float]:
    """The device stage of one packed batch (copy to ``device`` and :meth:`PendingBatch.finish`), per image:
    ``(CPU ms of this process, wall ms)``, medians of ``rounds`` synchronized runs after one untimed."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        batch = batch.pin_memory()
    cpu, wall = [], []
    for _ in range(rounds + 1):
        c0, t0 = time.process_time(), time.perf_counter()
        batch.to(device, non_blocking=True).finish()
        sync()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    count = batch.shape[0]
    return median_ms(cpu[1:]) / count, median_ms(wall[1:]) / count


def data_figures(dataset: DetectionDataset, cfg: Path, img_size: ImageSize, images: int, rounds: int, warmup: int = 1,
                 stage_device: Optional[torch.device] = None) -> Dict[str, float]:
    """Time every pipeline on the first ``images`` items of ``dataset`` (augmented at ``img_size`` with ``cfg``'s
    settings); print the table and return the figures: ``<pipeline>_ms`` per image, ``darknet_RAM_cache_ms``
    (images decoded beforehand), ``JPEG_decode_ms`` (the decode alone) and ``darknet_per_decode`` (a Darknet item in
    decodes of its image; ``darknet_per_decode_fastest`` from the fastest rounds); with the image steps on
    ``stage_device`` (default the CPU): ``darknet_worker_ms`` (the worker's part), ``darknet_stage_cpu_ms`` and
    ``darknet_stage_wall_ms`` (the device stage, per image), ``darknet_worker_per_decode`` (and ``_fastest``) and
    ``darknet_worker_and_stage_per_decode`` (the worker's part plus the stage's CPU time, in decodes)."""
    count = min(int(images), len(dataset))
    settings, refused = pipeline_settings(cfg)
    tasks: Dict[str, Callable[[], None]] = {}
    for pipeline, hyp in settings.items():
        copy = DetectionDataset(dataset.records, dataset.names, img_size, augment=True, hyp=hyp, seed=dataset.seed)
        tasks[pipeline] = _item_task(copy, count, img_size)
    darknet = settings.get("darknet")
    if darknet is not None:  # the same without the JPEG decode (DetectionDataset.cache_images)
        in_memory = DetectionDataset(dataset.records[:count], dataset.names, img_size, augment=True, hyp=darknet,
                                     seed=dataset.seed)
        in_memory.cache_images()
        tasks["darknet, RAM cache"] = _item_task(in_memory, count, img_size)
    pending: List[PendingBatch] = []
    if darknet is not None:  # the worker's part when the image steps run on the device
        steps = DetectionDataset(dataset.records, dataset.names, img_size, augment=True, hyp=darknet, seed=dataset.seed)
        tasks["darknet, device steps"] = _pending_task(steps, count, img_size, pending)
    tasks["JPEG decode"] = _decode_task(dataset, count)
    times = time_interleaved(tasks, rounds, warmup)
    figures: Dict[str, float] = {}
    print(f"\ntraining data path, {torch.get_num_threads()} torch / {cv2.getNumThreads()} OpenCV thread(s), {count} "
          f"images at {size_text(img_size)}, median of {rounds} rounds (decode + augmentation + item tensor):")
    print(f"{'pipeline':<22}{'ms/img':>10}{'img/s':>10}")
    for name, seconds in times.items():
        ms = median_ms(seconds) / count
        figures[name.replace(",", "").replace(" ", "_") + "_ms"] = ms
        print(f"{name:<22}{ms:>10.2f}{1e3 / ms:>10.1f}")
    for pipeline, why in refused.items():
        print(f"{pipeline:<22}{'-':>10}{'-':>10}  ({why})")
    if darknet is not None:
        # in the JPEG decodes of the same images, same run; the fastest rounds too: on a busy machine the other
        # processes lengthen the longer task more often
        figures["darknet_per_decode"] = figures["darknet_ms"] / figures["JPEG_decode_ms"]
        figures["darknet_per_decode_fastest"] = min(times["darknet"]) / min(times["JPEG decode"])
        print(f"darknet item / JPEG decode: {figures['darknet_per_decode']:.2f} (medians), "
              f"{figures['darknet_per_decode_fastest']:.2f} (fastest rounds)")
    if pending:
        device = stage_device or torch.device("cpu")
        stage_cpu, stage_wall = device_stage_ms(pending[0], device, rounds)
        figures.update(darknet_worker_ms=figures["darknet_device_steps_ms"], darknet_stage_cpu_ms=stage_cpu,
                       darknet_stage_wall_ms=stage_wall)
        figures["darknet_worker_per_decode"] = figures["darknet_worker_ms"] / figures["JPEG_decode_ms"]
        figures["darknet_worker_per_decode_fastest"] = min(times["darknet, device steps"]) / min(times["JPEG decode"])
        figures["darknet_worker_and_stage_per_decode"] = (figures["darknet_worker_ms"] + stage_cpu) / \
            figures["JPEG_decode_ms"]
        print(f"darknet with the image steps on {device.type}: the worker's part {figures['darknet_worker_ms']:.2f} "
              f"ms/img ({figures['darknet_worker_per_decode']:.2f} decodes, "
              f"{figures['darknet_worker_per_decode_fastest']:.2f} in the fastest rounds); the device stage (batch of {count}) "
              f"{stage_cpu:.2f} ms/img of this process's CPU, {stage_wall:.2f} ms/img wall; worker + stage CPU: "
              f"{figures['darknet_worker_and_stage_per_decode']:.2f} decodes")
    return figures
