"""The flags of ``tools/gpu_report.py`` (:mod:`yolo.cli.gpu_report`)."""
from __future__ import annotations

from pathlib import Path

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, image_side, non_negative_int, positive_int
from yolo.cli.flags.common import hidden_alias
from yolo.settings.values import positive_float

CLONE = Path(__file__).resolve().parents[3]
DESCRIPTION = "Measure ours against Darknet's GPU build on this GPU and print one markdown table with the ratios."
EXAMPLES = """\
Ours: end-to-end training images/s (the trainer), the training step alone (fp32, AMP), the Detector pipeline
and the model alone at batch 1 and at --batch-size (fp32, fp16), for yolov3-tiny and yolov3 on the coco128
images. Darknet: its GPU build (GPU=1 CUDNN=1, this GPU's compute capability, no OpenCV) made from
../shared/darknet in a temporary folder, timed with its own detector test and detector train on the same
images (the build runs in the background while ours are measured; a --build-dir holding a build of the same
sources and flags is reused). Runs from a clone without installing it; what is missing (CUDA, nvcc, cuDNN's
Python package, an asset, a module) is named and skipped.

Each figure is printed, and appended to --output, as soon as it is measured, after a progress line saying what
runs next and for about how long. The report plans to --budget: it shortens rounds and updates from what the
first ones cost, or leaves the least important measurements out with a note. Ctrl-C or SIGTERM (or timeout(1))
ends it with the tables of what was measured so far, the rest "not measured (stopped)" (exit status 130 / 143).

examples:
  python tools/gpu_report.py --output gpu_report.md                  # within 240 s (--budget)
  python tools/gpu_report.py --budget 120 --build-dir ~/darknet-gpu  # a build kept there is reused next time
  python tools/gpu_report.py --assets /data/assets --darknet-src /src/darknet --updates 20
  python tools/gpu_report.py --device cpu --quick          # a small run on the CPU (checks the code paths)
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--assets", type=Path, default=None,
                   help="assets folder with cfg/, weights/, coco128/ (default: $YOLO_ASSETS, else ../shared/assets)")
    p.add_argument("--darknet-src", type=Path, default=CLONE.parent / "shared" / "darknet",
                   help="Darknet's source folder (src/, include/, Makefile)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="auto/cuda: measure on the GPU (without one: say so and exit 0); cpu: ours on the CPU")
    p.add_argument("--models", nargs="+", default=["yolov3-tiny", "yolov3"], choices=["yolov3-tiny", "yolov3"],
                   help="the cfgs to measure (from the assets' cfg/)")
    p.add_argument("--img-size", type=image_side, default=416, help="input side (a multiple of 32)")
    p.add_argument("--batch-size", type=positive_int, default=64,
                   help="training batch and the large detection batch")
    hidden_alias(p, "--batch", "batch_size", type=positive_int)  # the name used by earlier versions
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
                   help="a small run: yolov3-tiny at 64x64, batch 4, 2 timed updates, 8 images, 3 rounds (not with "
                        "the flags it sets)")
    p.add_argument("--budget", type=positive_float(86400, "--budget"), default=240.0,
                   help="seconds for the whole report, Darknet's build included: rounds and updates are shortened, "
                        "or the least important measurements left out, to end within it")
    p.add_argument("--output", type=Path, default=None,
                   help="also write the figures (each as it is measured) and then the tables and notes to this file")
    return p


# The flags --quick sets itself (dest: flag): given with it, they would be silently replaced.
QUICK_SETS = {"models": "--models", "img_size": "--img-size", "batch_size": "--batch-size",
              "subdivisions": "--subdivisions", "updates": "--updates", "warmup": "--warmup", "rounds": "--rounds"}
_NOT_GIVEN = object()


def parse_args(argv=None):
    """The flags; ``--quick`` together with a flag it sets is refused (one line naming them)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    replaced = given_flags(argv, QUICK_SETS) if args.quick else []
    if replaced:
        parser.error(f"--quick sets {', '.join(replaced)} itself: give either --quick or {' and '.join(replaced)}")
    return args


def given_flags(argv, flags: dict) -> list:
    """Which of ``flags`` (dest: flag) ``argv`` gives, however spelled (an alias, an abbreviation): the
    arguments parsed again with a marker as every default."""
    parser = build_parser()
    parser.set_defaults(**{dest: _NOT_GIVEN for dest in flags})
    given = parser.parse_args(argv)
    return [flag for dest, flag in flags.items() if getattr(given, dest) is not _NOT_GIVEN]
