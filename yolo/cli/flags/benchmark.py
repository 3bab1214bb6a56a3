"""The flags of ``tools/benchmark.py`` (:mod:`yolo.cli.benchmark`)."""
from __future__ import annotations

from pathlib import Path

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, fraction, image_side, non_negative_int, positive_int
from yolo.cli.flags.common import add_common_flags, hidden_alias
from yolo.ops.postprocess_defaults import DETECT_CONF_THRES, DETECT_IOU_THRES

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
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--cfg", required=True, type=Path, help="Darknet .cfg")
    p.add_argument("--weights", type=Path, default=None, help="Darknet .weights (default: random weights)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=None,
                   help="network input: S or H W (default: the cfg's [net] width/height, else 416)")
    p.add_argument("--image", type=Path, default=None, help="image to run on (default: a synthetic 768x576)")
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads for both (default: the cores this process may use; 1 with --data)")
    p.add_argument("--batch-size", type=positive_int, default=8, help="batch size for the throughput figures")
    hidden_alias(p, "--batch", "batch_size", type=positive_int)  # the former name of --batch-size
    p.add_argument("--iters", type=positive_int, default=None,
                   help="timed rounds per measurement (default: 20; 5 with --data)")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="untimed rounds first")
    p.add_argument("--resize", default="stretch", choices=["stretch", "letterbox"],
                   help="our pre-processing (OpenCV always stretches)")
    p.add_argument("--conf-thres", type=fraction, default=DETECT_CONF_THRES,
                   help="score threshold of the post-processing")
    p.add_argument("--iou-thres", type=fraction, default=DETECT_IOU_THRES,
                   help="NMS IoU threshold of the post-processing")
    p.add_argument("--compile", action="store_true", help="also time our model under torch.compile")
    p.add_argument("--no-opencv", action="store_true", help="time only our pipeline")
    p.add_argument("--no-gpu", action="store_true", help="skip the CUDA figures (run when CUDA is available)")
    p.add_argument("--data", type=Path, default=None,
                   help="time the training data path on this dataset YAML's train split instead of detection")
    p.add_argument("--images", type=positive_int, default=64, help="with --data: training images per round")
    p.add_argument("--loader-workers", type=non_negative_int, nargs="+", default=None,
                   help="with --data: also time the training loader alone with each of these worker counts "
                        "(images/s, the main process's CPU time per mini-batch of --batch-size, threads per worker)")
    add_common_flags(p, "verbose")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)
