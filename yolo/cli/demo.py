"""The whole job on the built-in shapes data, on the CPU: generate, train from scratch, evaluate, detect.

    python tools/demo.py            # after `pip install -e .`; or: bash tools/quickstart.sh

The steps and the folders they write are listed in its ``--help`` (:mod:`yolo.cli.flags.demo`). Each step is the
project's own command-line tool; the timings and mAP are printed at the end.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Optional

import yaml

from yolo.cli import detect as detect_cli
from yolo.cli import eval as eval_cli
from yolo.cli import train as train_cli
from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.demo import build_parser, parse_args  # noqa: F401  (tests build the parser from here)
from yolo.data import ensure_shapes_dataset
from yolo.device import named_device
from yolo.errors import MAX_MESSAGE, ConfigError, shown
from yolo.engine.config import Hyperparameters
from yolo.ops.sizes import ImageSize
from yolo.runs import run_name
from yolo.settings.demo import REPO

TARGET_MAP50 = 0.9


def datasets_folder() -> Path:
    """Where the held-out images are generated: ``$YOLO_DATASETS``, else the repository's ``datasets/``; checked
    before the training (a file there is a one-line error, not mkdir's ``File exists`` after the training)."""
    value = os.environ.get("YOLO_DATASETS")
    folder = Path(value) if value else REPO / "datasets"
    blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        where = f"YOLO_DATASETS={shown(value)}" if value else shown(folder)
        fail(f"{where}: {shown(blocker)} is a file, not a folder; YOLO_DATASETS must name a folder")
    return folder


def heldout_images(count: int, datasets: Optional[Path] = None) -> Path:
    """``count`` shapes images the model never saw (another seed than the train/val splits), generated in
    ``datasets`` (default :func:`datasets_folder`)."""
    root = (datasets or datasets_folder()) / "shapes-heldout"
    ensure_shapes_dataset(root, num_train=0, num_val=count, seed=2024)
    return root / "images" / "val"


def main(args: argparse.Namespace) -> int:
    run_name(args.name)  # before the training: one folder name for its three run folders
    datasets = datasets_folder()
    # The files given are the caller's: found from the caller's folder, not the repository's.
    args.cfg, args.data, args.hyp = (os.path.abspath(path) for path in (args.cfg, args.data, args.hyp))
    os.chdir(REPO)  # runs/ and datasets/ land in the repository, as with the tools themselves
    times = {}
    start = time.perf_counter()

    t = time.perf_counter()
    train_argv = ["--cfg", args.cfg, "--data", args.data, "--hyp", args.hyp, "--device", args.device,
                  "--name", args.name, "--seed", str(args.seed)]
    if args.epochs:
        train_argv += ["--epochs", str(args.epochs)]
    if _on_cpu(args.device):
        # loading takes ~4 ms an image: on the CPU, worker processes would only compete with the training for
        # the cores; on a GPU the automatic workers load while the GPU trains
        train_argv += ["--workers", "0"]
    shared = [] if args.progress else ["--no-progress"]
    status = train_cli.main(train_cli.parse_args(train_argv + shared))
    if status != 0:
        print(f"training did not finish (exit status {status})", file=sys.stderr)
        return status
    times["generate + train"] = time.perf_counter() - t
    run_dir = _newest(REPO / "runs" / "train", args.name)
    weights = run_dir / "best.pt"
    img_size = _train_img_size(run_dir)

    t = time.perf_counter()
    metrics = eval_cli.main(eval_cli.parse_args(
        ["--weights", str(weights), "--data", args.data, "--img-size", str(img_size[0]), str(img_size[1]),
         "--device", args.device, "--name", args.name, "--workers", "0"] + shared))
    times["evaluate"] = time.perf_counter() - t

    t = time.perf_counter()
    source = heldout_images(args.heldout, datasets)
    detect_dir = detect_cli.main(detect_cli.parse_args(
        ["--weights", str(weights), "--source", str(source), "--img-size", str(img_size[0]), str(img_size[1]),
         "--device", args.device, "--name", args.name] + shared))
    times["detect"] = time.perf_counter() - t
    total = time.perf_counter() - start

    map50 = metrics["mAP50"]
    print("\n" + "=" * 72)
    print(f"shapes demo: mAP@0.5 {map50:.3f}, mAP@0.5:0.95 {metrics['mAP50_95']:.3f} on the val split "
          f"({'reached' if map50 >= TARGET_MAP50 else 'below'} the {TARGET_MAP50} target)")
    print("time: " + ", ".join(f"{k} {v / 60:.1f} min" for k, v in times.items()) + f"; total {total / 60:.1f} min "
          f"on {os.cpu_count()} CPU core(s)")
    print(f"trained weights: {shown(weights, MAX_MESSAGE)}\nevaluation: {shown(metrics['save_dir'], MAX_MESSAGE)}\n"
          f"annotated held-out images: {shown(detect_dir, MAX_MESSAGE)}")
    print("=" * 72)
    return 0


def _on_cpu(device: str) -> bool:
    """Whether ``--device`` names the CPU (a name the training refuses is left for it to refuse)."""
    try:
        return named_device(device).type == "cpu"
    except ConfigError:
        return False


def _newest(parent: Path, name: str) -> Path:
    runs = [p for p in parent.glob(f"{name}*") if (p / "last.pt").exists()]
    return max(runs, key=lambda p: (p / "last.pt").stat().st_mtime)


def _train_img_size(run_dir: Path) -> ImageSize:
    """The run's training input ``(height, width)``, as its ``hyp.yaml`` records it."""
    hyp_file = run_dir / "hyp.yaml"
    return Hyperparameters.from_dict(yaml.safe_load(hyp_file.read_text()), str(hyp_file)).img_size


def cli(argv=None) -> None:
    """Console entry point: ``yolo-demo``."""
    args = parse_args(argv)
    setup_logging(args.verbose)
    sys.exit(run_tool(main, args, reduce="--heldout"))
