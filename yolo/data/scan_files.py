"""What a dataset scan reads from the file system, bounded: the images under a split folder, and each new image
checked and measured (several at a time).

A split folder is walked without following links to folders (a link loop cannot make it endless), never into
the kernel's virtual file systems (``/proc``, ``/sys``, ``/dev``: a split that is the root ``/`` would otherwise
read processes' memory maps as images), and at most :data:`MAX_WALKED` entries: a split folder set to a whole
disk by mistake stops with one line instead of scanning for hours.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from tqdm import tqdm

from yolo.device import cpu_threads
from yolo.errors import DataError
from yolo.files.images import DATASET_IMAGE_SUFFIXES, image_file_size

# The folders no dataset lives in: the kernel's views of processes, devices and drivers.
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
# The most directory entries a split folder's walk visits (files and folders; COCO's train2017 has 118,287).
MAX_WALKED = 5_000_000
# From this many images to check, the check shows a progress bar.
BAR_FROM = 2000

# An image's check: ``((height, width), None)``, ``(None, reason)`` about its content, or the error that stopped
# it this time (an OSError such as too many open files, a MemoryError), which is no verdict about the file.
CheckResult = Union[Tuple[Optional[Tuple[int, int]], Optional[str]], BaseException]


def _is_system_folder(path: str) -> bool:
    return any(path == folder or path.startswith(folder + os.sep) for folder in SYSTEM_FOLDERS)


def images_under(folder: Path, limit: int = MAX_WALKED) -> List[Path]:
    """The image files under ``folder`` (their suffix one of ``DATASET_IMAGE_SUFFIXES``, a regular file or a link to
    one), sorted; folders reached through links are not entered, nor ``/proc``, ``/sys`` and ``/dev``. More than
    ``limit`` entries is a :class:`DataError` naming the folder."""
    images, walked = [], 0
    for top, folders, files in _walk(folder):
        walked += len(folders) + len(files)
        if walked > limit:
            raise DataError(f"more than {limit:,} files and folders under this split folder, scan stopped: give the "
                            "folder that holds the split's images (or a .txt list of them)", folder)
        for name in files:
            path = Path(top, name)
            if path.suffix.lower() in DATASET_IMAGE_SUFFIXES and path.is_file():
                images.append(path)
    return sorted(images)


def _walk(folder: Path) -> Iterator[Tuple[str, List[str], List[str]]]:
    for top, folders, files in os.walk(folder, followlinks=False):
        folders[:] = [name for name in folders if not _is_system_folder(os.path.join(top, name))]
        yield top, folders, files


def _check(path: Path) -> CheckResult:
    try:
        return image_file_size(path)
    except (OSError, MemoryError) as exc:
        return exc


def check_images(paths: Sequence[Path], what: str = "") -> List[CheckResult]:
    """:func:`yolo.files.images.image_file_size` of each of ``paths`` (decoded by OpenCV: several at a time, on
    the cores this process may use), in their order; an error that stopped a check this time is returned in
    its place."""
    if not paths:
        return []
    threads = min(cpu_threads(), len(paths), 16)
    with ThreadPoolExecutor(threads) as pool:  # OpenCV's decoders release the GIL
        results = pool.map(_check, paths)
        if len(paths) >= BAR_FROM:
            results = tqdm(results, total=len(paths), desc=f"checking {what}", unit="img")
        return list(results)


def transient_reason(exc: BaseException) -> str:
    """Why an image could not be checked this time (``exc`` from :func:`check_images`), for its problem line."""
    if isinstance(exc, MemoryError):
        return "out of memory while reading it"
    return f"cannot read it now ({exc.strerror or exc})" if isinstance(exc, OSError) else str(exc)


__all__ = ["MAX_WALKED", "SYSTEM_FOLDERS", "check_images", "images_under", "transient_reason"]
