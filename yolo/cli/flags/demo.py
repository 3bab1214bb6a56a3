"""The flags of ``tools/demo.py`` (:mod:`yolo.cli.demo`): those of :class:`yolo.settings.demo.DemoOptions`,
``--verbose`` and ``--no-progress``."""
from __future__ import annotations

import argparse

from yolo.cli.args import ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags
from yolo.settings.demo import DemoOptions

DESCRIPTION = """\
The whole job on the built-in shapes data, on the CPU: generate, train from scratch, evaluate, detect.

1. generates the shapes dataset (400 train / 80 val images) under ``datasets/shapes`` unless it is there;
2. trains ``configs/yolov3-tiny-shapes.cfg`` from scratch with ``configs/hyp.shapes.yaml``
   (``runs/train/shapes``);
3. evaluates ``best.pt`` on the val split with COCO metrics (``runs/eval/shapes``);
4. draws 8 newly generated, held-out shapes images with their detections (``runs/detect/shapes``).

Each step is the project's own command-line tool; the timings and mAP are printed at the end.
Run folders are never overwritten (``shapes2``, ``shapes3``, ... on later runs).
"""
EXAMPLES = """\
examples:
  # the whole demo (after `pip install -e .`; or: bash tools/quickstart.sh)
  python tools/demo.py

  # a shorter run under another name
  python tools/demo.py --epochs 10 --name quick
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_setting_flags(p, DemoOptions)
    add_common_flags(p, "verbose", "progress")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)
