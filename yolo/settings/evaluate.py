"""What ``tools/eval.py`` takes: :class:`EvalOptions`, each setting declared once with its flag and help."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from yolo.ops.postprocess_defaults import EVAL_CONF_THRES, EVAL_IOU_THRES, MAX_DET
from yolo.ops.sizes import SIZE_RULE, SizeLike
from yolo.settings.common import decode_setting, device_setting, img_size_setting, progress_setting, resample_setting
from yolo.settings.declare import setting
from yolo.settings.detect import RESIZE_MODES
from yolo.settings.values import fraction, map_points, positive_int, worker_count


@dataclass
class EvalOptions:
    """A detector evaluated on a dataset's split (COCO metrics); ``weights`` and ``data`` are required (their
    ``None`` defaults only keep the flags in ``--help``'s order: a dataclass field without a default cannot follow
    ``cfg``'s)."""

    cfg: Optional[str] = setting(None, "--cfg",
                                 help="Darknet .cfg (optional for a .pt checkpoint that carries its cfg)")
    weights: str = setting(None, "--weights", required=True,
                           help="Darknet .weights, a .pt checkpoint, or an export of tools/export.py (.onnx, "
                                ".torchscript, OpenVINO .xml: it carries its cfg, names and pre-processing)")
    data: str = setting(None, "--data", required=True,
                        help="dataset YAML or Darknet .data file (its val split, valid= in a .data, is evaluated)")
    split: str = setting("val", "--split", choices=("val", "train"), help="which split to evaluate (default: val)")
    img_size: Optional[SizeLike] = img_size_setting(f"network input: S or H W (default: {SIZE_RULE})")
    conf_thres: float = setting(EVAL_CONF_THRES, "--conf-thres", type=fraction,
                                help="keep detections scoring above this (default: %(default)s)")
    iou_thres: float = setting(EVAL_IOU_THRES, "--iou-thres", type=fraction, help="NMS IoU threshold (default: %(default)s)")
    max_det: int = setting(MAX_DET, "--max-det", type=positive_int,
                           help="detections kept per image (default: %(default)s)")
    multi_label: bool = setting(
        True, "--single-label", action="store_false",
        help="one class per box (default: every class above --conf-thres, as Darknet evaluates)")
    resize: Optional[str] = setting(
        None, "--resize", choices=RESIZE_MODES,
        help="letterbox keeps the aspect ratio (Darknet's letterbox_image), stretch resizes to the input size "
             "(resize_image); default: how a checkpoint of ours was trained and validated, else the cfg's, as "
             "Darknet's detector map (letter_box=1 in [net]: letterbox, else stretch)")
    resample: Optional[str] = resample_setting()
    decode: Optional[str] = decode_setting()
    batch_size: int = setting(16, "--batch-size", type=positive_int, help="images per batch (default: %(default)s)")
    workers: Optional[int] = setting(None, "--workers", type=worker_count,
                                     help="data-loading processes (default: automatic)")
    device: Optional[str] = device_setting()
    amp: bool = setting(False, "--amp", action="store_true", help="mixed precision inference (CUDA)")
    fast: bool = setting(False, "--fast", action="store_true",
                         help="FastCOCOeval instead of the stock COCOeval: the same mAP50, mAP50_95, no area "
                              "breakdown")
    darknet_map: bool = setting(
        False, "--darknet-map", action="store_true",
        help="also Darknet's `detector map` report (its own detections: conf 0.005, its NMS at 0.45; its matching, "
             "curve and mean over all classes of the names), printed as Darknet prints it and in metrics.json as "
             "darknet_map")
    points: int = setting(0, "--points", type=map_points,
                          help="--darknet-map's recall points (Darknet's -points): 0 the area under the curve, 11 "
                               "PascalVOC 2007, 101 COCO (default: %(default)s)")
    darknet_iou_thresh: float = setting(0.5, "--darknet-iou-thresh", type=fraction,
                                        help="--darknet-map's IoU a detection needs with a truth of its class "
                                             "(Darknet's -iou_thresh; default: %(default)s)")
    darknet_thresh: float = setting(0.25, "--darknet-thresh", type=fraction,
                                    help="--darknet-map's probability for TP/FP, precision, recall, F1 and "
                                         "average IoU (Darknet's -thresh; default: %(default)s)")
    plots: bool = setting(True, "--no-plots", action="store_false",
                          help="do not draw PR curves and the confusion matrix")
    progress: bool = progress_setting()

    def __post_init__(self):
        if self.weights is None or self.data is None:
            raise TypeError("EvalOptions needs weights and data")
    save_dir: Optional[str] = setting(
        None, "--save-dir",
        help="exactly this output folder (new or empty) instead of a new one under --project (default: none)")
    project: str = setting("runs/eval", "--project", help="parent of the run folders (default: %(default)s)")
    name: str = setting("exp", "--name", help="run folder name under --project: exp, then exp2, ... "
                                              "(default: %(default)s)")


__all__ = ["EvalOptions"]
