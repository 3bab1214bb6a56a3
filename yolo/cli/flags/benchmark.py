"""The flags of ``tools/benchmark.py`` (:mod:`yolo.cli.benchmark`)."""
from __future__ import annotations

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, positive_int
from yolo.cli.flags.common import add_common_flags, add_setting_flags, hidden_alias, parse_declared
from yolo.settings.benchmark import BenchmarkOptions

DESCRIPTION = "Time our detection pipeline against OpenCV DNN on the same cfg, weights, input size and threads."
EXAMPLES = """\
Both run in this process, interleaved (ours, OpenCV, ours, ... with the order alternating), so machine noise
hits both alike. Reported per pipeline: per-image latency at batch 1 (pre-process + model + post-process),
throughput at --batch-size (images/s), and model-only latency; then the ratios ours / OpenCV (latency: below
1.0 means we are faster). With a GPU it also reports fp32/fp16 figures. Then where our time goes, per batch
at batch 1 and --batch-size: pre-processing, model and post-processing (and the upload on CUDA), synchronized
stages on the CPU and, with a GPU, on CUDA in fp32 and fp16. With --data it times the training data
path instead: milliseconds of one CPU core per training image (decode + augmentation + item tensor) for each
augmentation pipeline with the cfg's settings.

examples:
  python tools/benchmark.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --img-size 416
  python tools/benchmark.py --cfg weights/yolov3.cfg --img-size 416 --batch-size 4     # random weights
  python tools/benchmark.py --data configs/coco128.yaml --cfg weights/yolov3-tiny.cfg --img-size 416
  python tools/benchmark.py --data configs/coco128.yaml --cfg weights/yolov3-tiny.cfg --loader-workers 1 2
  python tools/benchmark.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --runtimes \
      --threads 2 --data configs/coco128.yaml     # PyTorch, onnxruntime, OpenVINO fp32/INT8: time, diff, mAP50
  python tools/benchmark.py --weights yolov3-tiny-int8.xml --runtimes --threads 2   # one exported file
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, BenchmarkOptions)
    hidden_alias(p, "--batch", "batch_size", type=positive_int)  # the former name of --batch-size
    add_common_flags(p, "verbose")
    return p


def parse_args(argv=None):
    """The flags, ``--img-size`` as ``(height, width)`` (None where not given)."""
    return parse_declared(build_parser(), argv, BenchmarkOptions)
