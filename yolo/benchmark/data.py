"""The training data path on one CPU core: milliseconds per training image for each augmentation pipeline, and
Darknet's pipeline against its previous implementation (:mod:`yolo.benchmark.darknet_reference`) in the same run.

One training image is what a loader worker makes of it: the JPEG decoded, augmented at the input size and put
in the ``uint8`` ``3 x H x W`` tensor the collate stacks (:meth:`yolo.data.DetectionDataset.__getitem__`). The
tasks run interleaved round by round (:mod:`yolo.timing`); a round makes every image once. Figures are
medians over the rounds, in milliseconds per image.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import cv2
import numpy as np
import torch

from yolo.benchmark.darknet_reference import reference_darknet_item
from yolo.timing import median_ms, time_interleaved
from yolo.data.darknet_augment import darknet_item
from yolo.data.dataset import DetectionDataset, read_image
from yolo.data.transforms import PIPELINES, augment_from_cfg, item_rng
from yolo.models.cfg import parse_cfg
from yolo.models.head_sections import TRAINED_HEADS
from yolo.ops.sizes import ImageSize, size_text

__all__ = ["pipeline_settings", "data_figures", "training_settings"]


def pipeline_settings(cfg: Path) -> Tuple[Dict[str, Dict[str, float]], Dict[str, str]]:
    """The augmentation settings of each pipeline with ``cfg``'s ``[net]`` and last head's values
    (:func:`yolo.data.transforms.augment_from_cfg`), and why a pipeline cannot take this cfg (e.g. the affine
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


def _darknet_task(make_item: Callable, dataset: DetectionDataset, count: int, size: ImageSize, hyp: Mapping[str, float],
                  outputs: Optional[List[np.ndarray]] = None) -> Callable[[], None]:
    """Decode, Darknet's augmentation by ``make_item`` and the item tensor, as the dataset makes them."""
    def run() -> None:
        for index in range(count):
            image = make_item(dataset.load_sample, index, len(dataset), item_rng(dataset.seed, 0, index), size, hyp)[0]
            tensor = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))
            if outputs is not None:
                outputs.append(tensor)
    return run


def data_figures(dataset: DetectionDataset, cfg: Path, img_size: ImageSize, images: int, rounds: int, warmup: int = 1
                 ) -> Dict[str, float]:
    """Time every pipeline on the first ``images`` items of ``dataset`` (augmented at ``img_size`` with ``cfg``'s
    settings) and Darknet's against its previous implementation; print the table and return the figures:
    ``<pipeline>_ms`` per image, ``darknet_RAM_cache_ms`` (images decoded beforehand), ``darknet_previous_ms``,
    ``darknet_now_ms`` and ``darknet_speedup`` (previous / now), ``darknet_identical`` (1.0 when both made the same
    tensors), ``JPEG_decode_ms`` (the decode alone) and ``darknet_per_decode`` (a Darknet item in decodes of its
    image; ``darknet_per_decode_fastest`` from the fastest rounds)."""
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
    now: List[torch.Tensor] = []
    previous: List[torch.Tensor] = []
    if darknet is not None:
        _darknet_task(darknet_item, dataset, count, img_size, darknet, now)()
        _darknet_task(reference_darknet_item, dataset, count, img_size, darknet, previous)()
        tasks["darknet now"] = _darknet_task(darknet_item, dataset, count, img_size, darknet)
        tasks["darknet previous"] = _darknet_task(reference_darknet_item, dataset, count, img_size, darknet)
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
    if darknet is not None:
        identical = len(now) == len(previous) and all(torch.equal(a, b) for a, b in zip(now, previous))
        figures["darknet_identical"] = float(identical)
        figures["darknet_speedup"] = figures["darknet_previous_ms"] / figures["darknet_now_ms"]
        print(f"darknet: previous / now = {figures['darknet_speedup']:.2f}x, the same images: "
              f"{'yes' if identical else 'NO'}")
    return figures
