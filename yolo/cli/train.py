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
Ctrl-C, SIGTERM (``timeout``, Slurm, ``docker stop``) and SIGHUP (a closed ssh session) save ``last.pt`` and exit
(status 128 + the signal's number: 130, 143, 129); so does a data loader worker that dies (status 4). ``--resume``
continues from it.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import List, Optional

# EXIT_INTERRUPTED: Ctrl-C or Trainer.request_stop; another signal N: 128 + N (SIGTERM 143, SIGHUP 129)
from yolo.cli.args import EXIT_INTERRUPTED, fail, one_line, run_tool, setup_logging, signal_exit_status
from yolo.cli.flags.common import settings_from
from yolo.cli.flags.train import parse_args
from yolo.cli.invocation import invoked_command
from yolo.cli.resource_errors import EXIT_CLOSED_PIPE
from yolo.data.worker_signals import original_message
from yolo.engine.trainer import Trainer
from yolo.output_pipe import output_closed
from yolo.errors import (MAX_MESSAGE, CfgError, ConfigError, DataError, LoaderWorkerError, NonFiniteLossError,
                         OutputError, TrainingProcessLost, WeightsError, shown)
from yolo.settings.train import TrainOptions

logger = logging.getLogger("yolo.train")

EXIT_NON_FINITE = 3
EXIT_WORKER_DIED = 4  # a data loader worker died (kill -9, the OOM killer): last.pt holds the last completed update
EXIT_PROCESS_LOST = 5  # another process of a distributed run died
# what sets the memory a run needs, for the one line when it runs out
TRAIN_MEMORY = "--batch-size (or raise subdivisions= in the cfg), --img-size or --workers, or leave out --cache-images"


def newest_run(project: Path) -> Path:
    """The most recently written ``last.pt`` under ``project``."""
    candidates = sorted(project.glob("*/last.pt"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise FileNotFoundError(f"--resume: no run with a last.pt under {project}")
    return candidates[-1]


def main(args: argparse.Namespace) -> int:
    """Train as described by ``args``; returns the exit status (0 finished, 128 + N stopped by signal N (130 for
    Ctrl-C), 3 NaN/inf loss, 4 a loader worker died, 5 another process of a distributed run died)."""
    setup_logging(args.verbose)
    logging.getLogger("yolo.cfg").setLevel(logging.WARNING)
    resume = args.resume
    if resume == "":
        try:
            resume = str(newest_run(Path(args.project)))
        except FileNotFoundError as exc:
            fail(str(exc))
    elif resume is not None and Path(args.project) != Path(TrainOptions().project):
        # a run continues in its own folder (its checkpoints, results.csv and settings are there); moving it is
        # the user's to do (the folder can be moved whole, then resumed where it is)
        fail(f"--project {args.project} with --resume {resume}: a resumed run continues in its own folder "
             f"({Path(resume).parent if Path(resume).suffix == '.pt' else Path(resume)}); --project only says where "
             "a bare --resume looks for the newest run")
    if resume is None and (args.cfg is None or args.data is None):
        fail("--cfg and --data are required (or --resume a run)")
    options = settings_from(args, TrainOptions, resume=resume)
    trainer = None
    try:
        trainer = Trainer.from_options(options)
        result = trainer.fit()
    except OutputError as exc:  # a full disk at a save: the previous last.pt is whole (atomic saves)
        run_dir = trainer.parts.run_dir if trainer is not None else None
        last = run_dir / "last.pt" if run_dir is not None else None
        fail(f"{exc}" + (f"; {last} is intact: continue with --resume {last}" if last and last.is_file() else ""))
    except NonFiniteLossError as exc:  # every process stops; the main one says why, once
        if trainer is None or trainer.parts.dist.is_main:
            print(f"error: {shown(exc, MAX_MESSAGE)}", file=sys.stderr)
        return EXIT_NON_FINITE
    except KeyboardInterrupt:
        print("aborted (second interrupt): nothing saved beyond the last checkpoint", file=sys.stderr)
        return EXIT_INTERRUPTED
    except LoaderWorkerError as exc:  # under DDP: this process ends, the others report it lost
        print(f"error: {shown(exc, MAX_MESSAGE)}", file=sys.stderr)
        return EXIT_WORKER_DIED
    except TrainingProcessLost as exc:  # each surviving process says it, in one line
        print(f"error: {shown(exc, MAX_MESSAGE)}", file=sys.stderr)
        return EXIT_PROCESS_LOST
    except DataError as exc:  # a bad file met while training (in a loader worker too): the file, and how to go on
        fail(data_error_line(exc, trainer))
    except (CfgError, WeightsError, ConfigError, FileNotFoundError) as exc:
        fail(str(exc))
    if result.status == "interrupted":
        if trainer.parts.dist.is_main or result.failure:  # once, not once per process (but where a loader worker died)
            what = f"stopped: {result.failure}" if result.failure else f"interrupted ({result.stopped_by})"
            print(shown(f"{what}: saved {result.last}; continue with: {invoked_command('train')} --resume "
                        f"{result.last}", MAX_MESSAGE), file=sys.stderr)
        return interrupted_status(result.stopped_by)
    m = result.metrics
    summary = f"finished {result.epochs_done} epochs ({result.global_step} updates)"
    if m:
        summary += f": mAP50 {m.get('mAP50', 0):.4f}, mAP50_95 {m.get('mAP50_95', 0):.4f}"
    print(f"{summary}; results in {shown(result.run_dir, MAX_MESSAGE)}", file=sys.stderr)
    return EXIT_CLOSED_PIPE if output_closed() else 0  # a finished run whose reader left: 141, as after SIGPIPE


def data_error_line(exc: DataError, trainer: Optional[Trainer]) -> str:
    """One short line for a bad file met while training: its own message (not the loader worker's traceback
    PyTorch wraps it in) and, where the run has a ``last.pt``, the command that continues it once the file is
    repaired or removed."""
    message = one_line(original_message(exc))
    run_dir = trainer.parts.run_dir if trainer is not None else None
    last = run_dir / "last.pt" if run_dir is not None else None
    if last is not None and last.is_file():
        message += f"; repair or remove it, then continue with: {invoked_command('train')} --resume {last}"
    return message


def interrupted_status(stopped_by: str) -> int:
    """The exit status of a run stopped by ``stopped_by`` (:attr:`yolo.engine.trainer.TrainResult.stopped_by`):
    128 + the signal's number, as a shell reports a process killed by it; :data:`EXIT_WORKER_DIED` for a loader
    worker that died; :data:`EXIT_INTERRUPTED` for a stop asked from code."""
    if stopped_by == "worker":
        return EXIT_WORKER_DIED
    status = signal_exit_status(stopped_by)
    return status if status is not None else EXIT_INTERRUPTED


def cli(argv: Optional[List[str]] = None) -> None:
    """Console entry point: ``yolo-train``."""
    sys.exit(run_tool(main, parse_args(argv), reduce=TRAIN_MEMORY))
