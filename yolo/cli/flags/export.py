"""The flags of ``tools/export.py`` (:mod:`yolo.cli.export`)."""
from __future__ import annotations

from pathlib import Path

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, fraction, image_side, non_negative_int, number, positive_int
from yolo.cli.flags.common import add_common_flags, hidden_alias
from yolo.ops.postprocess_defaults import DETECT_CONF_THRES, DETECT_IOU_THRES, MAX_DET
from yolo.ops.sizes import SIZE_RULE

DESCRIPTION = "Export a Darknet model to ONNX, TorchScript or Darknet .weights, then check the written file."
FORMATS = ("darknet", "onnx", "torchscript")  # the keys of yolo.export.checked.SUFFIXES
EXAMPLES = """\
The file is run once in its own runtime (onnxruntime, torch.jit.load, OpenCV DNN) at batch 1 and 2 (and with
--dynamic at a second input size) and compared with the PyTorch model; a difference over the tolerance is an
error (exit status 1) and the file is removed. Files go to a new run folder, runs/export/exp (exp2, ...),
unless --output names the file. ONNX needs the onnx package, its check onnxruntime:
pip install "yolo-darknet[export]" (in a clone: pip install -e ".[export]").

examples:
  python tools/export.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --format onnx --dynamic
  python tools/export.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --format onnx --nms
  python tools/export.py --weights runs/train/exp/best.pt --format torchscript
  python tools/export.py --weights runs/train/exp/best.pt --format darknet     # best.weights + best.cfg
  python tools/export.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --format onnx \\
      --benchmark 50 --threads 2      # model-only latency: onnxruntime, PyTorch, OpenCV DNN
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--cfg", type=Path, default=None, help="Darknet .cfg (optional for a .pt that carries its cfg)")
    p.add_argument("--weights", type=Path, required=True, help="Darknet .weights or a trained .pt checkpoint")
    p.add_argument("--format", required=True, choices=FORMATS, help="what to write")
    p.add_argument("--output", type=Path, default=None,
                   help="output file (default: PROJECT/NAME/ the weights' name with the format's suffix)")
    p.add_argument("--project", type=Path, default=Path("runs/export"),
                   help="parent of the run folders, when no --output (default: %(default)s)")
    p.add_argument("--name", default="exp", help="run folder name under --project: exp, then exp2, ... "
                   "(never overwritten)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=None,
                   help=f"network input: S or H W, multiples of the stride (default: {SIZE_RULE})")
    p.add_argument("--dynamic", action="store_true", help="ONNX: dynamic height and width too (batch always is)")
    p.add_argument("--half", action="store_true", help="float16 weights and input (heads decode in float32)")
    p.add_argument("--nms", action="store_true",
                   help="ONNX: put NMS in the graph; outputs boxes, scores, labels, batch_index")
    p.add_argument("--conf-thres", type=fraction, default=DETECT_CONF_THRES, help="with --nms: score threshold")
    p.add_argument("--iou-thres", type=fraction, default=DETECT_IOU_THRES,
                   help="with --nms: NMS IoU threshold")
    p.add_argument("--max-det", type=positive_int, default=MAX_DET,
                   help="with --nms: most detections per image")
    p.add_argument("--opset", type=number(int, 17, None, "the opset"), default=17,
                   help="ONNX opset: 17 up to the newest the installed torch exports (20 in torch 2.14)")
    p.add_argument("--names", type=Path, default=None,
                   help="class names file, stored in the file's metadata (default: a checkpoint's names, else a "
                        ".names file beside the cfg)")
    p.add_argument("--image", type=Path, default=None,
                   help="image for the check (default: drawn shapes scenes)")
    p.add_argument("--no-verify", action="store_true",
                   help="write the file without running it (ONNX: then onnxruntime is not needed)")
    p.add_argument("--benchmark", type=non_negative_int, default=0, metavar="RUNS",
                   help="ONNX: also time onnxruntime, PyTorch and OpenCV DNN (model only, batch 1) over RUNS rounds")
    p.add_argument("--threads", type=positive_int, default=2, help="CPU threads for every runtime in --benchmark")
    add_common_flags(p, "verbose")
    hidden_alias(p, "-v", "verbose", action="store_true")  # the former short form of --verbose
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)
