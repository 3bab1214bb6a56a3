"""The train loader as the trainer takes it: a function of ``(epoch, first update)`` giving that epoch's
mini-batches from that update on.

Data order and augmentation are functions of ``(seed, epoch, index)``, so that a resumed run reads, from the
update it stopped at, the very batches the uninterrupted run would have read.

Why not torchdata's ``StatefulDataLoader``: with nothing in the loader but ``(seed, epoch, index)``, the resume
point is the update number the checkpoint already holds, and the skip is one sampler (:class:`SkipSampler`, which
skips indices without loading them). A stateful loader would add its state to every checkpoint (a new entry, taken
between prefetched batches), a dependency that replaces PyTorch's ``DataLoader``, under the persistent workers whose
sampler is swapped each epoch (:class:`yolo.data.loader.EpochLoader`) and whose shutdown and signal handling
(:mod:`yolo.data.worker_signals`) were made for PyTorch's own; not adopted, not measured.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Tuple

import torch

from yolo.data import EpochLoader
from yolo.data.loader import EpochShuffleSampler
from yolo.data.worker_signals import QuietStart
from yolo.engine.distributed import DistInfo, DistributedEpochSampler, SkipSampler

# (images UInt8[B, 3, H, W], Float[B, 3, H, W] 0..1 or a PendingBatch, targets Float[M, 6], infos) per mini-batch
Batches = Callable[[int, int], Iterable[Tuple[torch.Tensor, torch.Tensor, object]]]


class EpochBatches:
    """Mini-batches of ``mini_batch`` images of ``dataset`` (this process's share under DDP), ``accumulate`` to an
    update; ``multi_scale`` maps a run-wide mini-batch index to the (h, w) its images load at (None: the
    dataset's size). One loader serves the run: its workers persist from epoch to epoch (they start with the stop
    signals held back and ignore them: :mod:`yolo.data.worker_signals`) until :meth:`close`."""

    def __init__(self, dataset, mini_batch: int, accumulate: int, steps_per_epoch: int, workers: int, seed: int,
                 device: torch.device, dist: DistInfo,
                 multi_scale: Optional[Callable[[int], Optional[Tuple[int, int]]]] = None):
        self.dataset, self.mini_batch, self.accumulate = dataset, mini_batch, accumulate
        self.steps_per_epoch, self.workers, self.seed = steps_per_epoch, workers, seed
        self.device, self.dist, self.multi_scale = device, dist, multi_scale
        self.loader: Optional[EpochLoader] = None

    def __call__(self, epoch: int, first_update: int):
        if self.dist.enabled:
            sampler = DistributedEpochSampler(self.dataset, num_replicas=self.dist.world_size, rank=self.dist.rank,
                                              shuffle=True, seed=self.seed)
        else:
            sampler = EpochShuffleSampler(len(self.dataset), self.seed)
        sampler.set_epoch(epoch)
        if first_update:
            sampler = SkipSampler(sampler, first_update * self.accumulate * self.mini_batch)
        if self.loader is None:
            # On CUDA the batches travel pinned and as uint8 (a quarter of the bytes), converted on the device,
            # where the darknet pipeline's float image steps also run (the workers only decode, draw and pack);
            # on the CPU the workers make and convert them, in parallel.
            cuda = self.device.type == "cuda"
            self.loader = EpochLoader(self.dataset, self.mini_batch, self.workers, self.seed, cuda, self.multi_scale,
                                      uint8_images=cuda, pending_images=cuda)
        return QuietStart(self.loader.epoch(sampler, epoch,
                                            (epoch * self.steps_per_epoch + first_update) * self.accumulate))

    def close(self) -> None:
        """Shut the loader's worker processes down (the run ended)."""
        if self.loader is not None:
            self.loader.close()


__all__ = ["Batches", "EpochBatches"]
