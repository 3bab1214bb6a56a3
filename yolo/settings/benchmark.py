"""What ``tools/benchmark.py`` takes: :class:`BenchmarkOptions`, each setting declared once with its flag and help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from yolo.ops.postprocess_defaults import DETECT_CONF_THRES, DETECT_IOU_THRES
from yolo.ops.sizes import ImageSize
from yolo.settings.common import img_size_setting, resample_setting
from yolo.settings.declare import setting
from yolo.settings.values import fraction, non_negative_int, positive_int, thread_count


def neighbour_spec(text: str) -> str:
    """``--neighbours``: a count of busy-loop processes (0..64) or ``train`` (:mod:`yolo.benchmark.neighbours`)."""
    if text == "train":
        return text
    if text.isdigit() and int(text) <= 64:
        return str(int(text))
    raise argparse.ArgumentTypeError(f"'{text}' is neither a count of busy processes (0 to 64) nor 'train'")


@dataclass
class BenchmarkOptions:
    """The benchmark's settings: ours against OpenCV DNN on one cfg, or the training data path (``--data``)."""

    cfg: Optional[Path] = setting(None, "--cfg", type=Path,
                                  help="Darknet .cfg (needed but with --runtimes and a .pt or an exported file)")
    weights: Optional[Path] = setting(None, "--weights", type=Path,
                                      help="Darknet .weights (default: random weights); with --runtimes also a .pt "
                                           "or an exported .onnx/.torchscript/OpenVINO .xml (timed alone)")
    img_size: Optional[ImageSize] = img_size_setting(
        "network input: S or H W (default: the cfg's [net] width/height, else 416)")
    image: Optional[Path] = setting(None, "--image", type=Path,
                                    help="image to run on (default: a synthetic 768x576)")
    threads: Optional[int] = setting(
        None, "--threads", type=thread_count,
        help="CPU threads for both (default: the cores this process may use; 1 with --data)")
    batch_size: int = setting(8, "--batch-size", type=positive_int, help="batch size for the throughput figures")
    iters: Optional[int] = setting(None, "--iters", type=positive_int,
                                   help="timed rounds per measurement (default: 20; 5 with --data)")
    warmup: int = setting(3, "--warmup", type=non_negative_int, help="untimed rounds first")
    resize: str = setting("stretch", "--resize", choices=["stretch", "letterbox"],
                          help="our pre-processing (OpenCV always stretches)")
    resample: Optional[str] = resample_setting()
    conf_thres: float = setting(DETECT_CONF_THRES, "--conf-thres", type=fraction, help="score threshold of the post-processing")
    iou_thres: float = setting(DETECT_IOU_THRES, "--iou-thres", type=fraction, help="NMS IoU threshold of the post-processing")
    compile: bool = setting(False, "--compile", action="store_true", help="also time our model under torch.compile")
    no_opencv: bool = setting(False, "--no-opencv", action="store_true", help="time only our pipeline")
    no_gpu: bool = setting(False, "--no-gpu", action="store_true",
                           help="skip the CUDA figures (run when CUDA is available)")
    data: Optional[Path] = setting(
        None, "--data", type=Path,
        help="time the training data path on this dataset YAML's train split instead of detection; with "
             "--runtimes: each runtime's mAP50 on its val split (and INT8 calibration on its train split)")
    runtimes: Optional[List[str]] = setting(
        None, "--runtimes", nargs="*", choices=["pytorch", "onnxruntime", "openvino", "openvino-int8"],
        help="instead: the model in each of these runtimes (none named: every installed one), interleaved at the "
             "same threads: latency at batch 1, throughput at --batch-size, largest output difference to PyTorch")
    calib_images: int = setting(64, "--calib-images", type=positive_int,
                                help="with --runtimes: INT8 calibration images (--data's train split, else drawn "
                                     "scenes)")
    neighbours: Optional[str] = setting(
        None, "--neighbours", type=neighbour_spec,
        help="time beside other processes competing for the cores: N busy-loop processes, or 'train' (a CPU training "
             "run of this project on the shapes data); they are ended after the timing; the load average is printed")
    images: int = setting(64, "--images", type=positive_int, help="with --data: training images per round")
    loader_workers: Optional[List[int]] = setting(
        None, "--loader-workers", type=non_negative_int, nargs="+",
        help="with --data: also time the training loader alone with each of these worker counts (images/s, the main "
             "process's CPU time per mini-batch of --batch-size, threads per worker)")


__all__ = ["BenchmarkOptions"]
