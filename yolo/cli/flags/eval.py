"""The flags of ``tools/eval.py`` (:mod:`yolo.cli.eval`)."""
from __future__ import annotations

import os

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, fraction, image_side, non_negative_int, positive_int

DESCRIPTION = "Evaluate a detector on a dataset's val split with COCO metrics (pycocotools)."
RESIZE_MODES = ("letterbox", "stretch")
EXAMPLES = """\
Prints COCO's AP/AR summary, a per-class table and the time per image; writes into the save folder
(runs/eval/exp, exp2, ... never overwritten): metrics.json, predictions.json (COCO results: image_id,
category_id, bbox [x, y, w, h] original pixels, score), pr_curves.png, pr_curves_per_class.png and
confusion_matrix.png.

examples:
  python tools/eval.py --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --data configs/coco128.yaml
  python tools/eval.py --weights runs/train/exp/best.pt --data configs/shapes.yaml --project runs/eval --name best
  python tools/eval.py --cfg cfg/yolov3.cfg --weights yolov3.weights --data obj.data --img-size 608 --fast
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--cfg", default=None, help="Darknet .cfg (optional for a .pt checkpoint that carries its cfg)")
    p.add_argument("--weights", required=True, help="Darknet .weights or .pt checkpoint")
    p.add_argument("--data", required=True,
                   help="dataset YAML or Darknet .data file (its val split, valid= in a .data, is evaluated)")
    p.add_argument("--split", default="val", choices=("val", "train"), help="which split to evaluate (default: val)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=None,
                   help="network input: one value (square) or height width; default: the training size a "
                        "checkpoint of ours records, else the cfg's [net] size")
    p.add_argument("--conf-thres", type=fraction, default=0.001,
                   help="keep detections scoring above this (default: %(default)s)")
    p.add_argument("--iou-thres", type=fraction, default=0.6, help="NMS IoU threshold (default: %(default)s)")
    p.add_argument("--max-det", type=positive_int, default=300, help="detections kept per image (default: %(default)s)")
    p.add_argument("--single-label", action="store_true",
                   help="one class per box (default: every class above --conf-thres, as Darknet evaluates)")
    p.add_argument("--resize", default=None, choices=RESIZE_MODES,
                   help="letterbox keeps the aspect ratio (Darknet's letterbox_image), stretch resizes to the "
                        "input size (resize_image); default: how a checkpoint of ours was trained and "
                        "validated, else the cfg's, as Darknet's detector map (letter_box=1 in [net]: "
                        "letterbox, else stretch)")
    p.add_argument("--batch-size", type=positive_int, default=16, help="images per batch (default: %(default)s)")
    p.add_argument("--workers", type=non_negative_int, default=min(4, os.cpu_count() or 1),
                   help="data loading processes (default: %(default)s)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 or a GPU index; default: cuda if available")
    p.add_argument("--amp", action="store_true", help="mixed precision inference (CUDA)")
    p.add_argument("--fast", action="store_true",
                   help="FastCOCOeval instead of the stock COCOeval: the same mAP50, mAP50_95, no area breakdown")
    p.add_argument("--no-plots", action="store_true", help="do not draw PR curves and the confusion matrix")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (always off when stderr is not a terminal)")
    p.add_argument("--save-dir", default=None,
                   help="exactly this output folder instead of a new one under --project (default: none)")
    p.add_argument("--project", default="runs/eval", help="parent of the run folders (default: %(default)s)")
    p.add_argument("--name", default="exp", help="run folder name under --project: exp, then exp2, ... "
                   "(default: %(default)s)")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)
