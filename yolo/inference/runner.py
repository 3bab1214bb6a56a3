"""Detection over many sources: image files in batches and video/camera frames one by one, each result
handed to a :class:`yolo.inference.writer.Writer` and reported as one line
(``dog.jpg: 768x576 -> 416x416 letterbox, 1 dog, 2 cars, 12.3ms``: the image, the network input it was resized
to and how).

A file that cannot be read is reported and skipped, never fatal.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from tqdm import tqdm

from yolo.errors import MAX_MESSAGE, ImageReadError, shown
from yolo.files.images import load_image
from yolo.inference.detector import Detector
from yolo.inference.sources import SourceItem, VideoReader
from yolo.inference.writer import Writer

__all__ = ["describe", "input_text", "names_hint", "timing_text", "detect_images", "detect_video"]


def describe(det: dict, names: Sequence[str]) -> str:
    """``2 cars, 1 dog`` (or ``no detections``)."""
    counts = Counter(int(k) for k in det["labels"].tolist())
    if not counts:
        return "no detections"
    return ", ".join(f"{n} {names[k]}{'s' if n > 1 and not names[k].endswith('s') else ''}"
                     for k, n in sorted(counts.items()))


def input_text(detector: Detector) -> str:
    """The network input an image is resized to, width first as image sizes are printed: ``416x416 letterbox``."""
    height, width = detector.img_size
    return f"{width}x{height} {detector.resize}"


def names_hint(names_from: Optional[str]) -> Optional[str]:
    """One line on where the class names come from when the user gave none: a file found beside the cfg, or
    (None) that detections show class numbers and how to name them."""
    if names_from in ("given", "checkpoint"):
        return None
    if names_from is None:
        return ("note: no class names (the weights carry none, and no .names file beside the cfg lists as many "
                "names as the model has classes): detections show class numbers; give --names FILE (one name a "
                "line, e.g. Darknet's data/coco.names)")
    return f"class names from {names_from} (beside the cfg; --names chooses others)"


def timing_text(timings: dict, images: int) -> str:
    """``12.3ms (pre 1.1, model 10.4, post 0.8)`` per image, from :attr:`Detector.timings`."""
    pre, model, post = (timings.get(k, 0.0) * 1e3 / images for k in ("preprocess", "inference", "postprocess"))
    return f"{pre + model + post:.1f}ms (pre {pre:.1f}, model {model:.1f}, post {post:.1f})"


def detect_images(items: Sequence[SourceItem], detector: Detector, writer: Writer, batch_size: int,
                  progress: tqdm, position: dict, count: int) -> Tuple[int, int, List[str]]:
    """Detect on image ``items``, ``batch_size`` files per call; ``position[id(item)]`` numbers the lines
    ``image i/count``. Returns ``(images, detections, skipped messages)``."""
    skipped: List[str] = []
    n_images = n_dets = 0
    step = max(1, batch_size)
    for start in range(0, len(items), step):
        chunk, frames = [], []
        for item in items[start:start + step]:
            try:
                frames.append(load_image(item.path))
                chunk.append(item)
            except ImageReadError as exc:
                skipped.append(shown(exc, MAX_MESSAGE))
                progress.write(f"warning: {skipped[-1]}; skipped", file=sys.stderr)
                progress.update(1)
        if not chunk:
            continue
        dets = detector(frames)
        timing = timing_text(detector.timings, len(chunk))
        for item, frame, det in zip(chunk, frames, dets):
            name = writer.unique_name(item.path.name)
            n_images += 1
            n_dets += len(det["labels"])
            writer.labels(writer.label_stem(Path(name).stem), det, frame.shape[:2])
            writer.json(str(item.path), det, frame.shape[:2])
            writer.image(name, frame, det)
            progress.write(f"image {position[id(item)]}/{count} {shown(item.path, MAX_MESSAGE)}: "
                           f"{frame.shape[1]}x{frame.shape[0]} -> {input_text(detector)}, "
                           f"{describe(det, detector.names)}, {timing}")
            progress.update(1)
    return n_images, n_dets, skipped


def detect_video(item: SourceItem, detector: Detector, writer: Writer, progress: tqdm,
                 stop: Optional[Callable[[], bool]] = None) -> Tuple[int, int]:
    """Detect on every frame of a video/camera, until ``stop()`` (asked before each frame) is True; returns
    ``(frames, detections)`` done. Raises :class:`yolo.errors.ImageReadError` when it cannot be opened or gives
    no frame."""
    frames = detections = 0
    stopped = False
    with VideoReader(item) as video:
        out_name = writer.unique_name(Path(item.name).stem + ".mp4")
        try:
            for index, frame in enumerate(video):
                stopped = stop is not None and stop()
                if stopped:
                    break
                det = detector(frame)[0]
                timing = timing_text(detector.timings, 1)
                frames += 1
                detections += len(det["labels"])
                stem = writer.label_stem(f"{Path(out_name).stem}_{index}")
                writer.labels(stem, det, frame.shape[:2])
                writer.json(stem, det, frame.shape[:2])
                writer.video_frame(out_name, frame, det, video.fps)
                where = f"{shown(item.name, MAX_MESSAGE)} frame {index + 1}/{video.total or '?'}"
                progress.set_postfix_str(where)
                progress.write(f"{where}: {frame.shape[1]}x{frame.shape[0]} -> {input_text(detector)}, "
                               f"{describe(det, detector.names)}, {timing}")
        finally:
            writer.close_video(out_name)
    if frames == 0 and not stopped:
        raise ImageReadError(f"{item.path or item.name}: no frame could be read")
    if frames < video.total and not stopped:  # OpenCV stops at the first frame it cannot decode
        progress.write(f"warning: {shown(item.path, MAX_MESSAGE)}: the video should have {video.total} frames but only {frames} could "
                       f"be read (truncated or damaged file); the {video.total - frames} missing frame(s) were not "
                       "processed", file=sys.stderr)
    return frames, detections
