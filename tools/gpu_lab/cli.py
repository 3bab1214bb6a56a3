"""Measure ours against Darknet's GPU build on this GPU and print one markdown table with the ratios.

Ours: end-to-end training images/s (the trainer), the training step alone (fp32, AMP), the Detector pipeline
and the model alone at batch 1 and at the training batch (fp32, fp16), for yolov3-tiny and yolov3 on the
coco128 images. Darknet: its GPU build (GPU=1 CUDNN=1, this GPU's compute capability, no OpenCV) made from
../shared/darknet in a temporary folder, timed with its own ``detector test`` and ``detector train`` on the
same images (Darknet's build runs in the background while ours are measured). Runs from a clone without
installing it; what is missing (CUDA, nvcc, cuDNN's Python package, an asset, a module) is named and skipped.

Each figure is printed (and appended to ``--output``) as soon as it is measured, after a progress line that says
what runs next and for about how long. The report plans to ``--budget`` seconds (:mod:`gpu_lab.gpu_schedule`):
shorter rounds and updates, or the least important measurements left out with a note. Ctrl-C or SIGTERM (as
``timeout`` sends) ends it with the tables of what was measured, the rest "not measured (stopped)".

    python tools/gpu_report.py --output gpu_report.md      # about 4 minutes (--budget 240)
    python tools/gpu_report.py --budget 120 --build-dir ~/darknet-gpu   # a build kept there is reused
    python tools/gpu_report.py --assets /data/assets --darknet-src /src/darknet --updates 20
    python tools/gpu_report.py --device cpu --quick          # a small run on the CPU (checks the code paths)
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Optional

from gpu_lab.gpu_environment import cuda_device, find_assets
from gpu_lab.gpu_report import ReportSettings, run_report
from gpu_lab.gpu_schedule import RowStream, process_age
from gpu_lab.report_table import figure_label, figure_text
from yolo.cli.args import fail, run_tool, setup_logging, signal_exit_status
from yolo.cli.flags.gpu_report import parse_args
from yolo.errors import MAX_MESSAGE, OutputError, shown
from yolo.files.atomic import output_target
from yolo.ops.sizes import ImageSize, check_stride
from yolo.settings.gpu_report import CLONE, DEFAULT_SIDE

DARKNET_STRIDE = 32  # the stride of the measured models (yolov3-tiny, yolov3)


def settings_from(args) -> ReportSettings:
    assets = args.assets or Path(os.environ.get("YOLO_ASSETS") or CLONE.parent / "shared" / "assets")
    s = ReportSettings(assets=assets, darknet_src=args.darknet_src, device=args.device, models=tuple(args.models),
                       img_size=square_side(args.img_size), batch=args.batch_size, subdivisions=args.subdivisions,
                       updates=args.updates, warmup=args.warmup, rounds=args.rounds, workers=args.workers,
                       darknet=not args.no_darknet, build_dir=args.build_dir, budget=args.budget,
                       started=getattr(args, "started", None))
    if args.quick:
        s.models, s.img_size, s.batch, s.subdivisions = ("yolov3-tiny",), 64, 4, 2
        s.updates, s.warmup, s.rounds, s.images, s.workers = 2, 0, 3, 8, args.workers or 0
    check_stride((s.img_size, s.img_size), DARKNET_STRIDE, "--img-size")  # a square input, as Darknet's harness runs
    return s


def square_side(size: Optional[ImageSize]) -> int:
    """``--img-size`` as the one side of the square input Darknet's harness runs (None: the default)."""
    if size is None:
        return DEFAULT_SIDE
    if size[0] != size[1]:
        fail(f"--img-size: the report runs square inputs, as Darknet's harness: give one side, not {size[0]} {size[1]}")
    return size[0]


def main(args) -> str:
    """Print the report as it is measured (and write it with ``--output``); returns its final markdown (the
    tables and notes). Stopped by Ctrl-C or SIGTERM, it ends with the tables of what was measured and exits with
    130 or 143."""
    if args.output is not None:  # streamed as measured: a FIFO would hang the report, a device become a file
        try:
            args.output = output_target(args.output)
        except OutputError as exc:
            fail(str(exc))
    s = settings_from(args)
    if args.device != "cpu" and cuda_device() is None:
        print("no CUDA GPU on this machine: nothing measured (--device cpu measures ours on the CPU)")
        return ""
    if not s.assets.is_dir():
        fail(f"assets folder {s.assets} not found (--assets or YOLO_ASSETS)")
    missing = find_assets(s.assets, s.models).missing
    if len(missing) == len(s.models) + 2:  # every cfg, the names and the images: not an assets folder
        fail(f"assets folder {s.assets}: no assets found there (looked for {', '.join(missing)}; --assets or "
             "YOLO_ASSETS)")
    stream = RowStream(args.output, print_fn=lambda line: print(line, flush=True),
                       label=lambda key: figure_label(key, s.batch), value=figure_text)
    report = run_report(s, stream=stream)
    text = report.markdown()
    if args.output is not None:
        print(f"written to {shown(args.output, MAX_MESSAGE)}")
    if report.stopped is not None:
        raise SystemExit(signal_exit_status(report.stopped) or 1)
    return text


def cli(argv=None) -> None:
    """Entry point of ``tools/gpu_report.py``: the budget counts from the process's start (its imports too)."""
    args = parse_args(argv)
    args.started = time.monotonic() - process_age()
    setup_logging(args.verbose, logging.WARNING)
    run_tool(main, args, reduce="--batch-size")
