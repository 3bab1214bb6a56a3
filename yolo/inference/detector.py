"""``Detector``: images in, detections in original-image pixels out.

Pipeline: BGR ``uint8`` image (:mod:`yolo.files.images`; a file decoded by OpenCV, ``decode="opencv"``, or by
stb_image as Darknet's default build, ``decode="stb"``) -> resize (``letterbox`` or ``stretch``: by default
the cfg's choice, as Darknet's ``letter_box``) to RGB float 0..1, by default with Darknet's own float
``resize_image`` (``resample="darknet"``: the input of ``detector test``), or OpenCV's on ``uint8``
(``resample="opencv"``: OpenCV DNN's input) (:func:`yolo.inference.preprocess.preprocess` on the CPU; on CUDA
the ``uint8`` images are uploaded, in one copy from a pinned buffer the Detector keeps
(:mod:`yolo.inference.staging`), and resized there, :func:`yolo.inference.device_preprocess.preprocess_on_device`)
-> model (eval decode) -> thresholds and NMS for the whole batch on the model's device -> one copy of the
final detections to the CPU -> boxes mapped back to the original image and clipped (the last three:
:func:`yolo.inference.postprocess.postprocess`, which evaluation uses too).

For speed the model is prepared for inference once (:func:`yolo.inference.prepare.prepare_for_inference`:
BN folded, channels-last, the CPU kernels of :mod:`yolo.accel`; on CUDA optional fp16). On the CPU a batch
runs one image per forward pass (activations stay in the caches); on CUDA small batches replay a captured
CUDA graph (:mod:`yolo.inference.graphed`). ``torch.compile`` is optional everywhere.
All of it keeps outputs equal to the plain eval model to float tolerance (checked in ``tests/test_detector.py``
and, on CUDA, ``tests/test_cuda_inference.py``).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import fields, replace
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from yolo.backends import ExportedModel, load_runnable
from yolo.device import parse_device
from yolo.files.images import as_bgr, load_image, ready_decoder
from yolo.files.names import check_names_count, names_beside_cfg, read_names
from yolo.inference.device_preprocess import preprocess_on_device
from yolo.inference.graphed import GraphedForward
from yolo.inference.postprocess import PostprocessOptions, postprocess, warn_if_not_finite
from yolo.inference.prepare import prepare_for_inference
from yolo.inference.preprocess import LetterboxInfo, preprocess
from yolo.inference.staging import HostStaging
from yolo.inference.tiling import TiledDetector
from yolo.inference.tracking import track_frames
from yolo.models.preprocessing import cfg_resize_mode, default_decode, default_resample, default_resize, model_input_choice
from yolo.ops.sizes import ImageSize
from yolo.settings.declare import with_settings_signature
from yolo.settings.detect import DetectorOptions

__all__ = ["Detector", "cfg_resize_mode"]

ImageInput = Union[str, Path, np.ndarray]
EXPECTED_IMAGE = "an image path (str or pathlib.Path) or a uint8 H x W x 3 BGR numpy array"
EXPECTED_IMAGES = f"{EXPECTED_IMAGE}, or a list of them"


def _kind(value) -> str:
    """What ``value`` is, for a TypeError: its type, and for a bytes path the way to pass it."""
    if isinstance(value, (bytes, bytearray)):
        return f"{type(value).__name__} (a bytes path: pass os.fsdecode(path))"
    return type(value).__name__


# ------------------------------------------------------------------------------------ detector
class Detector:
    """Run a Darknet detector on images.

    Args:
        cfg: Darknet ``.cfg`` path (``None`` with a ``.pt`` that carries its cfg, and with an exported file).
        weights: Darknet ``.weights``, a ``.pt`` checkpoint, or an exported file of ``tools/export.py`` (``.onnx``,
            ``.torchscript``, OpenVINO ``.xml``), run in its own runtime on the CPU with the class names, input size
            and resize it recorded (:mod:`yolo.backends`).
        options: the settings as one :class:`~yolo.settings.detect.DetectorOptions`; keywords override it.
        **settings: the settings by name (``names=``, ``img_size=``, ``conf_thres=``, ...): the fields of
            :class:`~yolo.settings.detect.DetectorOptions`, where each is declared with its default and
            documented (``help(Detector)`` lists them). They are kept in ``self.options``.

    ``detector(images)`` takes a path, a BGR ``uint8`` image, or a list of them, and returns one dict
    per image: ``boxes`` ``Float[K, 4]`` xyxy original-image pixels, ``scores`` ``Float[K]``,
    ``labels`` ``Int64[K]`` and ``names`` (``list[str]``, one per box); empty tensors when nothing is found.
    With ``[Gaussian_yolo]`` heads each dict also has ``box_sigmas`` ``Float[K, 4]`` (the uncertainties of
    tx, ty, tw, th), and scores follow Darknet's rule for them
    (:class:`~yolo.inference.postprocess.PostprocessOptions`'s ``gaussian``).
    """

    def __init__(self, cfg: Union[str, Path, None], weights: Union[str, Path, None], *,
                 options: Optional[DetectorOptions] = None, **settings):
        unknown = sorted(set(settings) - {f.name for f in fields(DetectorOptions)})
        if unknown:
            raise TypeError(f"Detector() got unexpected keyword arguments: {', '.join(unknown)}")
        if options is not None and not isinstance(options, DetectorOptions):
            raise TypeError(f"options must be a DetectorOptions, got {type(options).__name__} {options!r}")
        self.options = opts = replace(options or DetectorOptions(), **settings)
        # A torch.device is used as it is (the detect tool has parsed --device already); a name is read here.
        self.device = opts.device if isinstance(opts.device, torch.device) else parse_device(opts.device)
        # An exported file (ONNX, TorchScript, OpenVINO IR) runs in its own runtime in the model's place.
        self.model = load_runnable(cfg, weights, device="cpu").eval()
        exported = isinstance(self.model, ExportedModel)
        self.half = bool(opts.half) and self.device.type == "cuda" and opts.fast and not exported
        self.source = str(weights if weights is not None else cfg)  # named in warnings about the model
        self._output_checked = False
        if getattr(self.model, "input_channels", 3) != 3 or not self.model.yolo_layers:
            raise ValueError(f"{cfg or weights}: not a detector on 3-channel images (channels="
                             f"{getattr(self.model, 'input_channels', 3)}, heads={len(self.model.yolo_layers)})")
        # None: the training size a checkpoint records, else the cfg's [net] size, else 416 (as every tool)
        self.img_size: ImageSize
        self.img_size, self.img_size_from = model_input_choice(self.model, opts.img_size, "img_size")
        self.num_classes = int(self.model.num_classes)
        self.names = self._resolve_names(opts.names, cfg)
        classes = opts.classes
        unknown = sorted(set(classes or ()) - set(range(self.num_classes)))
        if unknown:  # a filter no class can pass: refused rather than "no detections"
            raise ValueError(f"classes {' '.join(str(c) for c in unknown)}: the model has {self.num_classes} "
                             f"classes (0..{self.num_classes - 1}), so nothing could be detected")
        self.resize = opts.resize if opts.resize is not None else default_resize(self.model)
        self.resample = opts.resample if opts.resample is not None else default_resample(self.model)
        # stb_image is compiled now (once per cache folder): a missing compiler is said before any image
        self.decode = ready_decoder(opts.decode if opts.decode is not None else default_decode(self.model))
        self.postprocess_options = PostprocessOptions.for_model(
            self.model, conf_thres=float(opts.conf_thres), iou_thres=float(opts.iou_thres),
            classes=tuple(classes) if classes is not None else None, agnostic=bool(opts.agnostic),
            multi_label=bool(opts.multi_label), max_det=int(opts.max_det), nms_kind=opts.nms_kind,
            beta_nms=float(opts.beta_nms) if opts.beta_nms is not None else None)
        if exported:  # the file is already what it is
            self.net = self.model
        elif opts.fast:
            self.net = prepare_for_inference(self.model, self.device, half=self.half, compile=opts.compile,
                                             example_hw=self.img_size)
        else:
            self.net = self.model.to(self.device)
        self.dtype = torch.float16 if self.half else torch.float32
        on_cuda = self.device.type == "cuda"
        self.device_preprocess = on_cuda if opts.device_preprocess is None else bool(opts.device_preprocess)
        self.cuda_graph = (on_cuda and not opts.compile) if opts.cuda_graph is None else \
            bool(opts.cuda_graph) and on_cuda
        self.cuda_graph = self.cuda_graph and not exported
        self._run_net = GraphedForward(self.net) if self.cuda_graph else self.net
        # The host buffer every batch is uploaded from (pinned on CUDA), kept across calls: allocating pinned
        # memory per call would stall each one.
        self.staging = HostStaging(pin=on_cuda)
        # On the CPU one image per forward pass is fastest: its activations stay in the caches.
        self.max_batch = opts.max_batch if opts.max_batch is not None else (1 if self.device.type == "cpu" else 0)
        self.timings: Dict[str, float] = {}

    def _resolve_names(self, names, cfg=None) -> List[str]:
        """The class names: given, else a checkpoint's (read with the model), else a ``.names`` file beside the cfg
        (:func:`yolo.files.names.names_beside_cfg`), else the class numbers. ``self.names_from`` says which:
        ``"given"``, ``"checkpoint"``, the file's path, or None for numbers."""
        self.names_from = "given" if names is not None else None
        if names is None:
            names = self.model.class_names
            self.names_from = "checkpoint" if names is not None else None
        if names is None and cfg is not None:
            names = names_beside_cfg(cfg, self.num_classes)
            self.names_from = str(names) if names is not None else None
        if names is None:
            return [str(i) for i in range(self.num_classes)]
        source = names if isinstance(names, (str, Path)) else None
        names = [str(n) for n in (read_names(source) if source is not None else names)]
        check_names_count(names, self.num_classes, source)
        return names

    # The post-processing options, read-only (they live in ``self.postprocess_options``).
    conf_thres = property(lambda self: self.postprocess_options.conf_thres, doc="score threshold")
    iou_thres = property(lambda self: self.postprocess_options.iou_thres, doc="NMS IoU threshold")
    nms_kind = property(lambda self: self.postprocess_options.nms_kind, doc="Darknet's NMS variant")
    beta_nms = property(lambda self: self.postprocess_options.beta_nms, doc="DIoU-NMS exponent")

    @property
    def settings(self) -> PostprocessOptions:
        """Deprecated name of :attr:`postprocess_options`."""
        warnings.warn("Detector.settings is now Detector.postprocess_options", DeprecationWarning, stacklevel=2)
        return self.postprocess_options

    @settings.setter
    def settings(self, value: PostprocessOptions) -> None:
        warnings.warn("Detector.settings is now Detector.postprocess_options", DeprecationWarning, stacklevel=2)
        self.postprocess_options = value

    def _load(self, images) -> List[np.ndarray]:
        if isinstance(images, (str, Path, np.ndarray)):
            images = [images]
        elif isinstance(images, (bytes, bytearray)) or not isinstance(images, Iterable):
            # bytes iterate as ints ("got int"), None not at all: say what is taken instead
            raise TypeError(f"Detector() takes {EXPECTED_IMAGES}, got {_kind(images)}")
        out = []
        for i, image in enumerate(images):
            if not isinstance(image, (str, Path, np.ndarray)):
                raise TypeError(f"Detector(): image {i}: expected {EXPECTED_IMAGE}, got {_kind(image)}")
            if isinstance(image, (str, Path)):
                out.append(load_image(image, decode=self.decode))
            else:
                out.append(as_bgr(image, where=f"image {i}"))
        return out

    @torch.inference_mode()
    def __call__(self, images: Union[ImageInput, Sequence[ImageInput]]) -> List[Dict]:
        """Detect objects; see the class docstring for the output format.

        ``self.timings`` then holds the call's seconds: ``preprocess`` (reading, fitting, upload), ``inference``
        (the model; on CUDA its time on the device, between two events) and ``postprocess`` (the rest)."""
        t0 = time.perf_counter()
        loaded = self._load(images)
        if not loaded:
            return []
        batch, infos = self.preprocess(loaded)
        t1 = time.perf_counter()
        if self.device.type != "cuda":
            predictions = self.forward(batch)
            t2 = time.perf_counter()
            results = self.postprocess(predictions, infos, [im.shape[:2] for im in loaded])
            t3 = time.perf_counter()
            self.timings = {"preprocess": t1 - t0, "inference": t2 - t1, "postprocess": t3 - t2}
            return results
        # On CUDA the host does not wait for the model: the post-processing queues behind it on the device, and
        # its one copy of the detections to the host is the batch's only wait. Events time the model.
        model_start, model_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.current_stream(self.device)  # the model's device, whichever is current
        model_start.record(stream)
        predictions = self.forward(batch)
        model_end.record(stream)
        results = self.postprocess(predictions, infos, [im.shape[:2] for im in loaded])
        model_end.synchronize()  # done already, unless nothing was copied (no detections at all)
        t3 = time.perf_counter()
        model = model_start.elapsed_time(model_end) / 1e3
        self.timings = {"preprocess": t1 - t0, "inference": model, "postprocess": max(0.0, t3 - t1 - model)}
        return results

    @torch.inference_mode()
    def preprocess(self, images: Sequence[np.ndarray]) -> Tuple[torch.Tensor, List[LetterboxInfo]]:
        """BGR ``uint8`` images -> ``(batch, infos)``: the network input ``Float[N, 3, h, w]`` (the model's
        dtype, channels-last, on its device) and each image's placement (on the CPU, or with torch ops on the
        device with ``device_preprocess``), resampled as ``self.resample`` says."""
        if self.device_preprocess:
            return preprocess_on_device(images, self.img_size, self.resize, self.device, self.dtype, self.staging,
                                        self.resample)
        return preprocess(images, self.img_size, self.resize, self.device, self.dtype, self.resample)

    @torch.inference_mode()
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        """The model on a prepared batch -> eval rows ``Float[N, B, 5+C]`` (``max_batch`` images per pass; a
        CUDA graph replay where one is captured)."""
        step = self.max_batch if self.max_batch > 0 else len(batch)
        if len(batch) <= step:
            return self._run_net(batch)
        return torch.cat([self._run_net(batch[i:i + step]) for i in range(0, len(batch), step)])

    def postprocess(self, predictions: torch.Tensor, infos: Sequence[LetterboxInfo],
                    shapes: Sequence[Tuple[int, int]]) -> List[Dict]:
        """Model output ``Float[N, B, 5+C]`` -> per-image detections in original pixels (CPU tensors), with the
        class ``names``: :func:`yolo.inference.postprocess.postprocess` (evaluation's path too) under this
        detector's :attr:`postprocess_options`.

        Thresholds and NMS run on the predictions' device for the whole batch; the final detections come to
        the CPU in one copy."""
        if not self._output_checked:  # once: the check waits for the device
            self._output_checked = True
            warn_if_not_finite(predictions, self.source)
        out = []
        for det in postprocess(predictions, self.postprocess_options, infos, shapes):
            names = [self.names[k] for k in det["labels"].tolist()]
            out.append({"boxes": det["boxes"], "scores": det["scores"], "labels": det["labels"], "names": names,
                        **({"box_sigmas": det["box_sigmas"]} if "box_sigmas" in det else {})})
        return out

    def track(self, frames: Iterable[ImageInput], tracker: str = "bytetrack", frame_rate: float = 30.0,
              batch_size: int = 1) -> Iterator[Dict]:
        """Detect and track over ``frames`` (paths or BGR ``uint8`` images, in order): yields one dict per frame,
        as :meth:`__call__`'s with ``track_ids`` ``Int64[K]`` (from 1; -1: not yet in a confirmed track).
        ``tracker``: ``"bytetrack"``, ``"botsort"`` or ``"ocsort"`` (:mod:`yolo.inference.tracking`; needs the
        ``trackers`` package)."""
        return track_frames(self, frames, tracker, frame_rate, batch_size)

    def tiled(self, overlap: float = 0.2, merge: str = "nms") -> TiledDetector:
        """This detector on overlapping slices of its input size plus the whole image, merged per class
        (:mod:`yolo.inference.tiling`): called as the Detector is, boxes in the original images' pixels."""
        return TiledDetector(self, overlap, merge)

    def __repr__(self) -> str:
        return (f"Detector(classes={self.num_classes}, img_size={self.img_size}, device={self.device}, "
                f"resize={self.resize!r}, conf_thres={self.conf_thres}, iou_thres={self.iou_thres})")


# help(Detector) and editors list every setting by name, from DetectorOptions.
with_settings_signature(Detector.__init__, DetectorOptions)
