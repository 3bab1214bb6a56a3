"""What ``tools/export.py`` takes: :class:`ExportOptions`, each setting declared once with its flag and help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from yolo.ops.postprocess_defaults import DETECT_CONF_THRES, DETECT_IOU_THRES, MAX_DET
from yolo.ops.sizes import SIZE_RULE, ImageSize
from yolo.settings.common import img_size_setting
from yolo.settings.declare import setting
from yolo.settings.values import fraction, non_negative_int, number, positive_int, thread_count

FORMATS = ("darknet", "onnx", "openvino", "torchscript")  # the keys of yolo.export.checked.SUFFIXES


@dataclass
class ExportOptions:
    """The export tool's settings: what to write, where, and how the written file is checked."""

    cfg: Optional[Path] = setting(None, "--cfg", type=Path,
                                  help="Darknet .cfg (optional for a .pt that carries its cfg)")
    weights: Path = setting(None, "--weights", type=Path, required=True,
                            help="Darknet .weights or a trained .pt checkpoint")
    format: str = setting(None, "--format", required=True, choices=FORMATS, help="what to write")
    output: Optional[Path] = setting(
        None, "--output", type=Path,
        help="output file (default: PROJECT/NAME/ the weights' name with the format's suffix)")
    project: Path = setting(Path("runs/export"), "--project", type=Path,
                            help="parent of the run folders, when no --output (default: %(default)s)")
    name: str = setting("exp", "--name",
                        help="run folder name under --project: exp, then exp2, ... (never overwritten)")
    img_size: Optional[ImageSize] = img_size_setting(
        f"network input: S or H W, multiples of the stride (default: {SIZE_RULE})")
    dynamic: bool = setting(False, "--dynamic", action="store_true",
                            help="ONNX, OpenVINO: dynamic height and width too (batch always is)")
    half: bool = setting(False, "--half", action="store_true",
                         help="float16 weights and input (heads decode in float32)")
    nms: bool = setting(False, "--nms", action="store_true",
                        help="ONNX: put NMS in the graph; outputs boxes, scores, labels, batch_index")
    conf_thres: float = setting(DETECT_CONF_THRES, "--conf-thres", type=fraction, help="with --nms: score threshold")
    iou_thres: float = setting(DETECT_IOU_THRES, "--iou-thres", type=fraction, help="with --nms: NMS IoU threshold")
    max_det: int = setting(MAX_DET, "--max-det", type=positive_int, help="with --nms: most detections per image")
    opset: int = setting(17, "--opset", type=number(int, 17, None, "the opset"),
                         help="ONNX opset: 17 up to the newest the installed torch exports (20 in torch 2.14)")
    names: Optional[Path] = setting(
        None, "--names", type=Path,
        help="class names file, stored in the file's metadata (default: a checkpoint's names, else a .names file "
             "beside the cfg)")
    image: Optional[Path] = setting(None, "--image", type=Path,
                                    help="image for the check (default: drawn shapes scenes)")
    no_verify: bool = setting(False, "--no-verify", action="store_true",
                              help="write the file without running it (ONNX: then onnxruntime is not needed)")
    benchmark: int = setting(
        0, "--benchmark", type=non_negative_int, metavar="RUNS",
        help="ONNX: also time onnxruntime, PyTorch and OpenCV DNN (model only, batch 1) over RUNS rounds")
    int8: bool = setting(False, "--int8", action="store_true",
                         help="OpenVINO: quantize to INT8 after training with NNCF, calibrated on --data's train images; "
                              "reports the mAP50 of the float32 and the INT8 file on --data's val split")
    data: Optional[Path] = setting(None, "--data", type=Path,
                                   help="with --int8: dataset YAML (or obj.data) of the calibration and mAP images")
    calib_images: int = setting(300, "--calib-images", type=positive_int,
                                help="with --int8: calibration images (at most the train split's)")
    threads: int = setting(2, "--threads", type=thread_count, help="CPU threads for every runtime in --benchmark")


__all__ = ["ExportOptions", "FORMATS"]
