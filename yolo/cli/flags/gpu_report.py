"""The flags of ``tools/gpu_report.py`` (``tools/gpu_lab/cli.py``)."""
from __future__ import annotations

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, positive_int
from yolo.cli.flags.common import add_common_flags, add_setting_flags, hidden_alias, parse_declared
from yolo.settings.gpu_report import GpuReportOptions

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
    add_setting_flags(p, GpuReportOptions)
    hidden_alias(p, "--batch", "batch_size", type=positive_int)  # the name used by earlier versions
    add_common_flags(p, "verbose")
    return p


# The flags --quick sets itself (dest: flag): given with it, they would be silently replaced.
QUICK_SETS = {"models": "--models", "img_size": "--img-size", "batch_size": "--batch-size",
              "subdivisions": "--subdivisions", "updates": "--updates", "warmup": "--warmup", "rounds": "--rounds"}
_NOT_GIVEN = object()


def parse_args(argv=None):
    """The flags; ``--quick`` together with a flag it sets is refused (one line naming them)."""
    parser = build_parser()
    args = parse_declared(parser, argv, GpuReportOptions)
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
