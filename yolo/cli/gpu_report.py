"""Measure ours against Darknet's GPU build on this GPU and print one markdown table with the ratios.

Ours: end-to-end training images/s (the trainer), the training step alone (fp32, AMP), the Detector pipeline
and the model alone at batch 1 and at the training batch (fp32, fp16), for yolov3-tiny and yolov3 on the
coco128 images. Darknet: its GPU build (GPU=1 CUDNN=1, this GPU's compute capability, no OpenCV) made from
../shared/darknet in a temporary folder, timed with its own ``detector test`` and ``detector train`` on the
same images. Runs from a clone without installing it; what is missing (CUDA, nvcc, cuDNN's Python package,
an asset, a module) is named and skipped.

    python tools/gpu_report.py --output gpu_report.md
    python tools/gpu_report.py --assets /data/assets --darknet-src /src/darknet --updates 20
    python tools/gpu_report.py --device cpu --quick          # a small run on the CPU (checks the code paths)
"""
from __future__ import annotations

import os
from pathlib import Path

from yolo.benchmark.gpu_environment import cuda_device
from yolo.benchmark.gpu_report import ReportSettings, run_report
from yolo.cli.args import DefaultsHelpFormatter, ToolParser, fail, image_side, non_negative_int, positive_int, run_tool

CLONE = Path(__file__).resolve().parents[2]


def parse_args(argv=None):
    p = ToolParser(description=__doc__.split("\n\n")[0], formatter_class=DefaultsHelpFormatter,
                   epilog="examples: " + "; ".join(line.strip() for line in __doc__.splitlines()
                                                   if line.startswith("    python")))
    p.add_argument("--assets", type=Path, default=None,
                   help="assets folder with cfg/, weights/, coco128/ (default: $YOLO_ASSETS, else ../shared/assets)")
    p.add_argument("--darknet-src", type=Path, default=CLONE.parent / "shared" / "darknet",
                   help="Darknet's source folder (src/, include/, Makefile)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="auto/cuda: measure on the GPU (without one: say so and exit 0); cpu: ours on the CPU")
    p.add_argument("--models", nargs="+", default=["yolov3-tiny", "yolov3"], choices=["yolov3-tiny", "yolov3"],
                   help="the cfgs to measure (from the assets' cfg/)")
    p.add_argument("--img-size", type=image_side, default=416, help="input side (a multiple of 32)")
    p.add_argument("--batch", type=positive_int, default=64, help="training batch and the large detection batch")
    p.add_argument("--subdivisions", type=positive_int, default=None,
                   help="mini-batches per update (default: the cfg's training value, else 2)")
    p.add_argument("--updates", type=positive_int, default=10, help="timed training updates (ours and Darknet's)")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="untimed updates and rounds first")
    p.add_argument("--rounds", type=positive_int, default=20, help="timed detection rounds at batch 1")
    p.add_argument("--workers", type=non_negative_int, default=None,
                   help="our loader's processes (default: the trainer's)")
    p.add_argument("--no-darknet", action="store_true", help="skip Darknet's GPU build and its timings")
    p.add_argument("--build-dir", type=Path, default=None, help="build Darknet here and keep it (default: temporary)")
    p.add_argument("--quick", action="store_true",
                   help="a small run: yolov3-tiny at 64x64, batch 4, 2 timed updates, 8 images, 3 rounds")
    p.add_argument("--output", type=Path, default=None, help="also write the table and its notes to this file")
    return p.parse_args(argv)


def settings_from(args) -> ReportSettings:
    assets = args.assets or Path(os.environ.get("YOLO_ASSETS") or CLONE.parent / "shared" / "assets")
    s = ReportSettings(assets=assets, darknet_src=args.darknet_src, device=args.device, models=tuple(args.models),
                       img_size=args.img_size, batch=args.batch, subdivisions=args.subdivisions,
                       updates=args.updates, warmup=args.warmup, rounds=args.rounds, workers=args.workers,
                       darknet=not args.no_darknet, build_dir=args.build_dir)
    if args.quick:
        s.models, s.img_size, s.batch, s.subdivisions = ("yolov3-tiny",), 64, 4, 2
        s.updates, s.warmup, s.rounds, s.images, s.workers = 2, 0, 3, 8, args.workers or 0
    if s.img_size % 32:
        fail(f"--img-size {s.img_size} is not a multiple of 32")
    return s


def main(args) -> str:
    """Print the report (and write it with ``--output``); returns its markdown."""
    s = settings_from(args)
    if args.device != "cpu" and cuda_device() is None:
        print("no CUDA GPU on this machine: nothing measured (--device cpu measures ours on the CPU)")
        return ""
    if not s.assets.is_dir():
        fail(f"assets folder {s.assets} not found (--assets or YOLO_ASSETS)")
    text = run_report(s).markdown()
    print(text, end="")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        print(f"written to {args.output}")
    return text


def cli(argv=None) -> None:
    """Entry point of ``tools/gpu_report.py``."""
    run_tool(main, parse_args(argv))
