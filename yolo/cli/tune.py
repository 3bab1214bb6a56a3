"""Search training hyperparameters: Optuna's TPE sampler draws each trial's values from the search space
(:mod:`yolo.engine.tune_space`), each trial is one training run, the median pruner stops the poor ones early.

Examples::

    # 20 trials of 10 epochs on the built-in shapes data, scored by mAP50
    python tools/tune.py --cfg configs/yolov3-tiny-shapes.cfg --data configs/shapes.yaml \\
        --hyp configs/hyp.shapes.yaml --trials 20 --epochs 10 --device cpu

    # continue it after a stop (Ctrl-C, SIGTERM), up to 40 trials
    python tools/tune.py --resume --trials 40

Output: ``runs/tune/NAME`` with ``study.db``, a run folder per trial, ``trials.csv``, ``trials.png`` and
``best_hyp.yaml`` (:mod:`yolo.engine.tuner`). Exit status: 0 when the study has its trials, 128 + N when signal N
stopped it (130 for Ctrl-C).
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import List, Optional

from yolo.cli.args import EXIT_INTERRUPTED, fail, run_tool, setup_logging, signal_exit_status
from yolo.cli.flags.common import settings_from
from yolo.cli.flags.tune import parse_args
from yolo.cli.invocation import invoked_command
from yolo.engine.tuner import Tuner
from yolo.errors import CfgError, ConfigError, DataError, WeightsError
from yolo.settings.tune import TuneOptions

logger = logging.getLogger("yolo.tune")


def main(args: argparse.Namespace) -> int:
    """Run the search ``args`` describe; returns the exit status."""
    setup_logging(args.verbose)
    logging.getLogger("yolo.cfg").setLevel(logging.WARNING)
    options = settings_from(args, TuneOptions)
    try:
        result = Tuner(options).run()
    except (CfgError, DataError, WeightsError, ConfigError, FileNotFoundError) as exc:
        fail(str(exc))
    best = ("no trial finished yet" if result.best_trial is None else
            f"best: trial {result.best_trial}, {result.metric} {result.best_value:.4f} -> {result.best_hyp}"
            + (f" and {result.best_cfg}" if result.best_cfg is not None else ""))
    if result.status == "interrupted":
        print(f"search stopped ({result.stopped_by}) after {result.trials} trials; {best}; continue with: "
              f"{invoked_command('tune')} --resume --project {options.project} --name {result.folder.name}",
              file=sys.stderr)
        status = signal_exit_status(result.stopped_by)
        return status if status is not None else EXIT_INTERRUPTED
    print(f"{result.trials} trials in {result.folder}; {best}", file=sys.stderr)
    return 0


def cli(argv: Optional[List[str]] = None) -> None:
    """Console entry point: ``yolo-tune``."""
    sys.exit(run_tool(main, parse_args(argv)))
