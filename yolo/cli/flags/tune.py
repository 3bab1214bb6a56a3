"""The flags of ``tools/tune.py`` (:mod:`yolo.cli.tune`): those of :class:`yolo.settings.tune.TuneOptions` and
``--verbose``."""
from __future__ import annotations

import argparse
from typing import List, Optional

from yolo.cli.args import DefaultsHelpFormatter, ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags
from yolo.settings.tune import TuneOptions

DESCRIPTION = ("Search training hyperparameters with Optuna (TPE sampling, median pruning): each trial is one "
               "training run, scored by its evaluation.")
EXAMPLES = """\
Output: runs/tune/NAME with study.db (the Optuna study), one run folder per trial (trial0, trial1, ...: last.pt,
best.pt, results.csv), trials.csv, trials.png and best_hyp.yaml (tools/train.py --hyp takes it as it is).
A search costs about trials x epochs epochs of training (pruned trials stop early). Ctrl-C or SIGTERM stop the
trial in progress (last.pt saved) and the search; --resume continues it.

examples:
  # 20 trials of 10 epochs on the built-in shapes data, scored by mAP50
  python tools/tune.py --cfg configs/yolov3-tiny-shapes.cfg --data configs/shapes.yaml \\
      --hyp configs/hyp.shapes.yaml --trials 20 --epochs 10 --device cpu

  # a narrower space, scored by mAP50_95; then continue it after a stop
  python tools/tune.py --cfg my.cfg --data my.yaml --space space.yaml --metric mAP50_95 --name mine
  python tools/tune.py --name mine --resume --trials 40

  # several machines on one study: the same command with --resume and a shared database on each
  python tools/tune.py --cfg my.cfg --data my.yaml --name mine --storage postgresql://host/db --resume
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, TuneOptions)
    add_common_flags(p, "verbose")
    return p


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)
