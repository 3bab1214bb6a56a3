"""``cache_images`` for a training run: the size checked before any image is decoded, one copy per machine.

The first process of each machine (``LOCAL_RANK`` 0; under ``torchrun`` its rank is ``RANK - LOCAL_RANK``) compares
the bytes of the decoded train images (the label scan's sizes, ``h x w x 3`` each) with the memory available
(:func:`yolo.data.memory.available_memory`, container limits included). When they fit it decodes them into one
buffer (:class:`yolo.data.image_cache.ImageCache`); when they do not, it logs one warning and the run reads the
images from disk as without ``cache_images``. That is the default rather than an error because the cache changes
the speed only: the items, and so the training, are the same either way.

Under ``torchrun`` the buffer is a file in ``/dev/shm`` (the temp folder when ``/dev/shm`` is too small), its
blocks reserved up front (no room is a warning, not a crash while writing). The others of the machine map it
read-only, its name is removed, and then the first process fills it while they wait: the memory returns to the
system when the last process of the run ends, however it ends. A single process keeps the buffer in its own
memory. Loader workers (forked) share the buffer in both cases. Where the memory available cannot be read (no
``/proc``), the cache is made as asked.
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

from yolo.data.dataset import DetectionDataset
from yolo.data.image_cache import SHARED_MEMORY_FOLDER, ImageCache, fits, bytes_text, shared_folder, too_big_message
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
    allow smaller images (``DetectionDataset.cache_shapes``). ``available`` gives the memory left (default
    :func:`yolo.data.memory.available_memory`); ``folders`` are where the processes of a machine may share the
    file, the temp folder being the last resort.
    """
    shapes = dataset.cache_shapes(size_hw)
    need = ImageCache.nbytes_of(shapes)
    leader = dist.local_rank == 0

    def leaders(value):  # the value of this machine's first process (RANK - LOCAL_RANK), on every process
        return gather_objects(value)[dist.rank - dist.local_rank]

    plan: Optional[str] = None  # the leader's: "" keeps the images in process memory, a path shares them
    if leader:
        room = (available or available_memory)()
        if fits(need, room):
            shared = is_distributed()
            plan = str(shared_folder(need, folders) / f"{FILE_PREFIX}{uuid.uuid4().hex}.bin") if shared else ""
        else:
            logger.warning("%s", too_big_message(need, room, len(shapes)))
    plan = leaders(plan)
    if plan is None:
        return False

    cache, problem = None, None
    if leader:
        try:
            cache = ImageCache.create(Path(plan), shapes) if plan else ImageCache.in_memory(shapes)
        except OSError as e:
            problem = f"cannot make the shared cache file {plan}: {e.strerror or e}"
            logger.warning("cache_images: %s; training reads the images from disk instead", problem)
    if leaders(problem) is not None:
        return False
    if plan:
        # Everyone maps the file before it is filled, and its name goes at once: from here on the memory returns
        # to the system when the last process ends, however it ends.
        if not leader:
            cache = ImageCache.open(Path(plan), shapes)
        barrier()
        if leader:
            os.unlink(plan)

    failure = None
    if leader:
        try:
            cache.fill(lambda index: dataset.image_to_cache(index, size_hw), progress)
        except DataError as e:  # an image that cannot be read: the same error on every process
            failure = str(e)
    failure = leaders(failure)  # the others wait here while the leader fills
    if failure is not None:
        raise DataError(failure)
    dataset.use_image_cache(cache, size_hw)
    if leader:
        where = f", one copy shared by this machine's processes ({Path(plan).parent})" if plan else ""
        logger.info("cache_images: %d train images decoded and kept in memory (%s)%s", len(shapes),
                    bytes_text(need), where)
    return True


__all__ = ["FILE_PREFIX", "cache_train_images"]
