"""The detect tool's settings for videos, cameras and image sequences: tracking (:mod:`yolo.inference.tracking`)
and the live window (:mod:`yolo.inference.show`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from yolo.settings.declare import setting

TRACKER_KINDS = ("bytetrack", "botsort", "ocsort")  # yolo.inference.tracking.TRACKERS


@dataclass
class VideoOptions:
    """``--track [KIND]`` and ``--show``."""

    track: Optional[str] = setting(
        None, "--track", nargs="?", const="bytetrack", choices=list(TRACKER_KINDS), metavar="TRACKER",
        help="track objects across the frames of each video, camera or image folder (in name order): "
             "bytetrack (the default), botsort or ocsort; track ids on the annotated frames, track_id in "
             "results.json, and tracks/NAME.txt (MOTChallenge) per video")
    show: bool = setting(False, "--show", action="store_true",
                         help="show the annotated frames of videos and cameras in a window as they are detected "
                              "(q or Esc stops); needs a display")


__all__ = ["TRACKER_KINDS", "VideoOptions"]
