"""Decoded training images kept in memory (``cache_images``): one flat buffer, sized before it is filled.

Image ``i`` is ``buffer[offsets[i]:offsets[i + 1]]`` viewed as ``shapes[i]`` (``h x w x 3`` RGB ``uint8``), so
images of every size share one ``uint8`` array. The buffer is process memory for one training process, or a
memory-mapped file that the processes of one machine map together (:mod:`yolo.engine.shared_images`): one copy
per machine, which forked loader workers share too. Items read from it are read-only views.

:func:`fits` is the size check made before any image is decoded: the cache may take at most
:data:`CACHE_SHARE` of the memory available (:func:`yolo.data.memory.available_memory`), the rest staying for
the model, the loader workers and their batches.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
from tqdm import tqdm

from yolo.data.memory import Available
from yolo.device import cpu_threads
from yolo.progress import ProgressLines

logger = logging.getLogger(__name__)

# The share of the available memory the cache may take; the rest is for the training itself (the model, one
# Python process per loader worker, the batches in flight), which needs a few GB on its own.
CACHE_SHARE = 0.75
# Threads that decode while the cache fills, at most one per usable core (the JPEG decoder releases the GIL).
FILL_THREADS = 8
# Where the processes of one machine meet to share a cache: memory, when it has room; the temp folder else.
SHARED_MEMORY_FOLDER = Path("/dev/shm")


def bytes_text(n: int) -> str:
    """``n`` bytes for a message: ``109.2 GB``, ``19.6 MB``, ``19.6 kB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e3:.1f} kB"


def fits(need: int, available: Optional[Available]) -> bool:
    """True when ``need`` bytes are at most :data:`CACHE_SHARE` of ``available`` (True when that is unknown)."""
    return available is None or need <= CACHE_SHARE * available.bytes


def too_big_message(need: int, available: Available, images: int) -> str:
    """The one warning line of a cache that does not fit."""
    return (f"cache_images: the {images} decoded train images need {bytes_text(need)}, more than "
            f"{CACHE_SHARE:.0%} of the {bytes_text(available.bytes)} available ({available.where}); training "
            f"reads them from disk instead (the same items, more decoding)")


class ImageCache:
    """Images ``h x w x 3`` ``uint8`` in one flat buffer.

    Args:
        buffer: ``UInt8[total]``, process memory or a ``np.memmap`` (:meth:`create`, :meth:`open`).
        shapes: ``Int64[N, 3]`` (h, w, 3) of each image; the offsets follow from them.
    """

    def __init__(self, buffer: np.ndarray, shapes: np.ndarray):
        self.shapes = np.asarray(shapes, np.int64).reshape(-1, 3)
        self.offsets = np.concatenate([[0], np.cumsum(self.shapes.prod(axis=1))]).astype(np.int64)
        if buffer.size != self.offsets[-1]:
            raise ValueError(f"image cache buffer holds {buffer.size} bytes, the images need {self.offsets[-1]}")
        self.buffer = buffer

    @staticmethod
    def nbytes_of(shapes: np.ndarray) -> int:
        """The bytes images of these ``(h, w, 3)`` shapes take (the size check's figure)."""
        return int(np.asarray(shapes, np.int64).reshape(-1, 3).prod(axis=1).sum())

    @classmethod
    def in_memory(cls, shapes: np.ndarray) -> "ImageCache":
        """An empty cache in this process's memory."""
        return cls(np.empty(cls.nbytes_of(shapes), np.uint8), shapes)

    @classmethod
    def create(cls, path: Path, shapes: np.ndarray) -> "ImageCache":
        """An empty cache in a new file at ``path``, its blocks reserved now (a full disk or ``/dev/shm`` is an
        ``OSError`` here, not a crash while writing the mapped pages)."""
        nbytes = cls.nbytes_of(shapes)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if nbytes and hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, nbytes)
            else:
                os.ftruncate(fd, nbytes)
        finally:
            os.close(fd)
        buffer = np.memmap(path, np.uint8, "r+", shape=(nbytes,)) if nbytes else np.zeros(0, np.uint8)
        return cls(buffer, shapes)

    @classmethod
    def open(cls, path: Path, shapes: np.ndarray) -> "ImageCache":
        """The cache another process filled at ``path``, mapped read-only."""
        nbytes = cls.nbytes_of(shapes)
        buffer = np.memmap(path, np.uint8, "r", shape=(nbytes,)) if nbytes else np.zeros(0, np.uint8)
        return cls(buffer, shapes)

    @property
    def nbytes(self) -> int:
        return int(self.offsets[-1])

    def __len__(self) -> int:
        return len(self.shapes)

    def __getitem__(self, index: int) -> np.ndarray:
        """Image ``index``, a read-only ``h x w x 3`` view of the buffer."""
        view = self.buffer[self.offsets[index]:self.offsets[index + 1]].view(np.ndarray)
        view = view.reshape(tuple(self.shapes[index]))
        view.setflags(write=False)
        return view

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def put(self, index: int, image: np.ndarray) -> None:
        """Write image ``index`` (its shape must be the one the cache was laid out with)."""
        if tuple(image.shape) != tuple(self.shapes[index]):
            raise ValueError(f"image {index} is {image.shape}, the cache holds {tuple(self.shapes[index])}")
        self.buffer[self.offsets[index]:self.offsets[index + 1]] = image.reshape(-1)

    def fill(self, load: Callable[[int], np.ndarray], progress: bool = False, threads: int = FILL_THREADS) -> None:
        """Decode every image with ``load(i) -> h x w x 3 uint8`` (several at once) into its place; a bar on a
        terminal when ``progress``, else a log line every ``yolo.progress.LINE_SECONDS``."""
        what = "caching train images"
        bar = tqdm(total=len(self), desc=what, unit="img", disable=not progress, dynamic_ncols=True, leave=False)
        lines = ProgressLines(what, len(self), not progress, logger)
        done = 0
        try:
            with ThreadPoolExecutor(max(1, min(threads, cpu_threads()))) as pool:
                for _ in pool.map(lambda i: self.put(i, load(i)), range(len(self))):
                    done += 1
                    bar.update(1)
                    lines.update(done)
        finally:
            bar.close()
        if isinstance(self.buffer, np.memmap):
            self.buffer.flush()




def shared_folder(need: int, candidates: Sequence[Path] = (SHARED_MEMORY_FOLDER,)) -> Path:
    """Where the processes of one machine share a cache of ``need`` bytes: the first of ``candidates`` (memory,
    ``/dev/shm``) with room for it, else the temp folder (the page cache then holds the file)."""
    for folder in candidates:
        try:
            if folder.is_dir() and os.access(folder, os.W_OK) and shutil.disk_usage(folder).free > need:
                return folder
        except OSError:
            continue
    return Path(tempfile.gettempdir())


__all__ = ["CACHE_SHARE", "ImageCache", "fits", "bytes_text", "shared_folder", "too_big_message"]
