"""Where detection results go: one run folder with annotated images and videos, YOLO txt labels
(``labels/<name>.txt``) and COCO results (``results.json``).

Detections are the Detector's dicts: ``boxes`` ``Float[K, 4]`` xyxy original-image pixels, ``scores``
``Float[K]``, ``labels`` ``Int64[K]`` (and ``box_sigmas`` ``Float[K, 4]`` for ``[Gaussian_yolo]`` heads).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np
import torch

from yolo.ops.boxes import xyxy_to_cxcywh, xyxy_to_xywh
from yolo.ops.coco import coco_category_ids, coco_image_ids, detections_to_coco_results
from yolo.files.atomic import NAME_MAX, write_bytes_atomic, write_text_atomic
from yolo.files.opencv_paths import opencv_takes, plain_suffix
from yolo.files.write_errors import check_written, writing
from yolo.visualize import draw_box_uncertainty, draw_detections

__all__ = ["IMAGE_IDS_FILE", "Writer", "fitting_name"]

IMAGE_IDS_FILE = "image_ids.json"  # beside results.json when its image ids are positions, not file names


class Writer:
    """Saves annotated frames, YOLO txt labels and COCO results under ``out_dir``.

    Args:
        out_dir: the run folder (exists; None when nothing is saved). names: class names, one per label index.
        save_img: annotated images and videos. save_txt: txt labels, ``class cx cy w h`` normalized to 0..1
            (``cxcywh``), plus the score with ``save_conf``. save_json: ``results.json`` in COCO results
            format (``bbox`` ``xywh`` pixels) on :meth:`finish`. Its ``image_id`` is an integer, as COCO's:
            the file name's number where every image is named by one (``000000000009.jpg``: 9), else the
            image's position ``1..N`` with ``image_ids.json`` beside it (``[{id, file_name, height, width}]``).
    """

    def __init__(self, out_dir: Path, names: Sequence[str], save_img: bool, save_txt: bool, save_conf: bool,
                 save_json: bool):
        self.out_dir, self.names = out_dir, list(names)
        self.save_img, self.save_txt, self.save_conf, self.save_json = save_img, save_txt, save_conf, save_json
        self.category_ids = coco_category_ids(self.names)
        self.json_images: List[dict] = []  # file_name, height, width of each image given to json()
        self.json_detections: List[tuple] = []  # its (boxes xywh, scores, labels)
        self.used_names: set = set()  # output file names in out_dir (images, videos)
        self.used_label_stems: set = set()  # label stems in out_dir/labels: two sources may share a stem
        self.videos: Dict[str, cv2.VideoWriter] = {}  # open videos, written under partial_name(name)
        if save_txt:  # out_dir may be None only when nothing is saved
            with writing(out_dir / "labels"):
                (out_dir / "labels").mkdir(parents=True, exist_ok=True)

    def unique_name(self, name: str) -> str:
        """``name`` or ``stem_2.ext``, ... when two sources share a file name."""
        return _first_unused(Path(name).stem, Path(name).suffix, self.used_names)

    def label_stem(self, stem: str) -> str:
        """``stem`` or ``stem_2``, ... when an earlier result already took ``labels/<stem>.txt`` (``a.jpg`` and
        ``a.png``; the image ``clip_1.jpg`` and frame 1 of ``clip.mp4``), so that no label file is overwritten."""
        return _first_unused(stem, "", self.used_label_stems)  # a stem may hold dots: it has no suffix

    def labels(self, stem: str, det: dict, shape_hw: Tuple[int, int]) -> None:
        """``labels/<stem>.txt``: one ``class cx cy w h [score]`` line per detection (with ``save_txt``); ``stem``
        comes from :meth:`label_stem`."""
        if not self.save_txt:
            return
        h, w = shape_hw
        rows = xyxy_to_cxcywh(det["boxes"].double()) / torch.tensor([w, h, w, h], dtype=torch.float64)
        lines = []
        for (cx, cy, bw, bh), score, label in zip(rows.tolist(), det["scores"].tolist(), det["labels"].tolist()):
            row = f"{label} {cx:.6f} {cy:.6f} {bw:.6f} {bh:.6f}"
            lines.append(row + (f" {score:.5f}" if self.save_conf else ""))
        path = self.out_dir / "labels" / fitting_name(stem, ".txt")
        with writing(path):
            path.write_text("".join(line + "\n" for line in lines))

    def json(self, file_name: str, det: dict, shape_hw: Tuple[int, int]) -> None:
        """Keep the detections of the image ``file_name`` (``shape_hw`` its size) for ``results.json`` (with
        ``save_json``); its COCO image id is chosen on :meth:`finish`."""
        if not self.save_json:
            return
        self.json_images.append({"file_name": str(file_name), "height": int(shape_hw[0]), "width": int(shape_hw[1])})
        self.json_detections.append((xyxy_to_xywh(det["boxes"].double()).numpy(), det["scores"].numpy(),
                                     det["labels"].numpy(), det.get("track_ids")))

    def annotate(self, image: np.ndarray, det: dict) -> np.ndarray:
        """``image`` (BGR ``uint8``) with the boxes, names and scores drawn (and uncertainties, if any)."""
        out = draw_detections(image, det["boxes"], det["scores"], det["labels"], self.names,
                              track_ids=det.get("track_ids"))
        if "box_sigmas" in det:  # [Gaussian_yolo]: each box's mean coordinate uncertainty, inside its corner
            out = draw_box_uncertainty(out, det["boxes"], det["labels"], det["box_sigmas"])
        return out

    def image(self, name: str, image: np.ndarray, det: dict) -> None:
        """Save ``image`` annotated as ``name`` (as ``.jpg`` when OpenCV cannot write its suffix). A failed write
        (a full disk) is an :class:`yolo.errors.OutputError` naming the file."""
        if not self.save_img:
            return
        out_path, annotated = self.out_dir / name, self.annotate(image, det)
        # OpenCV is given the suffix alone: a file name that is not UTF-8 crashes its bindings (exit 139)
        if not cv2.haveImageWriter("image" + plain_suffix(out_path)):
            out_path = out_path.with_suffix(".jpg")
        with writing(out_path):  # cv2.imencode raises for some failures and returns False for others
            ok, data = cv2.imencode(out_path.suffix, annotated)
            check_written(ok, out_path)
        write_bytes_atomic(out_path, data.tobytes())

    def video_frame(self, name: str, frame: np.ndarray, det: dict, fps: float) -> None:
        """Append ``frame`` annotated to the video ``name`` (``mp4v``), opened on its first frame. It is written
        under a hidden partial name (:meth:`partial_name`) until :meth:`close_video`: an MP4 is playable only once
        finished, and a killed run must not leave an unplayable file under the final name."""
        if not self.save_img:
            return
        if name not in self.videos:
            h, w = frame.shape[:2]
            partial = self.partial_name(name)
            video = cv2.VideoWriter(str(partial), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
            check_written(video.isOpened(), partial)
            self.videos[name] = video
        self.videos[name].write(self.annotate(frame, det))

    def partial_name(self, name: str) -> Path:
        """Where the video ``name`` is written until it is finished: ``.<stem>.partial<suffix>`` beside it (the
        suffix kept: OpenCV picks the container by it); ``.<hash>.partial<suffix>`` when that name would be too
        long (a legal 251-character video name) or is not UTF-8, which OpenCV cannot take."""
        suffix = Path(name).suffix
        partial = f".{Path(name).stem}.partial{suffix}"
        if not opencv_takes(partial) or len(partial.encode("utf-8")) > NAME_MAX:
            partial = f".{_name_hash(name)}.partial{plain_suffix(name)}"
        return self.out_dir / partial

    def close_video(self, name: str) -> None:
        """Finish the video ``name`` and give it its final name (nothing when it has no frame)."""
        video = self.videos.pop(name, None)
        if video is not None:
            video.release()
            with writing(self.out_dir / name):
                os.replace(self.partial_name(name), self.out_dir / name)

    def finish(self) -> Optional[Path]:
        """Close the videos and write ``results.json`` (with ``save_json``); returns its path."""
        for name in list(self.videos):
            self.close_video(name)
        if not self.save_json:
            return None
        ids, is_index = coco_image_ids([image["file_name"] for image in self.json_images])
        results: List[dict] = []
        for image_id, (boxes, scores, labels, track_ids) in zip(ids, self.json_detections):
            entries = detections_to_coco_results(image_id, boxes, scores, labels, self.category_ids)
            if track_ids is not None:  # tracking: each detection's track (-1: none confirmed yet)
                for entry, track_id in zip(entries, track_ids.tolist()):
                    entry["track_id"] = int(track_id)
            results += entries
        path = write_text_atomic(self.out_dir / "results.json", json.dumps(results))  # whole or absent
        if is_index:  # the ids are positions: say which image each one is (COCO's "images" entries)
            images = [{"id": image_id, **image} for image_id, image in zip(ids, self.json_images)]
            write_text_atomic(self.out_dir / IMAGE_IDS_FILE, json.dumps(images, indent=1))
        return path


def _name_hash(name: str) -> str:
    return hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def fitting_name(stem: str, suffix: str) -> str:
    """``stem + suffix``, or, when that is longer than a file name may be (a 251-character image name's label
    ``NAME_2.txt``, a video frame's ``NAME_1234.txt``), the stem cut and a hash of it added:
    ``START~HASH.suffix``."""
    name = stem + suffix
    if len(name.encode("utf-8", "surrogateescape")) <= NAME_MAX:
        return name
    tail = f"~{_name_hash(stem)}{suffix}"
    cut = stem[:NAME_MAX]
    while len((cut + tail).encode("utf-8", "surrogateescape")) > NAME_MAX:
        cut = cut[:-1]
    return cut + tail


def _first_unused(stem: str, suffix: str, used: set) -> str:
    """``stem + suffix`` or ``stem_2 + suffix``, ``stem_3 + suffix``, ... : the first not in ``used``, which it
    is added to (each cut to a file name's length by :func:`fitting_name`)."""
    candidate, i = fitting_name(stem, suffix), 1
    while candidate in used:
        i += 1
        candidate = fitting_name(f"{stem}_{i}", suffix)
    used.add(candidate)
    return candidate
