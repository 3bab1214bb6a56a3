"""Object tracking over a sequence of frames: a track id for each detection, the same for one object from frame to
frame.

The trackers are those of the ``trackers`` package (Apache-2.0; ``pip install .[track]``): ByteTrack (the
default), BoT-SORT (with its camera-motion compensation from the frames) and OC-SORT, all class-agnostic (a box
whose class flips between frames keeps its track). ByteTrack's second association step matches the detections
*below* the reporting threshold to tracks that lost their object (an occlusion), so the detector runs at
:data:`TRACK_LOW_THRES` and the tracker sees every box above it; what is reported keeps the user's threshold.

- :class:`Tracker` turns one frame's detections (the Detector's dict, run at the low threshold) into the reported
  ones with ``track_ids`` ``Int64[K]`` (``-1``: not yet in a confirmed track); frames must come in order.
- :class:`TrackingDetector` wraps a Detector (or a tiled one) for the detect tool: called like it on a batch of
  consecutive frames, one :meth:`~TrackingDetector.sequence` per video or image folder, whose tracks it writes as
  a MOTChallenge file (:func:`mot_lines`).
- :func:`track_frames` is ``Detector.track``: frames in, one dict with ``track_ids`` per frame out.

Boxes are ``xyxy`` original-image pixels, as the Detector's.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional

import numpy as np
import torch

from yolo.files.atomic import write_text_atomic
from yolo.files.write_errors import writing
from yolo.ops.postprocess_defaults import DETECT_CONF_THRES

__all__ = ["TRACKERS", "TRACK_LOW_THRES", "Tracker", "TrackingDetector", "check_tracker", "mot_lines", "sequence", "track_frames"]

TRACKERS = ("bytetrack", "botsort", "ocsort")
TRACK_LOW_THRES = 0.1  # ByteTrack's threshold of the second association (Zhang et al., ECCV 2022)
LOST_FRAMES = 30  # frames (at 30 fps) a lost track is kept for its object to come back: the library's default


def _tracker_class(kind: str):
    """The ``trackers`` class of ``kind``; an ImportError naming the extra when the package is missing."""
    try:
        import trackers  # optional dependency: the [track] extra
    except ImportError as exc:
        raise ImportError("tracking needs the 'trackers' package: pip install 'trackers>=2.6' (or the project's "
                          "[track] extra)") from exc
    return {"bytetrack": trackers.ByteTrackTracker, "botsort": trackers.BoTSORTTracker,
            "ocsort": trackers.OCSORTTracker}[kind]


def check_tracker(kind: Optional[str]) -> None:
    """An ImportError (one line, naming the package) when the tracker ``kind`` cannot run here; None: none."""
    if kind is not None:
        _tracker_class(kind)


class Tracker:
    """Track ids for one sequence of frames, fed one frame's detections at a time.

    Args:
        kind: ``"bytetrack"``, ``"botsort"`` or ``"ocsort"``.
        conf_thres: the reporting threshold: detections at or above it are returned, and a new track starts only
            from one of them (the tracker's "high" detections); the ones below only continue tracks.
        frame_rate: the frames' rate (a lost track is kept for :data:`LOST_FRAMES` frames at 30 fps, in time).
    """

    def __init__(self, kind: str = "bytetrack", conf_thres: float = DETECT_CONF_THRES, frame_rate: float = 30.0):
        if kind not in TRACKERS:
            raise ValueError(f"unknown tracker {kind!r}: use one of {', '.join(TRACKERS)}")
        self.kind, self.conf_thres, self.frame_rate = kind, float(conf_thres), float(frame_rate) or 30.0
        options = {"lost_track_buffer": LOST_FRAMES, "frame_rate": self.frame_rate,
                   "high_conf_det_threshold": self.conf_thres}
        if kind != "ocsort":  # OC-SORT starts tracks from its high detections; the others have their own bound
            options["track_activation_threshold"] = self.conf_thres
        self.tracker = _tracker_class(kind)(**options)
        self.frames = 0

    def update(self, det: Dict, frame: Optional[np.ndarray] = None) -> Dict:
        """One frame: ``det`` the Detector's dict (``boxes`` ``Float[K, 4]`` xyxy, ``scores``, ``labels``,
        ``names``; at :data:`TRACK_LOW_THRES` or the threshold of choice) -> the detections scored at least
        ``conf_thres``, in their order, with ``track_ids`` ``Int64[M]`` (from 1, as MOTChallenge numbers them; -1
        where no confirmed track holds the box). ``frame`` (BGR ``uint8``) is used by BoT-SORT's camera-motion compensation only."""
        import supervision as sv  # optional dependency: the [track] extra (with trackers)
        self.frames += 1
        boxes = det["boxes"].detach().double().cpu().numpy().reshape(-1, 4)
        scores = det["scores"].detach().double().cpu().numpy().reshape(-1)
        labels = det["labels"].detach().cpu().numpy().reshape(-1)
        ids = np.full(len(boxes), -1, dtype=np.int64)
        detections = sv.Detections(xyxy=boxes.astype(np.float32), confidence=scores.astype(np.float32),
                                   class_id=labels.astype(int), data={"index": np.arange(len(boxes))})
        tracked = self.tracker.update(detections, frame=frame if self.kind == "botsort" else None)
        if len(tracked):  # the library returns the boxes in its own order: mapped back by index
            found = np.asarray(tracked.tracker_id, dtype=np.int64)  # from 0; -1: unconfirmed
            ids[np.asarray(tracked.data["index"], dtype=np.int64)] = np.where(found >= 0, found + 1, -1)
        keep = torch.as_tensor(np.flatnonzero(scores >= self.conf_thres), dtype=torch.int64)
        out = {key: value[keep] for key, value in det.items() if isinstance(value, torch.Tensor)}
        if "names" in det:
            out["names"] = [det["names"][i] for i in keep.tolist()]
        out["track_ids"] = torch.as_tensor(ids)[keep]
        return out


def mot_lines(frame_number: int, det: Dict) -> List[str]:
    """One frame's tracked detections as MOTChallenge lines ``frame,id,left,top,width,height,score,-1,-1,-1``
    (``frame_number`` from 1; boxes in pixels); detections without a track (id -1) are left out."""
    lines = []
    for (x1, y1, x2, y2), score, track_id in zip(det["boxes"].tolist(), det["scores"].tolist(),
                                                 det["track_ids"].tolist()):
        if track_id >= 0:
            lines.append(f"{frame_number},{track_id},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{score:.5f},"
                         "-1,-1,-1")
    return lines


@contextlib.contextmanager
def detecting_at(detector, conf_thres: float) -> Iterator[None]:
    """``detector`` (a Detector, or a wrapper with its ``detector``) runs at ``conf_thres`` within the block."""
    base = detector
    while "postprocess_options" not in vars(base):
        base = base.detector
    saved = base.postprocess_options
    base.postprocess_options = dataclasses.replace(saved, conf_thres=min(float(conf_thres), saved.conf_thres))
    try:
        yield
    finally:
        base.postprocess_options = saved


class TrackingDetector:
    """The detect tool's Detector with tracking: ``tracking(frames)`` on consecutive frames of the current
    :meth:`sequence` returns the Detector's dicts with ``track_ids``; the Detector's attributes read through.

    Args:
        detector: a Detector or a :class:`~yolo.inference.tiling.TiledDetector` (its ``conf_thres`` is the
            reporting threshold). kind: the tracker. out_dir: the run folder; each sequence's tracks are written
            to ``out_dir/tracks/NAME.txt`` (None: not written).
    """

    def __init__(self, detector, kind: str = "bytetrack", out_dir: Optional[Path] = None):
        _tracker_class(kind)  # a missing package is said before any frame is read
        self.detector, self.kind, self.out_dir = detector, kind, out_dir
        self.conf_thres = float(detector.conf_thres)
        self.tracker: Optional[Tracker] = None
        self.lines: List[str] = []
        self.written: List[Path] = []

    def __getattr__(self, name):  # names, img_size, resize, timings, ... of the Detector
        return getattr(self.detector, name)

    @contextlib.contextmanager
    def sequence(self, name: str, frame_rate: float = 30.0) -> Iterator[None]:
        """The frames given within the block are one sequence (a video, a camera, a folder of images): a new
        tracker, and on leaving (also when stopped) its tracks in ``tracks/<name>.txt``."""
        self.tracker, self.lines = Tracker(self.kind, self.conf_thres, frame_rate), []
        try:
            yield
        finally:
            if self.out_dir is not None and self.tracker.frames:
                path = self.out_dir / "tracks" / f"{name}.txt"
                with writing(path.parent):
                    path.parent.mkdir(parents=True, exist_ok=True)
                self.written.append(write_text_atomic(path, "".join(line + "\n" for line in self.lines)))
            self.tracker = None

    def __call__(self, frames) -> List[Dict]:
        if self.tracker is None:
            raise RuntimeError("TrackingDetector: frames must be given within sequence()")
        frames = self.detector._load(frames) if not isinstance(frames, list) else frames
        with detecting_at(self.detector, TRACK_LOW_THRES):
            dets = self.detector(frames)
        out = []
        for frame, det in zip(frames, dets):
            tracked = self.tracker.update(det, frame)
            self.lines += mot_lines(self.tracker.frames, tracked)
            out.append(tracked)
        return out


def sequence(detector, name: str, frame_rate: float = 30.0):
    """``detector.sequence(name, frame_rate)`` for a :class:`TrackingDetector`; nothing for another detector."""
    if isinstance(detector, TrackingDetector):
        return detector.sequence(name, frame_rate)
    return contextlib.nullcontext()


def track_frames(detector, frames: Iterable, kind: str = "bytetrack", frame_rate: float = 30.0,
                 batch_size: int = 1) -> Iterator[Dict]:
    """``Detector.track``: the frames (paths or BGR ``uint8`` arrays, in order) -> one dict per frame, the
    Detector's with ``track_ids`` ``Int64[K]`` (-1: no confirmed track yet); ``batch_size`` frames per model
    call (the ids do not depend on it)."""
    tracking = TrackingDetector(detector, kind)
    with tracking.sequence("frames", frame_rate):
        batch: List = []
        for frame in frames:
            batch.append(frame)
            if len(batch) >= max(1, batch_size):
                yield from tracking(detector._load(batch))
                batch = []
        if batch:
            yield from tracking(detector._load(batch))
