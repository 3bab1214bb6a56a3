"""The training loader alone, with several worker counts: images per second, the training process's CPU time
per mini-batch and the threads of each worker.

The loader is the trainer's on CUDA (:class:`yolo.data.EpochLoader`, persistent workers, ``uint8`` batches, the
``darknet`` pipeline's image steps left for the device, each batch's shared buffer released as pinning releases
it); nothing else consumes the batches, so the figures are the most the loader can feed a step. Each worker count gets a
fresh loader; its first ``warmup`` mini-batches (worker start-up, first touches) are not timed. The main
process's CPU time (user + system, all its threads: collation of the workers' batches arrives ready, so this is
the cost of receiving them) is what the training loop pays per mini-batch on top of its step.
"""
from __future__ import annotations

import os
import resource
import time
from typing import Dict, Sequence

from torch.utils.data import Dataset

from yolo.data import EpochLoader
from yolo.data.darknet_batched import PendingBatch
from yolo.data.loader import EpochShuffleSampler
from yolo.device import cpu_threads
from yolo.ops.sizes import size_text

__all__ = ["loader_figures"]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process, every thread; not its children
    return usage.ru_utime + usage.ru_stime


def _threads(pid: int) -> int:
    """Threads of process ``pid`` (Linux's /proc; -1 where it cannot be read)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return -1


def loader_figures(dataset: Dataset, mini_batch: int, workers: Sequence[int], batches: int, warmup: int = 2,
                   seed: int = 0) -> Dict[str, float]:
    """Time ``batches`` mini-batches of ``mini_batch`` images of ``dataset`` (augmented, at its ``img_size``) with
    each worker count; print a table and return ``loader_<n>w_images_per_s``, ``loader_<n>w_main_cpu_ms`` (the
    training process's CPU milliseconds per mini-batch) and ``loader_<n>w_threads`` (the most threads of one
    worker, after its batches)."""
    figures: Dict[str, float] = {}
    print(f"\ntraining loader alone, mini-batches of {mini_batch} at {size_text(dataset.img_size)}, "
          f"{batches} timed after {warmup}, {cpu_threads()} CPU(s) usable:")
    print(f"{'workers':<10}{'img/s':>10}{'main CPU ms/batch':>20}{'threads/worker':>16}")
    for count in workers:
        loader = EpochLoader(dataset, mini_batch, num_workers=count, seed=seed, uint8_images=True,
                             pending_images=True)
        sampler = EpochShuffleSampler(len(dataset), seed)
        epochs, done, threads = 0, 0, []
        t0 = cpu0 = 0.0
        iterator = None
        while done < batches + warmup:
            iterator = iter(loader.epoch(sampler, epochs))
            for images, _, _ in iterator:
                if isinstance(images, PendingBatch):
                    images.release()
                done += 1
                if done == warmup:
                    t0, cpu0 = time.perf_counter(), _cpu_seconds()
                if done == batches + warmup:
                    break
            epochs += 1
        seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
        for process in getattr(iterator, "_workers", []):  # the DataLoader's worker processes (private, stable)
            threads.append(_threads(process.pid))
        del iterator, loader
        rate = batches * mini_batch / max(seconds, 1e-9)
        most = max(threads) if threads else 0
        figures.update({f"loader_{count}w_images_per_s": rate, f"loader_{count}w_main_cpu_ms": 1e3 * cpu / batches,
                        f"loader_{count}w_threads": float(most)})
        print(f"{count:<10}{rate:>10.1f}{1e3 * cpu / batches:>20.2f}{most if threads else '-':>16}")
    return figures
