"""The flags of ``tools/train.py`` (:mod:`yolo.cli.train`): those of :class:`yolo.settings.train.TrainOptions`
and ``--verbose``."""
from __future__ import annotations

import argparse
from typing import List, Optional

from yolo.cli.args import DefaultsHelpFormatter, ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags
from yolo.settings.train import TrainOptions

DESCRIPTION = ("Train a Darknet cfg on a dataset: SGD with the cfg's schedule, EMA, per-epoch COCO evaluation, "
               "checkpoints.")
EXAMPLES = """\
Hyperparameters: the cfg's [net], then --hyp (YAML), then the flags. Output: runs/train/NAME (NAME2, NAME3, ...
when taken) with last.pt, best.pt, results.csv, its chart results.png, cfg.cfg, hyp.yaml, opt.yaml, data.yaml,
metrics.json, plots and TensorBoard events. Ctrl-C saves last.pt and exits; --resume continues from it.

examples:
  # from scratch on the built-in shapes data (generated on first use)
  python tools/train.py --cfg configs/yolov3-tiny-shapes.cfg --data configs/shapes.yaml \\
      --hyp configs/hyp.shapes.yaml --device cpu

  # fine-tune COCO weights on a dataset with another class count (the heads are re-initialized)
  python tools/train.py --cfg weights/yolov3-tiny.cfg --adapt-classes --data my.yaml \\
      --weights weights/yolov3-tiny.weights --epochs 30 --batch-size 16 --freeze 13

  # continue an interrupted run exactly where it stopped
  python tools/train.py --resume runs/train/exp/last.pt

  # two processes (gloo on the CPU, NCCL on GPUs)
  torchrun --nproc_per_node 2 tools/train.py --cfg ... --data ... --batch-size 16
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, TrainOptions)
    add_common_flags(p, "verbose")
    return p


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)
