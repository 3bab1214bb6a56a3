"""A live window of the annotated frames of a video or camera, as Darknet's ``demo`` shows them (OpenCV's
``imshow``; one window per source, closed at its end). ``q`` or Esc in the window stops the run as Ctrl-C does.

Without a display (no ``DISPLAY`` / ``WAYLAND_DISPLAY`` on Linux, or an OpenCV built without a GUI) OpenCV would
abort the process with its own message: :func:`display_problem` says so first, in one line.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Optional

import cv2
import numpy as np

__all__ = ["Window", "display_problem"]

STOP_KEYS = (ord("q"), 27)  # q, Esc (Darknet's demo stops on Esc)


def display_problem() -> Optional[str]:
    """Why no window can open here (one line), or None when one can."""
    gui = re.search(r"^\s*GUI:\s*(\S+)", cv2.getBuildInformation(), re.MULTILINE)
    if gui is not None and gui.group(1).upper() == "NONE":
        return "this OpenCV is built without a GUI (opencv-python-headless?): install opencv-python to show frames"
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "no display to show frames on (DISPLAY and WAYLAND_DISPLAY are unset): run it on a desktop, or " \
               "without --show (the annotated video is saved in the run folder)"
    return None


class Window:
    """Shows frames in a window named after their source; :meth:`show` returns False once the user asked to
    stop (``q`` or Esc). A ``RuntimeError`` (:func:`display_problem`'s line) when no window can open."""

    def __init__(self):
        problem = display_problem()
        if problem is not None:
            raise RuntimeError(problem)
        self.title: Optional[str] = None
        self.stopped = False

    def show(self, title: str, image: np.ndarray) -> bool:
        if title != self.title:
            self.close()
            self.title = title
            cv2.namedWindow(title, cv2.WINDOW_NORMAL)
        cv2.imshow(title, image)
        if (cv2.waitKey(1) & 0xFF) in STOP_KEYS:  # waitKey also draws the window
            self.stopped = True
        return not self.stopped

    def close(self) -> None:
        if self.title is not None:
            cv2.destroyWindow(self.title)
            cv2.waitKey(1)
            self.title = None
