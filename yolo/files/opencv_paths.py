"""File names that OpenCV can take. Its Python bindings convert a name to UTF-8 and crash the process (exit 139,
a segmentation fault) on one that is not: a file name of bytes that are not UTF-8 (``bad\\xff.jpg``) is a
``str`` with surrogate escapes in Python, which ``cv2.imread``, ``cv2.imwrite``, ``cv2.haveImageWriter``,
``cv2.VideoCapture``, ``cv2.VideoWriter`` and ``cv2.dnn.readNetFromDarknet`` all crash on.

Every path the package hands to OpenCV goes through :func:`opencv_name` (to read or open a file that is there) or
is one the package chose itself (:func:`plain_suffix`); images are written with ``cv2.imencode`` and Python's own
file calls, which take any name.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["opencv_name", "opencv_takes", "plain_suffix"]


def opencv_takes(path: PathLike) -> bool:
    """Whether OpenCV can be given ``path`` as it is: its text encodes to UTF-8 (no surrogate escapes)."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def plain_suffix(path: PathLike) -> str:
    """``path``'s suffix (``.jpg``), or ``""`` when OpenCV cannot take it."""
    suffix = Path(path).suffix
    return suffix if opencv_takes(suffix) else ""


@contextmanager
def opencv_name(path: PathLike) -> Iterator[str]:
    """A name under which OpenCV can open the existing file ``path``: the path itself, or, when OpenCV cannot take
    it, a symbolic link to it named ``file<suffix>`` in a temporary folder, removed on exit (a file OpenCV opened
    meanwhile stays open)::

        with opencv_name(item.path) as name:
            capture = cv2.VideoCapture(name)
    """
    if opencv_takes(path):
        yield os.fspath(path)
        return
    with tempfile.TemporaryDirectory(prefix="yolo-opencv-") as folder:
        alias = os.path.join(folder, "file" + plain_suffix(path))
        os.symlink(os.path.abspath(path), alias)
        yield alias
