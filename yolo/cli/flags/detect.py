"""The flags of ``tools/detect.py`` (:mod:`yolo.cli.detect`): the Detector's (those of
:class:`yolo.settings.detect.DetectorOptions`) and the tool's own (what to read, where and what to save)."""
from __future__ import annotations

from pathlib import Path

from yolo.cli.args import DefaultsHelpFormatter, ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags, hidden_alias
from yolo.settings.detect import DetectorOptions, DetectRunOptions, DetectToolOptions
from yolo.settings.tiling import TileOptions
from yolo.settings.video import VideoOptions

DESCRIPTION = "Run a Darknet detector on images, folders, globs, videos or a camera; save annotated results."
EXAMPLES = """\
Results go to a new folder (runs/detect/exp, exp2, ...; an earlier run is never overwritten): annotated images
and videos, with --save-txt YOLO labels (labels/<name>.txt: class cx cy w h normalized, plus the score with
--save-conf), with --save-json results.json in COCO results format (image_id, category_id, bbox [x, y, w, h]
pixels, score; integer image ids as COCO's: a numeric file name's number, else positions listed in
image_ids.json). An unreadable file is reported and skipped; a missing source or a cfg/weights problem is a
one-line error with exit status 2.

examples:
  python tools/detect.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --source image.jpg
  python tools/detect.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights \\
      --names cfg/coco.names --source data/images --save-txt --save-json
  python tools/detect.py --weights runs/train/exp/best.pt --source video.mp4 --project runs/videos --name v1
  python tools/detect.py --weights runs/train/exp/best.pt --source 0      # the first camera
  python tools/detect.py --weights runs/train/exp/best.pt --source video.mp4 --track --save-json
  python tools/detect.py --weights runs/train/exp/best.pt --source large.jpg --tile
"""

# The tool's own settings before the Detector's in --help (what it reads), and after them (what it saves).
READS = ("cfg", "weights", "source")
SAVES = ("project", "name", "save_txt", "save_conf", "save_json", "nosave")


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, DetectToolOptions, only=READS)
    add_setting_flags(p, DetectorOptions)
    add_setting_flags(p, TileOptions)
    add_setting_flags(p, VideoOptions)
    add_setting_flags(p, DetectRunOptions)
    add_setting_flags(p, DetectToolOptions, only=SAVES)
    hidden_alias(p, "--output", "project", type=Path)  # the former name of --project
    add_common_flags(p, "progress", "verbose")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)
