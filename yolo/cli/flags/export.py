"""The flags of ``tools/export.py`` (:mod:`yolo.cli.export`)."""
from __future__ import annotations

from yolo.cli.args import DefaultsHelpFormatter, ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags, hidden_alias, parse_declared
from yolo.settings.export import ExportOptions

DESCRIPTION = ("Export a Darknet model to ONNX, TorchScript, OpenVINO (float32 or INT8) or Darknet .weights, then "
               "check the written file.")
EXAMPLES = """\
The file is run once in its own runtime (onnxruntime, torch.jit.load, OpenVINO, OpenCV DNN) at batch 1 and 2 (and with
--dynamic at a second input size) and compared with the PyTorch model; a difference over the tolerance is an
error (exit status 1) and the file is removed. Files go to a new run folder, runs/export/exp (exp2, ...),
unless --output names the file. ONNX needs the onnx package, its check onnxruntime:
pip install "yolo-darknet[export]" (in a clone: pip install -e ".[export]"); OpenVINO the openvino extra
(pip install -e ".[openvino]"). With --int8, NNCF quantizes the OpenVINO IR on --data's train images and the tool
prints the mAP50 of the float32 and the INT8 file on its val split. Every tool runs the written file as a model:
python tools/eval.py --weights FILE --data D.yaml.

examples:
  python tools/export.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --format onnx --dynamic
  python tools/export.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --format onnx --nms
  python tools/export.py --weights runs/train/exp/best.pt --format torchscript
  python tools/export.py --weights runs/train/exp/best.pt --format darknet     # best.weights + best.cfg
  python tools/export.py --weights runs/train/exp/best.pt --format openvino --output best.xml   # + best.bin
  python tools/export.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --format openvino \
      --int8 --data configs/coco128.yaml --output yolov3-tiny-int8.xml
  python tools/export.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --format onnx \\
      --benchmark 50 --threads 2      # model-only latency: onnxruntime, PyTorch, OpenCV DNN
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, ExportOptions)
    add_common_flags(p, "verbose")
    hidden_alias(p, "-v", "verbose", action="store_true")  # the former short form of --verbose
    return p


def parse_args(argv=None):
    """The flags, ``--img-size`` as ``(height, width)`` (None where not given)."""
    return parse_declared(build_parser(), argv, ExportOptions)
