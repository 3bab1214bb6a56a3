"""What ``tools/benchmark.py`` takes: :class:`BenchmarkOptions`, each setting declared once with its flag and help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from yolo.ops.postprocess_defaults import DETECT_CONF_THRES, DETECT_IOU_THRES
from yolo.ops.sizes import ImageSize
from yolo.settings.common import img_size_setting
from yolo.settings.declare import setting
from yolo.settings.values import fraction, non_negative_int, positive_int, thread_count


@dataclass
class BenchmarkOptions:
    """The benchmark's settings: ours against OpenCV DNN on one cfg, or the training data path (``--data``)."""

    cfg: Path = setting(None, "--cfg", required=True, type=Path, help="Darknet .cfg")
    weights: Optional[Path] = setting(None, "--weights", type=Path,
                                      help="Darknet .weights (default: random weights)")
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
    conf_thres: float = setting(DETECT_CONF_THRES, "--conf-thres", type=fraction, help="score threshold of the post-processing")
    iou_thres: float = setting(DETECT_IOU_THRES, "--iou-thres", type=fraction, help="NMS IoU threshold of the post-processing")
    compile: bool = setting(False, "--compile", action="store_true", help="also time our model under torch.compile")
    no_opencv: bool = setting(False, "--no-opencv", action="store_true", help="time only our pipeline")
    no_gpu: bool = setting(False, "--no-gpu", action="store_true",
                           help="skip the CUDA figures (run when CUDA is available)")
    data: Optional[Path] = setting(
        None, "--data", type=Path,
        help="time the training data path on this dataset YAML's train split instead of detection")
    images: int = setting(64, "--images", type=positive_int, help="with --data: training images per round")
    loader_workers: Optional[List[int]] = setting(
        None, "--loader-workers", type=non_negative_int, nargs="+",
        help="with --data: also time the training loader alone with each of these worker counts (images/s, the main "
             "process's CPU time per mini-batch of --batch-size, threads per worker)")


__all__ = ["BenchmarkOptions"]
