"""Train a Darknet cfg on a dataset: SGD with the cfg's schedule, EMA, per-epoch COCO evaluation, checkpoints.

Examples::

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

Hyperparameters: the cfg's ``[net]``, then ``--hyp`` (YAML), then the flags. Output: ``runs/train/NAME``
(``NAME2``, ``NAME3``, ... when taken) with ``last.pt``, ``best.pt``, ``results.csv``, its chart ``results.png``,
``cfg.cfg``, ``hyp.yaml``, ``opt.yaml``, ``data.yaml``, ``metrics.json``, plots and TensorBoard events.
Ctrl-C saves ``last.pt`` and exits; ``--resume`` continues from it.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import List, Optional

from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.common import settings_from
from yolo.cli.flags.train import parse_args
from yolo.cli.invocation import invoked_command
from yolo.engine.trainer import Trainer
from yolo.errors import CfgError, ConfigError, DataError, NonFiniteLossError, OutputError, WeightsError
from yolo.settings.train import TrainOptions

logger = logging.getLogger("yolo.train")

EXIT_INTERRUPTED = 130
EXIT_NON_FINITE = 3


def newest_run(project: Path) -> Path:
    """The most recently written ``last.pt`` under ``project``."""
    candidates = sorted(project.glob("*/last.pt"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise FileNotFoundError(f"--resume: no run with a last.pt under {project}")
    return candidates[-1]


def main(args: argparse.Namespace) -> int:
    """Train as described by ``args``; returns the exit status (0 finished, 130 interrupted, 3 NaN/inf loss)."""
    setup_logging(args.verbose)
    logging.getLogger("yolo.cfg").setLevel(logging.WARNING)
    resume = args.resume
    if resume == "":
        try:
            resume = str(newest_run(Path(args.project)))
        except FileNotFoundError as exc:
            fail(str(exc))
    if resume is None and (args.cfg is None or args.data is None):
        fail("--cfg and --data are required (or --resume a run)")
    options = settings_from(args, TrainOptions, resume=resume)
    trainer = None
    try:
        trainer = Trainer.from_options(options)
        result = trainer.fit()
    except OutputError as exc:  # a full disk at a save: the previous last.pt is whole (atomic saves)
        last = trainer.run_dir / "last.pt" if trainer is not None and trainer.run_dir is not None else None
        fail(f"{exc}" + (f"; {last} is intact: continue with --resume {last}" if last and last.is_file() else ""))
    except NonFiniteLossError as exc:  # every process stops; the main one says why, once
        if trainer is None or trainer.main:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_NON_FINITE
    except KeyboardInterrupt:
        print("aborted (second interrupt): nothing saved beyond the last checkpoint", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (CfgError, DataError, WeightsError, ConfigError, FileNotFoundError) as exc:
        fail(str(exc))
    if result.status == "interrupted":
        print(f"interrupted: saved {result.last}; continue with: {invoked_command('train')} --resume {result.last}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    m = result.metrics
    summary = f"finished {result.epochs_done} epochs ({result.global_step} updates)"
    if m:
        summary += f": mAP50 {m.get('mAP50', 0):.4f}, mAP50_95 {m.get('mAP50_95', 0):.4f}"
    print(f"{summary}; results in {result.run_dir}", file=sys.stderr)
    return 0


def cli(argv: Optional[List[str]] = None) -> None:
    """Console entry point: ``yolo-train``."""
    sys.exit(run_tool(main, parse_args(argv)))
