"""Run a Darknet detector on images, folders, globs, videos or a camera; save annotated results.

Example::

    python tools/detect.py --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights \\
        --names cfg/coco.names --source data/images --save-txt --save-json

Results go to a new folder (``runs/detect/exp``, ``exp2``, ...; an earlier run is never overwritten):
annotated images and videos, with ``--save-txt`` YOLO labels (``labels/<name>.txt``: ``class cx cy w h``
normalized, plus the score with ``--save-conf``), with ``--save-json`` ``results.json`` in COCO results
format (``image_id``, ``category_id``, ``bbox`` [x, y, w, h] pixels, ``score``).
An unreadable file is reported and skipped; a missing source or a cfg/weights problem is a one-line
error with exit status 2.
"""
from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if __name__ == "__main__":
    # OpenMP threads that spin after each parallel region fight OpenCV's threads (image decoding,
    # resizing) and anything else on a busy machine, which can make a forward pass 10x slower;
    # passive waiting costs little. Must be set before torch loads; an explicit setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from yolo.runs import increment_path  # noqa: E402
from yolo.cli.args import ToolParser, fail, fraction, image_side, non_negative_int, positive_int  # noqa: E402
from yolo.progress import use_bars  # noqa: E402
from yolo.inference.detector import IMAGE_SUFFIXES, Detector, load_image  # noqa: E402
from yolo.device import parse_device  # noqa: E402
from yolo.errors import ConfigError, ImageReadError  # noqa: E402

logger = logging.getLogger("yolo.detect")

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".m4v", ".wmv", ".mpg", ".mpeg", ".webm", ".flv", ".ts")


# ------------------------------------------------------------------------------------- sources
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


def collect_sources(source: str) -> List[SourceItem]:
    """Expand ``--source``: a camera index (``0``), a file, a folder (its images and videos, sorted)
    or a glob. Raises ``FileNotFoundError`` with a one-line message when nothing matches."""
    if source.isdigit() and not Path(source).exists():
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


# ------------------------------------------------------------------------------------- outputs
class Writer:
    """Saves annotated frames, YOLO txt labels and COCO results under one run folder."""

    def __init__(self, out_dir: Path, detector: Detector, save_img: bool, save_txt: bool, save_conf: bool,
                 save_json: bool):
        from yolo.evaluation import coco_category_ids

        self.out_dir, self.detector = out_dir, detector
        self.save_img, self.save_txt, self.save_conf, self.save_json = save_img, save_txt, save_conf, save_json
        self.category_ids = coco_category_ids(detector.names)
        self.json_results: List[dict] = []
        self.used_names: set = set()
        if save_txt:
            (out_dir / "labels").mkdir(parents=True, exist_ok=True)

    def unique_name(self, name: str) -> str:
        """``name`` or ``stem_2.ext``, ... when two sources share a file name."""
        stem, suffix = Path(name).stem, Path(name).suffix
        candidate, i = name, 1
        while candidate in self.used_names:
            i += 1
            candidate = f"{stem}_{i}{suffix}"
        self.used_names.add(candidate)
        return candidate

    def labels(self, stem: str, det: dict, shape_hw: Tuple[int, int]) -> None:
        if not self.save_txt:
            return
        h, w = shape_hw
        lines = []
        for (x1, y1, x2, y2), score, label in zip(det["boxes"].tolist(), det["scores"].tolist(),
                                                   det["labels"].tolist()):
            row = f"{label} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} {(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}"
            lines.append(row + (f" {score:.5f}" if self.save_conf else ""))
        (self.out_dir / "labels" / f"{stem}.txt").write_text("".join(line + "\n" for line in lines))

    def json(self, image_id, det: dict) -> None:
        if not self.save_json:
            return
        from yolo.evaluation import detections_to_coco_results

        boxes = det["boxes"].numpy().astype(np.float64)
        xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], 1) if len(boxes) else boxes
        self.json_results += detections_to_coco_results(image_id, xywh, det["scores"].numpy(),
                                                        det["labels"].numpy(), self.category_ids)

    def annotate(self, image: np.ndarray, det: dict) -> np.ndarray:
        from yolo.visualize import draw_detections

        out = draw_detections(image, det["boxes"], det["scores"], det["labels"], self.detector.names)
        if "box_sigmas" in det:  # [Gaussian_yolo]: each box's mean coordinate uncertainty, inside its corner
            out = draw_box_uncertainty(out, det["boxes"], det["labels"], det["box_sigmas"])
        return out

    def finish(self) -> Optional[Path]:
        if not self.save_json:
            return None
        path = self.out_dir / "results.json"
        path.write_text(json.dumps(self.json_results))
        return path


def draw_box_uncertainty(image: np.ndarray, boxes: torch.Tensor, labels: torch.Tensor,
                         sigmas: torch.Tensor) -> np.ndarray:
    """Write ``unc S`` (S: the mean of a box's four uncertainties, 0..1, the quantity Darknet's Gaussian
    YOLOv3 score discounts) in the bottom-left corner of each xyxy box, in the box's colour, on ``image``."""
    from yolo.visualize import class_color

    h, w = image.shape[:2]
    scale = max(0.35, (h + w) / 2 * 0.0008)
    for (x1, _, _, y2), label, sigma in zip(boxes.tolist(), labels.tolist(), sigmas.mean(1).tolist()):
        org = (int(min(max(x1 + 2, 0), w - 1)), int(min(max(y2 - 4, 0), h - 1)))
        cv2.putText(image, f"unc {sigma:.2f}", org, cv2.FONT_HERSHEY_SIMPLEX, scale, class_color(int(label)), 1,
                    cv2.LINE_AA)
    return image


def _image_id(stem: str):
    """COCO convention: numeric file names are the image id (``000000000009.jpg`` -> 9)."""
    return int(stem) if stem.isdigit() else stem


def _timing_text(timings: dict, images: int) -> str:
    """``12.3ms (pre 1.1, model 10.4, post 0.8)`` per image."""
    pre, model, post = (timings.get(k, 0.0) * 1e3 / images for k in ("preprocess", "inference", "postprocess"))
    return f"{pre + model + post:.1f}ms (pre {pre:.1f}, model {model:.1f}, post {post:.1f})"


def describe(det: dict, names: Sequence[str]) -> str:
    """``2 cars, 1 dog`` (or ``no detections``)."""
    counts = Counter(int(k) for k in det["labels"].tolist())
    if not counts:
        return "no detections"
    return ", ".join(f"{n} {names[k]}{'s' if n > 1 and not names[k].endswith('s') else ''}"
                     for k, n in sorted(counts.items()))


# ----------------------------------------------------------------------------------- main loop
def _frames(capture: cv2.VideoCapture) -> Iterator[np.ndarray]:
    while True:
        ok, frame = capture.read()
        if not ok:
            return
        yield frame


def run_video(item: SourceItem, detector: Detector, writer: Writer, progress: tqdm) -> Tuple[int, int]:
    """Detect on every frame of a video/camera; returns (frames, detections)."""
    capture = cv2.VideoCapture(item.camera if item.kind == "camera" else str(item.path))
    if not capture.isOpened():
        raise ImageReadError(f"{item.path or item.name}: cannot open {item.kind}")
    fps = capture.get(cv2.CAP_PROP_FPS) or 25.0
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT) or 0) if item.kind == "video" else 0
    out_name = writer.unique_name(Path(item.name).stem + ".mp4")
    video_out = None
    frames = detections = 0
    try:
        for index, frame in enumerate(_frames(capture)):
            det = detector(frame)[0]
            timing = _timing_text(detector.timings, 1)
            frames += 1
            detections += len(det["labels"])
            stem = f"{Path(out_name).stem}_{index}"
            writer.labels(stem, det, frame.shape[:2])
            writer.json(stem, det)
            if writer.save_img:
                if video_out is None:
                    h, w = frame.shape[:2]
                    video_out = cv2.VideoWriter(str(writer.out_dir / out_name), cv2.VideoWriter_fourcc(*"mp4v"),
                                                fps, (w, h))
                video_out.write(writer.annotate(frame, det))
            progress.set_postfix_str(f"{item.name} frame {index + 1}/{total or '?'}")
            progress.write(f"{item.name} frame {index + 1}/{total or '?'}: {describe(det, detector.names)}, "
                           f"{timing}")
    finally:
        capture.release()
        if video_out is not None:
            video_out.release()
    if frames == 0:
        raise ImageReadError(f"{item.path or item.name}: no frame could be read")
    if frames < total:  # OpenCV stops at the first frame it cannot decode
        progress.write(f"warning: {item.path}: the video should have {total} frames but only {frames} could be "
                       f"read (truncated or damaged file); the {total - frames} missing frame(s) were not processed",
                       file=sys.stderr)
    return frames, detections


def _camera_opens(index: int) -> bool:
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


def parse_args(argv=None):
    p = ToolParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cfg", type=Path, default=None, help="Darknet .cfg (optional for a .pt carrying its cfg)")
    p.add_argument("--weights", type=Path, required=True, help="Darknet .weights or our .pt")
    p.add_argument("--source", required=True, help="image, video, folder, glob or camera index")
    p.add_argument("--names", type=Path, default=None, help=".names file (one class name a line)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=None,
                   help="network input: S or H W (default: 416, or the cfg's size when a [connected] layer fixes it)")
    p.add_argument("--conf-thres", type=fraction, default=0.25, help="score threshold (objectness x class)")
    p.add_argument("--iou-thres", type=fraction, default=0.45, help="NMS IoU threshold")
    p.add_argument("--resize", default=None, choices=["letterbox", "stretch"],
                   help="pre-processing (default: the cfg's, as Darknet: letter_box=1 in [net] letterboxes, "
                        "else stretch)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 or a GPU index (default: CUDA if present)")
    p.add_argument("--half", action="store_true", help="fp16 inference (CUDA only)")
    p.add_argument("--classes", type=non_negative_int, nargs="+", default=None, help="keep only these class indices")
    p.add_argument("--agnostic-nms", action="store_true", help="class-agnostic NMS")
    p.add_argument("--nms-kind", default=None, choices=["default", "greedynms", "diounms"],
                   help="Darknet's NMS variant (default: the cfg's nms_kind of its last [yolo])")
    p.add_argument("--beta-nms", type=float, default=None, help="DIoU-NMS exponent (default: the cfg's beta_nms)")
    p.add_argument("--max-det", type=positive_int, default=300, help="most detections per image")
    p.add_argument("--batch-size", type=positive_int, default=1, help="images per forward pass")
    p.add_argument("--output", type=Path, default=Path("runs/detect"), help="parent of the run folders")
    p.add_argument("--name", default="exp", help="run folder name (exp, exp2, ... never overwritten)")
    p.add_argument("--save-txt", action="store_true", help="save YOLO txt labels")
    p.add_argument("--save-conf", action="store_true", help="add the score to each txt label line")
    p.add_argument("--save-json", action="store_true", help="save COCO-format results.json")
    p.add_argument("--nosave", action="store_true", help="do not save annotated images/videos")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (always off when stderr is not a terminal)")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main(args) -> Path:
    """Run detection as described by ``args``; returns the run folder."""
    from yolo.errors import CfgError
    from yolo.errors import WeightsError

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(message)s")
    try:
        items = collect_sources(args.source)
    except FileNotFoundError as exc:
        fail(str(exc))
    for item in items:
        if item.kind == "camera" and not _camera_opens(item.camera):
            fail(f"camera {item.camera}: cannot open this camera index")
    if args.cfg is not None and not args.cfg.is_file():
        fail(f"{args.cfg}: cfg not found")
    if not args.weights.is_file():
        fail(f"{args.weights}: weights not found")
    try:
        device = parse_device(args.device)
    except ConfigError as exc:
        fail(f"--device: {exc}")
    if args.img_size is not None and len(args.img_size) > 2:
        fail(f"--img-size takes one value or two (height width), got {len(args.img_size)}")
    img_size = None if args.img_size is None else \
        args.img_size[0] if len(args.img_size) == 1 else tuple(args.img_size[:2])
    try:
        detector = Detector(args.cfg, args.weights, names=args.names, device=device, img_size=img_size,
                            conf_thres=args.conf_thres, iou_thres=args.iou_thres, resize=args.resize,
                            half=args.half, classes=args.classes, agnostic=args.agnostic_nms, max_det=args.max_det,
                            nms_kind=args.nms_kind, beta_nms=args.beta_nms)
    except (CfgError, WeightsError, ValueError, FileNotFoundError) as exc:
        fail(str(exc).strip().splitlines()[0])
    if args.half and detector.device.type != "cuda":
        logger.warning("--half needs CUDA: running in fp32 on %s", detector.device)

    out_dir = increment_path(args.output / args.name)
    writer = Writer(out_dir, detector, not args.nosave, args.save_txt, args.save_conf, args.save_json)
    skipped: List[str] = []
    n_images = n_dets = 0
    t_start = time.perf_counter()
    images = [it for it in items if it.kind == "image"]
    streams = [it for it in items if it.kind != "image"]
    position = {id(it): i + 1 for i, it in enumerate(items)}
    with tqdm(total=len(images) + len(streams), desc="detect", unit="src", file=sys.stderr,
              disable=not use_bars(not args.no_progress)) as progress:
        for start in range(0, len(images), max(1, args.batch_size)):
            chunk, frames = [], []
            for item in images[start:start + max(1, args.batch_size)]:
                try:
                    frames.append(load_image(item.path))
                    chunk.append(item)
                except ImageReadError as exc:
                    skipped.append(str(exc))
                    progress.write(f"warning: {exc}; skipped", file=sys.stderr)
                    progress.update(1)
            if not chunk:
                continue
            dets = detector(frames)
            timing = _timing_text(detector.timings, len(chunk))
            for item, frame, det in zip(chunk, frames, dets):
                name = writer.unique_name(item.path.name)
                n_images += 1
                n_dets += len(det["labels"])
                writer.labels(Path(name).stem, det, frame.shape[:2])
                writer.json(_image_id(item.path.stem), det)
                if writer.save_img:
                    out_path, annotated = out_dir / name, writer.annotate(frame, det)
                    if not cv2.imwrite(str(out_path), annotated):  # a suffix OpenCV cannot write
                        cv2.imwrite(str(out_path.with_suffix(".jpg")), annotated)
                progress.write(f"image {position[id(item)]}/{len(items)} {item.path}: "
                               f"{frame.shape[1]}x{frame.shape[0]} {describe(det, detector.names)}, {timing}")
                progress.update(1)
        for item in streams:
            try:
                frames_done, dets_done = run_video(item, detector, writer, progress)
                n_images += frames_done
                n_dets += dets_done
            except ImageReadError as exc:
                skipped.append(str(exc))
                progress.write(f"warning: {exc}; skipped", file=sys.stderr)
            except KeyboardInterrupt:  # a camera runs until interrupted
                progress.write(f"{item.name}: stopped")
            progress.update(1)
    json_path = writer.finish()
    elapsed = time.perf_counter() - t_start
    print(f"{n_images} image(s)/frame(s), {n_dets} detection(s) in {elapsed:.2f}s; results in {out_dir}"
          + (f"; COCO results {json_path}" if json_path else "")
          + (f"; {len(skipped)} source(s) skipped" if skipped else ""))
    if skipped and n_images == 0:
        raise SystemExit(1)  # nothing could be read at all
    return out_dir


if __name__ == "__main__":
    main(parse_args())
