"""A DataLoader with the project's collate and a seeded shuffle."""
from __future__ import annotations

from typing import Iterator, Optional

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from .collate import collate_fn


class EpochShuffleSampler(Sampler[int]):
    """A shuffle that is a pure function of ``(seed, epoch)`` (like ``DistributedSampler`` on one
    process), so a resumed run sees the same order. Call :meth:`set_epoch` every epoch."""

    def __init__(self, num_items: int, seed: int = 0):
        self.num_items, self.seed, self.epoch = int(num_items), int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.seed * 1_000_003 + self.epoch)
        return iter(torch.randperm(self.num_items, generator=generator).tolist())

    def __len__(self) -> int:
        return self.num_items


def set_epoch(loader: DataLoader, epoch: int) -> None:
    """Select ``epoch``'s shuffle (sampler) and augmentation (dataset) before iterating ``loader``."""
    for obj in (loader.sampler, getattr(loader, "batch_sampler", None), loader.dataset):
        if hasattr(obj, "set_epoch"):
            obj.set_epoch(epoch)


def create_dataloader(dataset: Dataset, batch_size: int, shuffle: bool = False, num_workers: int = 0,
                      seed: int = 0, drop_last: bool = False, sampler: Optional[Sampler] = None,
                      pin_memory: bool = False) -> DataLoader:
    """``DataLoader`` yielding ``(images Float[B,3,H,W], targets Float[M,6], infos)``.

    The shuffle order is a function of ``(seed, epoch)`` (:class:`EpochShuffleSampler`) and the
    augmentation comes from the dataset's per-item seeding, so batches do not depend on
    ``num_workers`` and a resumed run sees the same data. Call :func:`set_epoch` before each
    epoch. Pass a ``sampler`` (e.g. ``DistributedSampler``) for DDP; ``shuffle`` is then ignored.
    """
    if sampler is None and shuffle:
        sampler = EpochShuffleSampler(len(dataset), seed)
    generator = torch.Generator()
    generator.manual_seed(int(seed))
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate_fn,
        drop_last=drop_last,
        pin_memory=pin_memory,
        generator=generator,
        persistent_workers=False,  # workers must pick up dataset.set_epoch() each epoch
    )
