"""A DataLoader with the project's collate and a seeded shuffle; the training loader of a whole run."""
from __future__ import annotations

import os
from typing import Callable, Iterator, List, Optional, Tuple

import cv2
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from yolo.data.collate import collate_fn, collate_uint8
from yolo.data.worker_signals import ignore_stop_signals, is_worker_death
from yolo.device import cpu_threads
from yolo.errors import ConfigError

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows
    resource = None

# Open files a loader worker costs the main process: its queue's pipe and process sentinel, and the shared-memory
# handles of the batches it has ready (two ahead, a few tensors each) while they are received; measured: 2 workers
# run under ``ulimit -n 40``, not under 20.
FILES_PER_WORKER = 12
FILES_SPARE = 16
from yolo.ops.sizes import ImageSize


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


class SizedBatchSampler(Sampler[List[Tuple[int, ImageSize, int]]]):
    """Mini-batches of ``(index, (h, w), epoch)``: every image of mini-batch ``i`` is loaded at
    ``size_of(first + i)`` and augmented as in ``epoch`` (the last :meth:`set_epoch`).

    This is how a multi-scale size reaches the dataset (and its worker processes) before the images are
    decoded and augmented, as Darknet loads a resized batch at the new size rather than scaling it after; the
    epoch travels the same way, so that worker processes kept across epochs augment each epoch as its own.
    ``first`` is the run-wide index of the first mini-batch (a resumed epoch starts past 0).
    """

    def __init__(self, sampler: Sampler[int], batch_size: int, size_of: Callable[[int], ImageSize],
                 first: int = 0):
        self.sampler, self.batch_size, self.size_of, self.first = sampler, int(batch_size), size_of, int(first)
        self.epoch = 0
        self.pending_images = False  # ask the dataset for pending images (yolo.data.darknet_batched)

    def __iter__(self):
        batch: List[int] = []
        number = self.first
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:  # whole mini-batches only (drop_last)
                hw = tuple(int(v) for v in self.size_of(number))
                yield [(i, hw, self.epoch, True) if self.pending_images else (i, hw, self.epoch) for i in batch]
                batch, number = [], number + 1

    def __len__(self) -> int:
        return len(self.sampler) // self.batch_size

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)


def one_thread_per_worker(worker_id: int) -> None:
    """``worker_init_fn``: one thread in each loader worker, torch's and OpenCV's (the workers are the
    parallelism; more threads per worker only compete for the same cores: OpenCV would otherwise start its own
    pool of one thread per core in every worker, at the worker's first resize).

    OpenCV's count is set to 0 (no threading at all), never to 1: in a forked worker, a count other than 0
    reconfigures the thread pool inherited from the parent, whose threads the fork did not copy, and crashes
    the worker when the parent's pool had started (OpenCV 4.14 with pthreads); 0 only switches the pool off.
    Results do not depend on it: OpenCV splits the rows of an image among threads, each row computed alike."""
    torch.set_num_threads(1)
    cv2.setNumThreads(0)


def default_workers(mini_batch: int, processes_per_machine: int = 1, cpus: Optional[int] = None) -> int:
    """The loader workers of one training process when ``--workers`` is not given: the CPUs this process may use
    (its affinity mask, ``os.sched_getaffinity``; ``cpus`` overrides it), all but one (the training loop's),
    shared among the ``processes_per_machine`` training processes of the machine (DDP: ``LOCAL_WORLD_SIZE``), and
    never more than ``mini_batch`` (a worker makes one mini-batch at a time, and the loader asks each for two
    ahead: more workers than images in a mini-batch only hold memory)."""
    if cpus is None:
        cpus = cpu_threads()
    share = max(0, cpus - 1) // max(1, int(processes_per_machine))
    return max(0, min(share, int(mini_batch)))


def ensure_open_files(workers: int) -> None:
    """Make room for ``workers`` loader workers under the open-file limit (``ulimit -n``): raise the soft limit
    up to the hard one where needed (as a shell's ``ulimit -n`` would), else a :class:`ConfigError` that says
    what to do. Without the room, PyTorch's shared-memory handles run out ("Too many open files") in a worker's
    feeder thread, and the main process waits forever for a batch that never comes."""
    if workers <= 0 or resource is None:
        return
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        return  # no /proc: nothing to count with
    need = open_now + FILES_SPARE + FILES_PER_WORKER * workers
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard == resource.RLIM_INFINITY or hard >= need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY else min(hard, max(
            need, 4096)), hard))
        return
    raise ConfigError(f"the open-file limit (ulimit -n) is {hard}: {workers} data loader worker(s) need about {need} "
                      f"open files ({open_now} are open); raise the limit (ulimit -n {max(1024, need)}) or use fewer "
                      "--workers (0: load in the main process)")


def init_worker(worker_id: int) -> None:
    """The ``worker_init_fn`` of the project's loaders: one torch thread (:func:`one_thread_per_worker`), and the
    stop signals left to the main process (:func:`yolo.data.worker_signals.ignore_stop_signals`)."""
    one_thread_per_worker(worker_id)
    ignore_stop_signals()


class EpochLoader:
    """The training loader of a whole run: one ``DataLoader`` whose worker processes start once and persist
    across epochs (each with one torch thread and the stop signals left to the main process, :func:`init_worker`)
    instead of starting again every epoch.

    Each epoch takes its own sampler (:meth:`epoch`); the items carry their epoch to the workers
    (:class:`SizedBatchSampler`), so the data stay a function of ``(seed, epoch, index)`` and a resumed run sees
    the same batches. Batches as :func:`create_dataloader`'s, whole mini-batches only. With ``size_of``
    (multi-scale: run-wide mini-batch index -> ``(h, w)``) the images of each mini-batch load at that size (None:
    the dataset's ``img_size``). With ``uint8_images`` the images stay ``UInt8[B, 3, H, W]``
    (:func:`yolo.data.collate.collate_uint8`) for the consumer to convert; with ``pending_images`` as well, the
    ``darknet`` pipeline's images come as a :class:`yolo.data.darknet_batched.PendingBatch` for the consumer to
    finish on its device (the workers then only decode, draw and pack).
    """

    def __init__(self, dataset: Dataset, batch_size: int, num_workers: int = 0, seed: int = 0,
                 pin_memory: bool = False, size_of: Optional[Callable[[int], ImageSize]] = None,
                 uint8_images: bool = False, pending_images: bool = False):
        if pending_images and not uint8_images:
            raise ValueError("pending_images needs uint8_images (the consumer finishes the batch)")
        ensure_open_files(num_workers)
        img_size: ImageSize = dataset.img_size
        self.batches = SizedBatchSampler([], batch_size, size_of or (lambda number: img_size))
        self.batches.pending_images = bool(pending_images)
        generator = torch.Generator()
        generator.manual_seed(int(seed))
        self.loader = DataLoader(dataset, batch_sampler=self.batches, num_workers=num_workers,
                                 collate_fn=collate_uint8 if uint8_images else collate_fn,
                                 pin_memory=pin_memory, generator=generator, persistent_workers=num_workers > 0,
                                 worker_init_fn=init_worker if num_workers > 0 else None)

    def epoch(self, sampler: Sampler[int], epoch: int, first_batch: int = 0) -> DataLoader:
        """The loader for ``epoch``: ``sampler``'s indices (its epoch set here), ``first_batch`` the run-wide index
        of the epoch's first mini-batch."""
        self.batches.sampler, self.batches.first = sampler, int(first_batch)
        set_epoch(self.loader, epoch)
        return self.loader

    def close(self) -> None:
        """Shut the worker processes down now (they also end with the process): they hold copies of the files
        the main process had open when they started, the run folder's lock among them."""
        shut_down_workers(getattr(self.loader, "_iterator", None))  # the persistent workers' (DataLoader's own)
        self.loader._iterator = None


def shut_down_workers(iterator: Optional[Iterator]) -> None:
    """End the worker processes of a ``DataLoader`` iterator now; nothing for one without workers or already ended.

    PyTorch ends them when the iterator is freed. An iterator that an exception's traceback still holds (an
    evaluation that failed, kept by its caller) is freed only by a later garbage collection, which then waits
    5 s for each worker before it ends it."""
    if iterator is None or not hasattr(iterator, "_shutdown_workers"):
        return
    for _ in range(8):
        try:
            iterator._shutdown_workers()  # a no-op once it has run
            return
        except RuntimeError as exc:
            # PyTorch's SIGCHLD handler reports a worker of any loader that died while we wait: that death was
            # reported where it happened; the shutdown goes on for the workers left.
            if not is_worker_death(exc):
                raise


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
    ensure_open_files(num_workers)
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
        persistent_workers=False,  # workers must pick up dataset.set_epoch() each epoch (EpochLoader keeps them)
        worker_init_fn=init_worker if num_workers > 0 else None,
    )
