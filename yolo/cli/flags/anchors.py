"""The flags of ``tools/anchors.py`` (:mod:`yolo.cli.anchors`)."""
from __future__ import annotations

import argparse
from yolo.cli.args import DefaultsHelpFormatter, ToolParser, image_side
from yolo.cli.flags.common import add_common_flags, add_setting_flags, hidden_alias, parse_declared
from yolo.settings.anchors import AnchorsOptions

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

def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, AnchorsOptions, only=("data", "cfg", "num_of_clusters", "img_size"))
    hidden_alias(p, "--width", "width", type=image_side)  # Darknet's -width / -height, before --img-size
    hidden_alias(p, "--height", "height", type=image_side)
    add_setting_flags(p, AnchorsOptions, only=("split", "seed", "write"))
    add_common_flags(p, "verbose")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    """The flags, with ``--img-size`` (or the older ``--width`` / ``--height``) as ``width`` and ``height``
    (None where not given)."""
    parser = build_parser()
    args = parse_declared(parser, argv, AnchorsOptions)
    width, height = getattr(args, "width", None), getattr(args, "height", None)
    if args.img_size is not None:
        if width is not None or height is not None:
            parser.error("--img-size and --width/--height say the same: give one of them")
        height, width = args.img_size
    args.width, args.height = width, height
    return args
