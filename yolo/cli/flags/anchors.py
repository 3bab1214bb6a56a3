"""The flags of ``tools/anchors.py`` (:mod:`yolo.cli.anchors`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, image_side, number
from yolo.cli.flags.common import add_common_flags, hidden_alias
from yolo.settings.values import seed_value
from yolo.counts import MAX_ANCHORS

DESCRIPTION = "Compute anchors for a dataset as Darknet's detector calc_anchors does (k-means, 1 - IoU distance)."
EXAMPLES = """\
Prints the anchors in Darknet's format (paste them into every [yolo] section) and their mean IoU with the
label boxes. Darknet starts from randomly drawn boxes (seeded by the clock); here --seed fixes the draw.

examples:
  # 6 anchors for a 192x192 network from the training split of a dataset YAML (the built-in shapes data)
  python tools/anchors.py --data configs/shapes.yaml -n 6 --img-size 192

  # take the size and the anchor count from a cfg and write a copy of it with the new anchors
  # (configs/coco128.yaml reads $YOLO_ASSETS/coco128: set YOLO_ASSETS to the assets folder first)
  python tools/anchors.py --data configs/coco128.yaml --cfg weights/yolov3-tiny.cfg --write yolov3-tiny-new.cfg
"""

# -n: 0 is refused, not read as "not given" (the cfg's count, else 9); the cfg's own count has the same bound.
anchor_count = number(int, 1, MAX_ANCHORS, "the anchor count")


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--data", required=True,
                   help="dataset YAML or Darknet .data file (its train split's labels are used)")
    p.add_argument("--cfg", default=None,
                   help="Darknet cfg: default input size ([net] width, height) and anchor count ([yolo] num)")
    p.add_argument("-n", "--num-of-clusters", type=anchor_count, default=None,
                   help="number of anchors (default: the cfg's, else 9)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=None,
                   help="network input: S or H W (default: the cfg's, else 416)")
    hidden_alias(p, "--width", "width", type=image_side)  # Darknet's -width / -height, before --img-size
    hidden_alias(p, "--height", "height", type=image_side)
    p.add_argument("--split", default="train", choices=["train", "val"], help="which split's labels")
    p.add_argument("--seed", type=seed_value, default=0, help="seed of the initial draw")
    p.add_argument("--write", type=Path, default=None, help="write a copy of --cfg with these anchors here")
    add_common_flags(p, "verbose")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    """The flags, with ``--img-size`` (or the older ``--width`` / ``--height``) as ``width`` and ``height``
    (None where not given)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    width, height = getattr(args, "width", None), getattr(args, "height", None)
    if args.img_size is not None:
        if len(args.img_size) > 2:
            parser.error("--img-size takes one value (square) or two (height width)")
        if width is not None or height is not None:
            parser.error("--img-size and --width/--height say the same: give one of them")
        height, width = args.img_size[0], args.img_size[-1]
    args.width, args.height = width, height
    return args
