"""What detection runs on: image files, videos and cameras, named by one ``--source`` string.

:func:`collect_sources` expands a file, folder, glob or camera index into :class:`SourceItem` s;
:class:`VideoReader` yields the BGR ``uint8`` frames of a video file or a camera. Image files are read by
:func:`yolo.files.images.load_image`.
"""
from __future__ import annotations

import fnmatch
import glob
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

import cv2
import numpy as np

from yolo.errors import ImageReadError
from yolo.files.images import IMAGE_SUFFIXES
from yolo.files.opencv_paths import opencv_name

__all__ = ["VIDEO_SUFFIXES", "SourceItem", "collect_sources", "camera_opens", "recursive_glob", "VideoReader"]

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".m4v", ".wmv", ".mpg", ".mpeg", ".webm", ".flv", ".ts")


@dataclass
class SourceItem:
    """One input: an image file, a video file or a camera (``camera`` index)."""

    kind: str  # "image" | "video" | "camera"
    path: Optional[Path] = None
    camera: Optional[int] = None

    @property
    def name(self) -> str:
        return f"camera{self.camera}" if self.kind == "camera" else self.path.name


def _kind_of(path: Path) -> Optional[str]:
    suffix = path.suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in VIDEO_SUFFIXES:
        return "video"
    return None


MAX_CAMERA_INDEX = 2 ** 31 - 1
# The highest frame rate taken from a video's header; above it (or none) the stream counts as 25 fps.
MAX_FPS = 1000.0


def collect_sources(source: str) -> List[SourceItem]:
    """Expand ``--source``: a camera index (``0``), a file, a folder (its images and videos, sorted)
    or a glob. Raises ``FileNotFoundError`` with a one-line message when nothing matches."""
    if not source.strip():  # Path("") is the current folder: an empty --source must not scan it
        raise FileNotFoundError("--source is empty: give an image or video file, a folder, a glob or a camera index")
    if source.isascii() and source.isdigit() and not Path(source).exists():
        if int(source) > MAX_CAMERA_INDEX:  # OpenCV takes the index as a C int
            raise FileNotFoundError(f"--source {source}: not a file, and too large for a camera index (0 to "
                                    f"{MAX_CAMERA_INDEX:,})")
        return [SourceItem("camera", camera=int(source))]
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and _kind_of(p))
        if not files:
            raise FileNotFoundError(f"{source}: folder has no image or video files")
        return [SourceItem(_kind_of(p), p) for p in files]
    if path.is_file():
        # A file named explicitly is tried as an image unless its suffix says video.
        return [SourceItem("video" if _kind_of(path) == "video" else "image", path)]
    if glob.has_magic(source):
        matches = recursive_glob(source) if "**" in source else map(Path, glob.glob(source))
        files = sorted(p for p in matches if p.is_file())
        files = [p for p in files if _kind_of(p)]
        if not files:
            raise FileNotFoundError(f"{source}: no image or video file matches this pattern")
        return [SourceItem(_kind_of(p), p) for p in files]
    raise FileNotFoundError(f"{source}: source not found (expected a file, folder, glob or camera index)")


def recursive_glob(pattern: str) -> List[Path]:
    """The paths ``pattern`` matches, ``**`` standing for any number of folders (as ``glob.glob(recursive=True)``,
    hidden names matched only by a part that starts with a dot), found by one walk that enters each folder once:
    a link to a folder already walked (``loop/a -> .``) is not followed again, so a loop of links neither hangs
    the walk (two such links made glob's walk exponential) nor repeats a file (one made glob list it 41 times)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    root, wanted = Path(*parts[:fixed]) if fixed else Path("."), parts[fixed:]
    seen, found = set(), []
    for folder, subfolders, names in os.walk(root, followlinks=True):
        try:
            stats = os.stat(folder)
        except OSError:
            subfolders[:] = []
            continue
        if (stats.st_dev, stats.st_ino) in seen:  # reached again through a link: walked already
            subfolders[:] = []
            continue
        seen.add((stats.st_dev, stats.st_ino))
        subfolders.sort()
        here = Path(folder).relative_to(root).parts
        found.extend(Path(folder) / name for name in names + subfolders if _parts_match((*here, name), wanted))
    return found


def _parts_match(parts: Sequence[str], wanted: Sequence[str]) -> bool:
    """Whether the path parts ``parts`` match the pattern parts ``wanted`` (``**``: zero or more parts)."""
    if not wanted:
        return not parts
    if wanted[0] == "**":
        return any(_parts_match(parts[k:], wanted[1:]) for k in range(len(parts) + 1)
                   if not any(part.startswith(".") for part in parts[:k]))
    return (bool(parts) and fnmatch.fnmatch(parts[0], wanted[0])
            and (not parts[0].startswith(".") or wanted[0].startswith(".")) and _parts_match(parts[1:], wanted[1:]))


def camera_opens(index: int) -> bool:
    """Whether camera ``index`` can be opened (OpenCV's own backend messages silenced)."""
    logging_api = getattr(getattr(cv2, "utils", None), "logging", None)
    level = logging_api.getLogLevel() if logging_api else None
    if logging_api:
        logging_api.setLogLevel(logging_api.LOG_LEVEL_SILENT)
    try:
        capture = cv2.VideoCapture(index)
        ok = capture.isOpened()
        capture.release()
        return ok
    finally:
        if logging_api:
            logging_api.setLogLevel(level)


class VideoReader:
    """The frames of a video or camera :class:`SourceItem`, as BGR ``uint8`` ``H x W x 3`` arrays.

    Use as a context manager (the capture is released on exit). ``fps`` is the stream's rate (25 when it
    does not say); ``total`` the frame count a video's header announces (0 for cameras or when unknown).
    Raises :class:`yolo.errors.ImageReadError` when the source cannot be opened.
    """

    def __init__(self, item: SourceItem):
        self.item = item
        if item.kind == "camera":
            self.capture = cv2.VideoCapture(item.camera)
        else:
            with opencv_name(item.path) as name:  # a name that is not UTF-8 would crash OpenCV
                self.capture = cv2.VideoCapture(name)
        if not self.capture.isOpened():
            raise ImageReadError(f"{item.path or item.name}: cannot open {item.kind}")
        fps, count = self.capture.get(cv2.CAP_PROP_FPS), self.capture.get(cv2.CAP_PROP_FRAME_COUNT)
        # what a file that is no real video (a JPEG named .mp4) announces can be anything: -2^63 frames, 0 fps
        self.fps = fps if math.isfinite(fps) and 0 < fps <= MAX_FPS else 25.0
        self.total = int(count) if item.kind == "video" and math.isfinite(count) and 0 < count < 2 ** 31 else 0

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            ok, frame = self.capture.read()
            if not ok:  # the end, or the first frame OpenCV cannot decode
                return
            yield frame

    def __enter__(self) -> "VideoReader":
        return self

    def __exit__(self, *exc) -> None:
        self.capture.release()
