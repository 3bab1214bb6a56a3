"""The flags of ``tools/eval.py`` (:mod:`yolo.cli.eval`): those of
:class:`yolo.settings.evaluate.EvalOptions`."""
from __future__ import annotations

from yolo.cli.args import DefaultsHelpFormatter, ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags
from yolo.settings.evaluate import EvalOptions
from yolo.settings.tiling import TileOptions

DESCRIPTION = "Evaluate a detector on a dataset's val split with COCO metrics (pycocotools)."
EXAMPLES = """\
Prints COCO's AP/AR summary, a per-class table and the time per image; writes into the save folder
(runs/eval/exp, exp2, ... never overwritten): metrics.json, predictions.json (COCO results: image_id,
category_id, bbox [x, y, w, h] original pixels, score), pr_curves.png, pr_curves_per_class.png and
confusion_matrix.png.

examples:
  python tools/eval.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --data configs/coco128.yaml
  python tools/eval.py --weights runs/train/exp/best.pt --data configs/shapes.yaml --project runs/eval --name best
  python tools/eval.py --cfg weights/yolov3.cfg --weights weights/yolov3.weights --data obj.data --img-size 608 --fast
  python tools/eval.py --weights runs/train/exp/best.pt --data aerial.yaml --tile    # large images, sliced
  # also Darknet's `detector map obj.data yolov3-tiny.cfg yolov3-tiny.weights -points 0` report, digit for digit
  python tools/eval.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --data obj.data --darknet-map
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, EvalOptions)
    add_setting_flags(p, TileOptions)
    add_common_flags(p, "verbose")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)
