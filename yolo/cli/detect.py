"""Run a Darknet detector on images, folders, globs, videos or a camera; save annotated results.

Example::

    python tools/detect.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights \\
        --names cfg/coco.names --source data/images --save-txt --save-json

Results go to a new folder (``runs/detect/exp``, ``exp2``, ...; an earlier run is never overwritten):
annotated images and videos, with ``--save-txt`` YOLO labels (``labels/<name>.txt``; a video's frames
``<name>_<N>.txt`` from 1, as the log counts them; ``<name>_2.txt`` when two sources share a name: ``class cx cy w h`` normalized, plus the score with ``--save-conf``), with
``--save-json`` ``results.json`` in COCO results format (``image_id``, ``category_id``, ``bbox`` [x, y, w, h]
pixels, ``score``; integer image ids as COCO's: a numeric file name's number, else positions listed in
``image_ids.json``).
An unreadable file is reported and skipped; a missing source or a cfg/weights problem is a one-line
error with exit status 2.
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Optional

from tqdm import tqdm

from yolo.backends import is_export
from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.common import settings_from
from yolo.cli.flags.detect import parse_args
from yolo.cli.stream_stop import StreamStop
from yolo.device import parse_device
from yolo.errors import MAX_MESSAGE, CfgError, ConfigError, WeightsError, shown
from yolo.inference.detector import Detector
from yolo.inference.show import Window
from yolo.inference.tracking import TrackingDetector, check_tracker
from yolo.inference.runner import detect_images, detect_streams, input_text, names_hint, run_defaults
from yolo.inference.sources import camera_opens, collect_sources
from yolo.inference.writer import Writer
from yolo.progress import use_bars
from yolo.runs import increment_path, run_name
from yolo.settings.detect import DetectorOptions, DetectRunOptions
from yolo.settings.tiling import TileOptions
from yolo.settings.video import VideoOptions

logger = logging.getLogger("yolo.detect")

CHECKPOINT_SUFFIXES = (".pt", ".pth")  # read by yolo.models.load_model with the cfg they carry


def main(args) -> Optional[Path]:
    """Run detection as described by ``args``; returns the run folder (None with ``--nosave`` and nothing
    else to save: no folder is made)."""
    setup_logging(args.verbose, logging.WARNING)
    try:
        items = collect_sources(args.source)
    except FileNotFoundError as exc:
        fail(str(exc))
    for item in items:
        if item.kind == "camera" and not camera_opens(item.camera):
            fail(f"camera {item.camera}: cannot open this camera index")
    if args.cfg is not None and not args.cfg.is_file():
        fail(f"{args.cfg}: cfg not found")
    if not args.weights.is_file():
        fail(f"{args.weights}: weights not found")
    _check_weights_kind(args.weights, args.cfg)
    try:
        device = parse_device(args.device)
    except ConfigError as exc:
        fail(f"--device: {exc}")
    options = settings_from(args, DetectorOptions, device=device)
    video, tile = settings_from(args, VideoOptions), settings_from(args, TileOptions)
    try:  # before any work: no display for --show, no tracker package for --track
        window, _ = Window() if video.show else None, check_tracker(video.track)
    except (RuntimeError, ImportError) as exc:
        fail(f"--{'show' if isinstance(exc, RuntimeError) else 'track'}: {exc}")
    batch_size, workers = run_defaults(settings_from(args, DetectRunOptions), device)
    try:
        detector = Detector(args.cfg, args.weights, options=options)
    except (CfgError, WeightsError, FileNotFoundError) as exc:
        fail(str(exc).strip().splitlines()[0])
    except ValueError as exc:  # the Detector names the setting without its flag's dashes ("classes 80: ...")
        message = str(exc).strip().splitlines()[0]
        fail(f"--{message}" if message.startswith("classes ") else message)
    if args.half and detector.device.type != "cuda":
        logger.warning("--half needs CUDA: running in fp32 on %s", detector.device)
    if args.img_size is None:  # the size no flag gave: where it comes from (the cfg, a checkpoint)
        print(f"network input {input_text(detector)} ({detector.img_size_from})", file=sys.stderr)
    if names_hint(detector.names_from):
        print(names_hint(detector.names_from), file=sys.stderr)

    saves = not args.nosave or args.save_txt or args.save_json or video.track is not None
    out_dir = increment_path(args.project / run_name(args.name)) if saves else None  # --nosave alone: no run folder
    writer = Writer(out_dir, detector.names, not args.nosave, args.save_txt, args.save_conf, args.save_json)
    detector = detector.tiled(tile.tile_overlap, tile.tile_merge) if tile.tile else detector
    detector = TrackingDetector(detector, video.track, out_dir) if video.track else detector
    t_start = time.perf_counter()
    images = [it for it in items if it.kind == "image"]
    streams = [it for it in items if it.kind != "image"]
    position = {id(it): i + 1 for i, it in enumerate(items)}
    stop = StreamStop()  # a signal ends the work after the batch or frame in progress; what was done is saved
    with tqdm(total=len(items), desc="detect", unit="src", file=sys.stderr,
              disable=not use_bars(args.progress)) as progress, stop:
        n_images, n_dets, skipped = detect_images(images, detector, writer, batch_size, progress, position,
                                                  len(items), workers, stop)
        if stop():
            progress.write(f"stopped ({stop.signal_name}) after {n_images} image(s); what was done is saved",
                           file=sys.stderr)
        frames, dets, stream_skips, camera_ended = detect_streams(streams, detector, writer, progress, batch_size,
                                                                  workers, stop, window)
        n_images, n_dets, skipped = n_images + frames, n_dets + dets, skipped + stream_skips
        if skipped and n_images == 0 and not stop():  # nothing could be read: the warnings alone would not say so
            _remove_empty_run(out_dir)
            fail(f"none of the {len(items)} source(s) could be read", code=1)
        json_path = writer.finish()  # with the signals still turned into requests: a second one waits for it
    elapsed = time.perf_counter() - t_start
    print(f"{n_images} image(s)/frame(s), {n_dets} detection(s) in {elapsed:.2f}s; "
          + (f"results in {shown(out_dir, MAX_MESSAGE)}" if out_dir is not None else "nothing saved (--nosave)")
          + (f"; COCO results {shown(json_path, MAX_MESSAGE)}" if json_path else "")
          + (f"; {len(skipped)} source(s) skipped" if skipped else ""))
    if stop.signal_name is not None and not camera_ended:
        raise SystemExit(stop.exit_status)
    return out_dir


def _check_weights_kind(weights: Path, cfg: Optional[Path]) -> None:
    """Fail on Darknet weights without their cfg (a .pt checkpoint and an exported file carry their own), and on
    an exported file given a cfg."""
    if is_export(weights):
        if cfg is not None:
            fail(f"{weights}: an exported file carries its own cfg: give it without --cfg")
        return
    if cfg is None and weights.suffix not in CHECKPOINT_SUFFIXES:  # as load_model tells them apart
        fail(f"{weights}: Darknet weights need their --cfg to build the model (only .pt checkpoints carry their "
             "own)")


def _remove_empty_run(out_dir: Optional[Path]) -> None:
    """Take back the run folder of a detection that read nothing, when it holds no file (only its empty
    sub-folders), so that a failed run leaves no ``exp2`` behind."""
    if out_dir is None or not out_dir.is_dir() or any(p.is_file() for p in out_dir.rglob("*")):
        return
    for folder in sorted(out_dir.rglob("*"), key=lambda p: len(p.parts), reverse=True) + [out_dir]:
        folder.rmdir()


def cli(argv=None) -> None:
    """Console entry point: ``yolo-detect``."""
    run_tool(main, parse_args(argv), reduce="--img-size or --batch-size")
