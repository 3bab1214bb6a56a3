"""What a :class:`yolo.inference.detector.Detector` takes besides its cfg and weights: :class:`DetectorOptions`,
each setting declared once with its ``tools/detect.py`` flag and help; and how the detect tool feeds it,
:class:`DetectRunOptions`."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence, Union

from yolo.counts import GRAPH_MAX_BATCH
from yolo.ops.postprocess_defaults import DETECT_CONF_THRES, DETECT_IOU_THRES, MAX_DET, NMS_KINDS
from yolo.ops.sizes import SIZE_RULE, SizeLike
from yolo.settings.checks import check_int_sequence, check_number, check_optional_number, check_sequence
from yolo.settings.common import (DECODERS, RESAMPLERS, decode_setting, device_setting, img_size_setting,
                                  resample_setting)
from yolo.settings.declare import setting
from yolo.settings.values import fraction, nms_exponent, non_negative_int, positive_int, worker_count

if TYPE_CHECKING:  # the annotation's name only: this module loads no torch
    import torch

RESIZE_MODES = ("letterbox", "stretch")


@dataclass
class DetectorOptions:
    """The Detector's settings, given as keywords (``Detector(cfg, weights, conf_thres=0.3)``) or as one object
    (``Detector(cfg, weights, options=DetectorOptions(...))``). Each field's help is its ``--help`` line; what
    the Python API adds:

    - ``names``: a ``.names`` file or a sequence of names; default: the names a ``.pt`` checkpoint of ours
      stores, else ``coco.names`` (or the one ``.names`` file with as many names as classes) beside the cfg or
      in Darknet's ``data/`` folder next to it, else ``"0", "1", ...``.
    - ``img_size``: an int (square) or ``(h, w)``, multiples of the network stride; default: the training size a
      checkpoint of ours records, else the cfg's [net] width/height, else 416 (as every tool).
    - ``resize``: ``"letterbox"`` (Darknet's ``letterbox_image``) or ``"stretch"`` (Darknet's ``resize_image``,
      as OpenCV ``blobFromImage``); default: the one a checkpoint of ours records (how it was trained and
      validated, :mod:`yolo.models.preprocessing`), else the cfg's (``letter_box=1`` in ``[net]`` letterboxes).
    - ``resample``: ``"darknet"`` (Darknet's float ``resize_image``, :mod:`yolo.ops.darknet_resize`: the scores
      of ``darknet detector test``) or ``"opencv"`` (``cv2.resize`` on ``uint8``, OpenCV DNN's input); default:
      the one a checkpoint of ours records (``"opencv"`` for one older than the record's ``resample``), else
      ``"darknet"``.
    - ``decode``: ``"opencv"`` (``cv2.imdecode``, as Darknet's OpenCV build reads files) or ``"stb"`` (stb_image,
      as Darknet's default build reads them, :mod:`yolo.files.stb_decode`); default: the one a checkpoint of ours
      records, else ``"opencv"``. Arrays passed in are used as they are.
    - ``device``: a name, a GPU index (``0`` is ``cuda:0``) or a :class:`torch.device` (used as it is).
    - ``half``: fp16 on CUDA, model and input in channels-last memory, heads and detections in fp32 (ignored on
      the CPU and with ``fast=False``).
    - ``nms_kind``, ``beta_nms``: Darknet's NMS variant (:func:`yolo.ops.nms.nms`); default: the cfg's own, from
      its last ``[yolo]`` section, as Darknet does.
    """

    names: Union[str, Path, Sequence[str], None] = setting(None, "--names", type=Path,
                                                           help=".names file (one class name a line)")
    img_size: Optional[SizeLike] = img_size_setting(f"network input: S or H W (default: {SIZE_RULE})")
    conf_thres: float = setting(DETECT_CONF_THRES, "--conf-thres", type=fraction, help="score threshold (objectness x class)")
    iou_thres: float = setting(DETECT_IOU_THRES, "--iou-thres", type=fraction, help="NMS IoU threshold")
    resize: Optional[str] = setting(
        None, "--resize", choices=list(RESIZE_MODES),
        help="pre-processing (default: how a checkpoint of ours was trained and validated; else the cfg's, as "
             "Darknet: letter_box=1 in [net] letterboxes, else stretch)")
    resample: Optional[str] = resample_setting()
    decode: Optional[str] = decode_setting()
    device: Union[str, int, torch.device, None] = device_setting()
    half: bool = setting(False, "--half", action="store_true", help="fp16 inference (CUDA only)")
    classes: Optional[Sequence[int]] = setting(None, "--classes", type=non_negative_int, nargs="+",
                                               help="keep only these class indices")
    agnostic: bool = setting(False, "--agnostic-nms", action="store_true", help="class-agnostic NMS")
    nms_kind: Optional[str] = setting(None, "--nms-kind", choices=list(NMS_KINDS),
                                      help="Darknet's NMS variant (default: the cfg's nms_kind of its last [yolo])")
    beta_nms: Optional[float] = setting(None, "--beta-nms", type=nms_exponent,
                                        help="DIoU-NMS exponent (default: the cfg's beta_nms)")
    max_det: int = setting(MAX_DET, "--max-det", type=positive_int, help="most detections per image")
    # The Python API's own: evaluation and benchmarks set them; the detect tool keeps their defaults.
    multi_label: bool = setting(False, help="every class above the threshold per box (for evaluation)")
    fast: bool = setting(True, help="prepare the model for inference (BN folded, channels-last, the CPU kernels "
                                    "of yolo.accel); False runs the plain eval model")
    compile: bool = setting(False, help="torch.compile the prepared model")
    max_batch: Optional[int] = setting(
        None, help="most images per forward pass (default: 1 on the CPU, where that is fastest because "
                   "activations stay in the caches; all at once on CUDA)")
    device_preprocess: Optional[bool] = setting(
        None, help="resize and convert the images with torch ops on the model's device (uploading uint8) instead "
                   "of on the CPU (Darknet's resampler: the same floats); default: on CUDA (on the CPU the CPU path "
                   "is faster)")
    cuda_graph: Optional[bool] = setting(
        None, help=f"replay a captured CUDA graph per input shape for batches of at most {GRAPH_MAX_BATCH} images "
                   "(falls back to eager when a capture fails); "
                   "default: on with CUDA unless compile; no effect on the CPU")

    def __post_init__(self):
        """The checks of the detect tool's flags, for the same settings given from Python: a ``TypeError``
        (wrong type) or ``ValueError`` (out of range) naming the setting."""
        if self.resize not in (*RESIZE_MODES, None):
            raise ValueError(f"unknown resize mode {self.resize!r}: use 'letterbox' or 'stretch'")
        if self.resample not in (*RESAMPLERS, None):
            raise ValueError(f"unknown resampler {self.resample!r}: use 'darknet' or 'opencv'")
        if self.decode not in (*DECODERS, None):
            raise ValueError(f"unknown decode {self.decode!r}: use 'opencv' or 'stb'")
        if self.names is not None and not isinstance(self.names, (str, Path)):
            check_sequence("names", self.names, "class names (or a .names file)")
        check_number("conf_thres", self.conf_thres, fraction)
        check_number("iou_thres", self.iou_thres, fraction)
        check_optional_number("beta_nms", self.beta_nms, nms_exponent)
        check_number("max_det", self.max_det, positive_int)
        check_optional_number("max_batch", self.max_batch, positive_int)
        # An empty filter is one no class can pass: refused, as the Detector refuses classes the model lacks.
        check_int_sequence("classes", self.classes)


@dataclass
class DetectRunOptions:
    """How the detect tool feeds the Detector (files and videos; a camera is always one frame at a time)."""

    batch_size: Optional[int] = setting(
        None, "--batch-size", type=positive_int,
        help="images or video frames per batch (default: 1 on the CPU, where the model runs one image at a time "
             f"anyway; {GRAPH_MAX_BATCH} on CUDA)")
    workers: Optional[int] = setting(
        None, "--workers", type=worker_count,
        help="threads reading and decoding images and video frames ahead of the model, and saving annotated "
             "results behind it; 0: all in order in one thread (default: 0 on the CPU, where the model keeps "
             "every core busy; up to 4 on CUDA)")

    def __post_init__(self):
        check_optional_number("batch_size", self.batch_size, positive_int)
        check_optional_number("workers", self.workers, worker_count)


@dataclass
class DetectToolOptions:
    """What the detect tool reads and where and what it saves (the tool's own; the Detector's are
    :class:`DetectorOptions`)."""

    cfg: Optional[Path] = setting(None, "--cfg", type=Path,
                                  help="Darknet .cfg (optional for a .pt carrying its cfg)")
    weights: Path = setting(None, "--weights", type=Path, required=True,
                            help="Darknet .weights, our .pt, or an export of tools/export.py (.onnx, .torchscript, "
                                 "OpenVINO .xml)")
    source: str = setting(None, "--source", required=True, help="image, video, folder, glob or camera index")
    project: Path = setting(Path("runs/detect"), "--project", type=Path, help="parent of the run folders")
    name: str = setting("exp", "--name", help="run folder name (exp, exp2, ... never overwritten)")
    save_txt: bool = setting(False, "--save-txt", action="store_true", help="save YOLO txt labels")
    save_conf: bool = setting(False, "--save-conf", action="store_true",
                              help="add the score to each txt label line")
    save_json: bool = setting(False, "--save-json", action="store_true", help="save COCO-format results.json")
    nosave: bool = setting(False, "--nosave", action="store_true", help="do not save annotated images/videos")


__all__ = ["DetectRunOptions", "DetectToolOptions", "DetectorOptions", "NMS_KINDS", "RESIZE_MODES"]
