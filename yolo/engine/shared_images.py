"""``cache_images`` for a training run: the size checked before any image is decoded, one copy per machine.

The first process of each machine (``LOCAL_RANK`` 0; under ``torchrun`` its rank is ``RANK - LOCAL_RANK``) compares
the bytes of the decoded train images (the label scan's sizes, ``h x w x 3`` each) with the memory available
(:func:`yolo.data.memory.available_memory`, container limits included). When they fit it decodes them into one
buffer (:class:`yolo.data.image_cache.ImageCache`); when they do not, it logs one warning and the run reads the
images from disk as without ``cache_images``. That is the default rather than an error because the cache changes
the speed only: the items, and so the training, are the same either way.

Under ``torchrun`` the buffer is a file in ``/dev/shm`` (the temp folder when ``/dev/shm`` is too small) that
the first process fills while the others of its machine wait; they then map it read-only, and the file's name
is removed at once, so the memory returns to the system when the last process of the run ends, however it ends.
A single process keeps the buffer in its own memory. Loader workers (forked) share the buffer in both cases.
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

from yolo.data.dataset import DetectionDataset
from yolo.data.image_cache import SHARED_MEMORY_FOLDER, ImageCache, fits, size_text, shared_folder, too_big_message
from yolo.data.memory import Available, available_memory
from yolo.engine.distributed import DistInfo, barrier, gather_objects, is_distributed
from yolo.errors import DataError

logger = logging.getLogger(__name__)

# The shared file's name, so that one left by a killed run (killed while it filled) is recognizable.
FILE_PREFIX = "yolo-image-cache-"


def cache_train_images(dataset: DetectionDataset, dist: DistInfo = DistInfo(), progress: bool = False,
                       size_hw: Optional[Tuple[int, int]] = None,
                       available: Optional[Callable[[], Optional[Available]]] = None,
                       folders: Sequence[Path] = (SHARED_MEMORY_FOLDER,)) -> bool:
    """Keep the decoded images of ``dataset`` in memory when they fit, one copy per machine (every process of the
    run calls it, before its loader starts workers). Returns whether the dataset now reads from the cache.
    ``size_hw``: the one size every item is made at (None: several, as with multi-scale), where the pipeline may
    allow smaller images (``DetectionDataset.cache_shapes``).

    ``available`` gives the memory left (default :func:`yolo.data.memory.available_memory`); ``folders`` are where the processes of a machine
    may share the file, the temp folder being the last resort.
    """
    shapes = dataset.cache_shapes(size_hw)
    need = ImageCache.nbytes_of(shapes)
    shared = is_distributed()
    leader = dist.local_rank == 0
    plan: Optional[str] = None  # the leader's: "" keeps the images in process memory, a path shares them
    if leader:
        room = (available or available_memory)()
        if fits(need, room):
            plan = str(shared_folder(need, folders) / f"{FILE_PREFIX}{uuid.uuid4().hex}.bin") if shared else ""
        else:
            logger.warning("%s", too_big_message(need, room, len(shapes)))
    plan = gather_objects(plan)[dist.rank - dist.local_rank]
    if plan is None:
        return False

    cache, failure = None, None
    if leader:
        cache, failure = _fill(dataset, shapes, size_hw, plan, progress)
    outcome = gather_objects(failure)[dist.rank - dist.local_rank]  # also: the others wait here for the fill
    if outcome is not None:
        kind, message = outcome
        if kind == "data":
            raise DataError(message)
        if leader:
            logger.warning("cache_images: %s; training reads the images from disk instead", message)
        return False
    if not leader:
        cache = ImageCache.open(Path(plan), shapes)
    if plan:
        barrier()  # every process of the machine has mapped the file: its name can go
        if leader:
            os.unlink(plan)
    dataset.use_image_cache(cache, size_hw)
    if leader:
        where = f", one copy shared by this machine's processes ({Path(plan).parent})" if plan else ""
        logger.info("cache_images: %d train images decoded and kept in memory (%s)%s", len(shapes),
                    size_text(need), where)
    return True


def _fill(dataset: DetectionDataset, shapes, size_hw, plan: str, progress: bool):
    """``(cache, None)`` filled, or ``(None, (kind, message))``: ``"data"`` for an image that cannot be read (an
    error on every process), ``"room"`` when the shared file cannot be made (the run goes on without a cache)."""
    path = Path(plan) if plan else None
    try:
        cache = ImageCache.create(path, shapes) if path else ImageCache.in_memory(shapes)
    except OSError as e:
        return None, ("room", f"cannot make the shared cache file {path}: {e.strerror or e}")
    try:
        cache.fill(lambda index: dataset.image_to_cache(index, size_hw), progress)
    except DataError as e:
        if path:
            path.unlink(missing_ok=True)
        return None, ("data", str(e))
    except BaseException:
        if path:
            path.unlink(missing_ok=True)
        raise
    return cache, None


__all__ = ["FILE_PREFIX", "cache_train_images"]
