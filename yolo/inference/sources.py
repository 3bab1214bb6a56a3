"""What detection runs on: image files, videos and cameras, named by one ``--source`` string.

:func:`collect_sources` expands a file, folder, glob or camera index into :class:`SourceItem` s;
:class:`VideoReader` yields the BGR ``uint8`` frames of a video file or a camera. Image files are read by
:func:`yolo.files.images.load_image`.
"""
from __future__ import annotations

import glob
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional

import cv2
import numpy as np

from yolo.errors import ImageReadError
from yolo.files.images import IMAGE_SUFFIXES

__all__ = ["VIDEO_SUFFIXES", "SourceItem", "collect_sources", "camera_opens", "VideoReader"]

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
    if any(ch in source for ch in "*?["):
        files = sorted(Path(p) for p in glob.glob(source, recursive=True) if Path(p).is_file())
        files = [p for p in files if _kind_of(p)]
        if not files:
            raise FileNotFoundError(f"{source}: no image or video file matches this pattern")
        return [SourceItem(_kind_of(p), p) for p in files]
    raise FileNotFoundError(f"{source}: source not found (expected a file, folder, glob or camera index)")


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
        self.capture = cv2.VideoCapture(item.camera if item.kind == "camera" else str(item.path))
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
