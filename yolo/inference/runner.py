"""Detection over many sources: image files and video frames in batches (camera frames one by one), read and
decoded ahead of the model on background threads (:mod:`yolo.inference.read_ahead`), each result handed to a
:class:`yolo.inference.writer.Writer` in order (the annotated images saved behind the model,
:mod:`yolo.inference.write_behind`) and reported as one line
(``dog.jpg: 768x576 -> 416x416 letterbox, 1 dog, 2 cars, 12.3ms``: the image, the network input it was resized
to and how).

A file that cannot be read is reported and skipped, never fatal.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

import numpy as np
import torch
from tqdm import tqdm

from yolo.device import cpu_threads
from yolo.errors import MAX_MESSAGE, ImageReadError, shown
from yolo.files.images import load_image
from yolo.inference.detector import Detector
from yolo.inference.graphed import GRAPH_MAX_BATCH
from yolo.inference.read_ahead import map_ahead, read_ahead
from yolo.inference.show import Window
from yolo.inference.sources import SourceItem, VideoReader
from yolo.inference.tracking import sequence
from yolo.inference.write_behind import WriteBehind
from yolo.inference.writer import Writer
from yolo.ops.sizes import size_text
from yolo.settings.detect import DetectRunOptions

__all__ = ["describe", "input_text", "names_hint", "timing_text", "run_defaults", "detect_images", "detect_streams",
           "detect_video"]

T = TypeVar("T")


def describe(det: dict, names: Sequence[str]) -> str:
    """``2 cars, 1 dog`` (or ``no detections``); each name escaped and cut as every echoed value (a name is the
    user's text: a checkpoint's, a ``.names`` file's)."""
    counts = Counter(int(k) for k in det["labels"].tolist())
    if not counts:
        return "no detections"
    return ", ".join(f"{n} {_plural(names[k]) if n > 1 else shown(names[k])}" for k, n in sorted(counts.items()))


def _plural(name: str) -> str:
    """``cars`` for ``car``; a name that ends in s, or is shown cut or escaped, as it is."""
    text = shown(name)
    return f"{text}s" if text == name and not name.endswith("s") else text


def input_text(detector: Detector) -> str:
    """The network input an image is resized to: ``416x416 letterbox`` (``416x416 letterbox slices`` when tiled)."""
    tiled = getattr(detector, "slices", None) is not None  # a TiledDetector, perhaps inside a TrackingDetector
    return f"{size_text(detector.img_size)} {detector.resize}{' slices' if tiled else ''}"


def names_hint(names_from: Optional[str]) -> Optional[str]:
    """One line on where the class names come from when the user gave none: a file found beside the cfg, or
    (None) that detections show class numbers and how to name them."""
    if names_from in ("given", "checkpoint"):
        return None
    if names_from is None:
        return ("note: no class names (the weights carry none, and no .names file beside the cfg lists as many "
                "names as the model has classes): detections show class numbers; give --names FILE (one name a "
                "line, e.g. Darknet's data/coco.names)")
    return f"class names from {shown(names_from, MAX_MESSAGE)} (beside the cfg; --names chooses others)"


def timing_text(timings: dict, images: int) -> str:
    """``12.3ms (pre 1.1, model 10.4, post 0.8)`` per image, from :attr:`Detector.timings`."""
    pre, model, post = (timings.get(k, 0.0) * 1e3 / images for k in ("preprocess", "inference", "postprocess"))
    return f"{pre + model + post:.1f}ms (pre {pre:.1f}, model {model:.1f}, post {post:.1f})"


def run_defaults(options: DetectRunOptions, device: torch.device) -> Tuple[int, int]:
    """``(batch_size, workers)`` of the detect tool on ``device``: the given ones, else on the CPU 1 image per
    batch (the Detector runs one image per forward pass there, so a larger batch would only delay the first
    result) and no thread (the model keeps every core busy, and decoding is a small part of its time); on CUDA
    the largest batch replayed from a captured CUDA graph (:data:`~yolo.inference.graphed.GRAPH_MAX_BATCH`)
    and up to 4 threads, which decode and save while the GPU runs."""
    cuda = device.type == "cuda"
    batch_size = options.batch_size if options.batch_size is not None else (GRAPH_MAX_BATCH if cuda else 1)
    workers = options.workers if options.workers is not None else (min(4, cpu_threads()) if cuda else 0)
    return batch_size, workers


def _in_batches(items: Iterable[T], size: int) -> Iterator[List[T]]:
    """``items`` as lists of ``size`` (the last one shorter)."""
    items = iter(items)
    while True:
        batch = list(itertools.islice(items, size))
        if not batch:
            return
        yield batch


def _read_image(item: SourceItem, decode: str = "opencv") -> Tuple[SourceItem, Optional[np.ndarray], Optional[str]]:
    """``(item, BGR uint8 image, None)``, or ``(item, None, message)`` when the file cannot be read
    (``decode``: :data:`yolo.files.images.DECODERS`)."""
    try:
        return item, load_image(item.path, decode=decode), None
    except ImageReadError as exc:
        return item, None, shown(exc, MAX_MESSAGE)


def detect_images(items: Sequence[SourceItem], detector: Detector, writer: Writer, batch_size: int,
                  progress: tqdm, position: dict, count: int, workers: int = 0,
                  stop: Optional[Callable[[], bool]] = None) -> Tuple[int, int, List[str]]:
    """Detect on image ``items``, ``batch_size`` readable images per call, until ``stop()`` (asked before each
    batch) is True; ``position[id(item)]`` numbers the lines ``image i/count``. ``workers`` threads read and decode the next images while the model runs
    (:func:`~yolo.inference.read_ahead.map_ahead`) and save the annotated ones behind it
    (:class:`~yolo.inference.write_behind.WriteBehind`); 0: everything in order in this thread. The results
    do not depend on either. With tracking (:class:`~yolo.inference.tracking.TrackingDetector`) the images are one
    sequence, in their order, named after the first one's folder. Returns ``(images, detections, skipped
    messages)``."""
    skipped: List[str] = []
    n_images = n_dets = 0
    step = max(1, batch_size)
    reads = map_ahead(functools.partial(_read_image, decode=detector.decode), items, workers,
                      depth=2 * max(step, workers))

    def readable() -> Iterator[Tuple[SourceItem, np.ndarray]]:  # the images read; the others reported here
        for item, image, error in reads:
            if error is None:
                yield item, image
                continue
            skipped.append(error)
            progress.write(f"warning: {error}; skipped", file=sys.stderr)
            progress.update(1)

    track_name = items[0].path.resolve().parent.name if items else ""
    with WriteBehind(workers) as saves, contextlib.closing(reads), sequence(detector, track_name or "images"):
        for batch in _in_batches(readable(), step):
            if stop is not None and stop():
                break
            dets = detector([image for _, image in batch])
            timing = timing_text(detector.timings, len(batch))
            for (item, image), det in zip(batch, dets):
                name = writer.unique_name(item.path.name)
                n_images += 1
                n_dets += len(det["labels"])
                writer.labels(writer.label_stem(Path(name).stem), det, image.shape[:2])
                writer.json(str(item.path), det, image.shape[:2])
                saves.submit(writer.image, name, image, det)
                progress.write(f"image {position[id(item)]}/{count} {shown(item.path, MAX_MESSAGE)}: "
                               f"{size_text(image.shape[:2])} -> {input_text(detector)}, "
                               f"{describe(det, detector.names)}, {timing}")
                progress.update(1)
    return n_images, n_dets, skipped


def detect_streams(items: Sequence[SourceItem], detector: Detector, writer: Writer, progress: tqdm,
                   batch_size: int, workers: int, stop: Callable[[], bool],
                   window: Optional[Window] = None) -> Tuple[int, int, List[str], bool]:
    """:func:`detect_video` on each video/camera of ``items`` in turn (shown in ``window``, if any), until
    ``stop()`` or the window's stop key; a stopped one is said in
    a line. Returns ``(frames, detections, skipped messages, camera_ended)``: ``camera_ended`` when Ctrl-C
    (``stop.signal_name == "SIGINT"``) ended a camera, which is how a camera ends (not a failure)."""
    frames = detections = 0
    skipped: List[str] = []
    for item in items:
        if stop() or (window is not None and window.stopped):
            break
        done = 0
        try:
            done, found = detect_video(item, detector, writer, progress, batch_size, workers, stop, window)
            frames, detections = frames + done, detections + found
        except ImageReadError as exc:
            skipped.append(shown(exc, MAX_MESSAGE))
            progress.write(f"warning: {skipped[-1]}; skipped", file=sys.stderr)
        progress.update(1)
        if stop():
            progress.write(f"{shown(item.name, MAX_MESSAGE)}: stopped ({stop.signal_name}) after {done} "
                           "frame(s); what was done is saved", file=sys.stderr)
            return frames, detections, skipped, item.kind == "camera" and stop.signal_name == "SIGINT"
    return frames, detections, skipped, False


def detect_video(item: SourceItem, detector: Detector, writer: Writer, progress: tqdm, batch_size: int = 1,
                 workers: int = 0, stop: Optional[Callable[[], bool]] = None,
                 window: Optional[Window] = None) -> Tuple[int, int]:
    """Detect on every frame of a video/camera, ``batch_size`` frames per call for a video file (a camera: one,
    as it comes), until ``stop()`` (asked before each batch) is True; returns ``(frames, detections)`` done. With
    ``workers`` a thread reads the next frames of a video file while the model runs, and another saves the
    annotated frames in order behind it; ``window`` shows them as they come (its stop key ends the video). With
    tracking the video is one sequence. Raises :class:`yolo.errors.ImageReadError` when it cannot be opened or
    gives no frame."""
    frames = detections = 0
    stopped = False
    live = item.kind == "camera"
    step = 1 if live else max(1, batch_size)
    with VideoReader(item) as video:
        out_name = writer.unique_name(Path(item.name).stem + ".mp4")
        source = read_ahead(video, depth=2 * step) if workers and not live else iter(video)
        try:
            with WriteBehind(min(workers, 1)) as saves, contextlib.closing(source), \
                    sequence(detector, Path(out_name).stem, video.fps):
                for batch in _in_batches(source, step):
                    stopped = stop is not None and stop()
                    if stopped:
                        break
                    dets = detector(batch)
                    timing = timing_text(detector.timings, len(batch))
                    for frame, det in zip(batch, dets):
                        frames += 1  # numbered from 1, as the log's "frame N/T", Darknet's demo and MOT files
                        detections += len(det["labels"])
                        stem = writer.label_stem(f"{Path(out_name).stem}_{frames}")
                        writer.labels(stem, det, frame.shape[:2])
                        writer.json(stem, det, frame.shape[:2])
                        saves.submit(writer.video_frame, out_name, frame, det, video.fps)
                        where = f"{shown(item.name, MAX_MESSAGE)} frame {frames}/{video.total or '?'}"
                        progress.set_postfix_str(where)
                        progress.write(f"{where}: {size_text(frame.shape[:2])} -> {input_text(detector)}, "
                                       f"{describe(det, detector.names)}, {timing}")
                        if window is not None and not window.show(item.name, writer.annotate(frame, det)):
                            stopped = True
                    if stopped:
                        break
        finally:
            writer.close_video(out_name)
            if window is not None:
                window.close()
    if frames == 0 and not stopped:
        raise ImageReadError(f"{item.path or item.name}: no frame could be read")
    if frames < video.total and not stopped:  # OpenCV stops at the first frame it cannot decode
        progress.write(f"warning: {shown(item.path, MAX_MESSAGE)}: the video should have {video.total} frames but only {frames} could "
                       f"be read (truncated or damaged file); the {video.total - frames} missing frame(s) were not "
                       "processed", file=sys.stderr)
    return frames, detections
