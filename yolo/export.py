"""Export a :class:`yolo.model.Darknet` to ONNX, TorchScript or Darknet ``.weights``, and check each file.

Every exporter writes a file that gives the model's eval output, and every ``verify_*`` function runs
the written file in its own runtime (onnxruntime, ``torch.jit.load``, OpenCV DNN) on a real input and
returns the largest difference to the PyTorch model, raising :class:`ExportError` over the tolerance.

The difference is measured as in the OpenCV parity tests: boxes relative to the input size (and to
``max(1, |reference|)``), objectness and class probabilities absolutely. So a tolerance of ``1e-4`` means
at most 0.04 px at 416 and 1e-4 in any probability.

ONNX and TorchScript files hold the eval output ``Float[N, boxes, 5 + C]`` (cx, cy, w, h in input
pixels, objectness, class probabilities; see :class:`yolo.model.Darknet`). Both are traced: the
batch is always dynamic; the ONNX input size is dynamic with ``dynamic=True`` (the head grids are
computed from the traced sizes, and the verification runs a second size to prove it). With ``nms`` the
ONNX graph ends in a ``NonMaxSuppression`` and gives :class:`NMSOptions`-filtered detections instead.
"""
from __future__ import annotations

import copy
import json
import logging
import math
import re
import statistics
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
import torchvision

from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer
from yolo.models.heads import RegionLayer
from yolo.errors import ExportError

logger = logging.getLogger(__name__)

__all__ = [
    "ExportError",
    "NMSOptions",
    "DetectionsWithNMS",
    "TOLERANCE",
    "HALF_TOLERANCE",
    "DEFAULT_OPSET",
    "export_onnx",
    "export_torchscript",
    "export_darknet",
    "verify_onnx",
    "verify_torchscript",
    "verify_darknet",
    "sample_input",
    "second_size",
    "max_difference",
    "detections_difference",
    "split_detections",
    "onnxruntime_session",
    "onnxruntime_latency",
    "compare_latency",
]

TOLERANCE = 1e-4  # float32 export vs the PyTorch model (see the module docstring for the measure)
HALF_TOLERANCE = 1e-2  # float16 export vs the PyTorch model run in float16
DEFAULT_OPSET = 17
MIN_OPSET = 17
INPUT_NAME = "images"
OUTPUT_NAME = "output"
NMS_OUTPUT_NAMES = ("boxes", "scores", "labels", "batch_index")

Size = Tuple[int, int]
ArrayLike = Union[np.ndarray, torch.Tensor]


# ----------------------------------------------------------------------------------- inputs
def _as_size(img_size: Union[int, Sequence[int], None], model) -> Size:
    """``416`` / ``(h, w)`` / ``None`` (the cfg's [net] size) -> ``(h, w)``, checked against the stride."""
    if img_size is None:
        size = tuple(int(v) for v in model.input_size)
    elif isinstance(img_size, int):
        size = (img_size, img_size)
    else:
        size = tuple(int(v) for v in img_size)
    if len(size) != 2 or min(size) <= 0 or size[0] % model.stride or size[1] % model.stride:
        raise ValueError(f"image size {size} must be two positive multiples of the network stride {model.stride}")
    return size


def second_size(img_size: Size, stride: int) -> Size:
    """Another valid input size (both sides changed, non-square) to check a dynamic-size export."""
    h, w = img_size
    return (h - stride if h > 2 * stride else h + stride, w + stride)


def sample_input(img_size: Size, batch_size: int = 1, image: Union[str, Path, np.ndarray, None] = None,
                 channels: int = 3, seed: int = 0) -> torch.Tensor:
    """A real network input ``Float[batch_size, channels, h, w]`` (RGB 0..1, contiguous NCHW).

    With ``image`` (a path or a BGR ``uint8`` array) every item is that image, letterboxed as the
    :class:`yolo.detector.Detector` does, the second one mirrored. Without it the items are drawn
    shapes-dataset scenes (deterministic in ``seed``), so a check needs no file.
    """
    import cv2

    from yolo.inference.detector import load_image, preprocess

    if image is not None:
        base = load_image(image) if isinstance(image, (str, Path)) else image
        images = [base if i % 2 == 0 else np.ascontiguousarray(base[:, ::-1]) for i in range(batch_size)]
    else:
        from yolo.data.shapes import render_sample

        images = []
        for i in range(batch_size):
            rgb, _, _ = render_sample(np.random.default_rng([seed, 7, i]), size_range=(256, 480), max_shapes=4)
            images.append(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    batch, _ = preprocess(images, img_size, mode="letterbox")
    batch = batch.contiguous()
    if channels != 3:  # grayscale or other networks: repeat/trim the RGB planes
        batch = batch.mean(1, keepdim=True).expand(-1, channels, -1, -1).contiguous()
    return batch


# ---------------------------------------------------------------------------- differences
def _np(x: ArrayLike) -> np.ndarray:
    return x.detach().float().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float32)


def max_difference(ours: ArrayLike, ref: ArrayLike, input_hw: Optional[Size] = None) -> float:
    """Largest difference of an exported output ``ours`` to the PyTorch output ``ref``.

    For eval outputs ``[N, boxes, 5 + C]`` (``input_hw`` given): boxes divided by the input size, then
    ``|a - b| / max(1, |b|)``; objectness and class probabilities ``|a - b|``. Any other output
    (a classifier): ``|a - b| / max(1, |b|)``. Shapes must match.
    """
    a, b = _np(ours), _np(ref)
    if a.shape != b.shape:
        raise ExportError(f"output shape {a.shape} differs from the PyTorch model's {b.shape}")
    if a.size == 0:
        return 0.0
    if input_hw is None or a.ndim != 3 or a.shape[-1] < 6:
        return float((np.abs(a - b) / np.maximum(1.0, np.abs(b))).max())
    h, w = input_hw
    scale = np.array([w, h, w, h], dtype=np.float32)
    box = np.abs(a[..., :4] - b[..., :4]) / scale / np.maximum(1.0, np.abs(b[..., :4]) / scale)
    rest = np.abs(a[..., 4:] - b[..., 4:])
    return float(max(box.max(), rest.max()))


def split_detections(boxes: ArrayLike, scores: ArrayLike, labels: ArrayLike, batch_index: ArrayLike,
                     batch_size: int) -> List[Dict[str, torch.Tensor]]:
    """The NMS graph's flat outputs -> one dict per image (``boxes`` ``Float[K, 4]`` xyxy input pixels,
    ``scores`` ``Float[K]``, ``labels`` ``Int64[K]``), as :func:`yolo.ops.postprocess` returns."""
    boxes, scores = torch.as_tensor(boxes).float(), torch.as_tensor(scores).float()
    labels, batch_index = torch.as_tensor(labels).long(), torch.as_tensor(batch_index).long()
    out = []
    for i in range(batch_size):
        m = batch_index == i
        out.append({"boxes": boxes[m], "scores": scores[m], "labels": labels[m]})
    return out


def detections_difference(ours: Sequence[Dict[str, torch.Tensor]], ref: Sequence[Dict[str, torch.Tensor]],
                          input_hw: Size) -> float:
    """Largest difference between two detection lists (boxes relative to the input size, scores
    absolutely); ``inf`` when the number of detections or any label differs."""
    h, w = input_hw
    scale = torch.tensor([w, h, w, h], dtype=torch.float32)
    worst = 0.0
    for a, b in zip(ours, ref):
        if len(a["scores"]) != len(b["scores"]) or not torch.equal(a["labels"].cpu(), b["labels"].cpu()):
            return math.inf
        if len(a["scores"]):
            worst = max(worst, ((a["boxes"].float().cpu() - b["boxes"].float().cpu()).abs() / scale).max().item(),
                        (a["scores"].float().cpu() - b["scores"].float().cpu()).abs().max().item())
    return worst


def _check(name: str, diff: float, tol: float, noise: Optional[Callable[[], float]] = None) -> float:
    """Raise :class:`ExportError` when ``diff`` is over ``tol``.

    ``noise`` gives the model's own float32 rounding on this input (its difference to a float64 run).
    Deep networks, random weights above all, amplify rounding past 1e-4 on w/h; a file whose
    difference stays within three times that noise is as exact as the PyTorch model itself.
    """
    if diff > tol and noise is not None:
        own = noise()
        logger.info("%s: difference %.3g is over %g; the model's own float32 rounding here is %.3g",
                    name, diff, tol, own)
        tol = max(tol, 3.0 * own)
    if not diff <= tol:  # also catches NaN
        raise ExportError(f"{name}: largest difference to the PyTorch model {diff:.3g} is over the tolerance {tol:.3g}")
    logger.info("%s: largest difference to the PyTorch model %.3g (tolerance %.3g)", name, diff, tol)
    return diff


def _float32_noise(model, x: torch.Tensor, out32: torch.Tensor,
                   layout: Optional[Callable[[object, torch.Tensor], ArrayLike]] = None) -> float:
    """Difference between ``model``'s float32 output ``out32`` on ``x`` and a float64 run of a copy
    (both passed through ``layout(model, output)`` when given, else compared as eval outputs)."""
    exact = copy.deepcopy(model).cpu().double().eval()
    with torch.no_grad():
        out64 = exact(x.cpu().double())
    if layout is not None:
        return max_difference(layout(model, out32), layout(exact, out64.float()), (1, 1))
    return max_difference(out32, out64, tuple(x.shape[-2:]) if model.yolo_layers else None)


# --------------------------------------------------------------------------- export copies
class _Float32Head(nn.Module):
    """Runs a head in float32 inside a float16 network: the decode (grids, exp, pixel boxes) keeps
    full precision, and ONNX ``Range`` (the grid) has no float16 kernel."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head.float()

    def forward(self, x, input_hw):
        return self.head(x.float(), input_hw)


def _inference_copy(model, half: bool = False, fuse: bool = True):
    """A CPU eval copy of ``model`` for tracing: BatchNorm folded, optionally float16 with float32 heads."""
    net = copy.deepcopy(model).cpu().eval()
    for p in net.parameters():
        p.requires_grad_(False)
    if fuse:
        net.fuse()
    if half:
        net.half()
        for i, module in enumerate(net.module_list):
            if net._is_head[i]:
                net.module_list[i] = _Float32Head(module)
    return net


@contextmanager
def _quiet_tracing():
    """Silence the tracer's notes (constants such as the head strides are meant to be constant) and
    the deprecation notes of the tracing exporters."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*[Cc]onstant folding.*")
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        warnings.filterwarnings("ignore", message=".*will be removed.*")
        yield


def _has_gaussian_heads(model) -> bool:
    """Whether ``model`` has [Gaussian_yolo] heads, whose eval rows end with four box uncertainties."""
    return any(isinstance(h, GaussianYOLOLayer) for h in getattr(model, "yolo_layers", []))


def _metadata(model, img_size: Size, half: bool, names: Optional[Sequence[str]], **extra) -> Dict[str, str]:
    meta = {
        "format": "yolo-darknet-export/1",
        "img_size": json.dumps(list(img_size)),
        "stride": str(int(model.stride)),
        "num_classes": str(int(model.num_classes)),
        "output": "cx, cy, w, h (input pixels), objectness, class probabilities" + (
            ", sigma_tx, sigma_ty, sigma_tw, sigma_th" if _has_gaussian_heads(model) else ""),
        "half": str(bool(half)).lower(),
        "cfg": model.cfg_text,
    }
    if names is not None:
        meta["names"] = json.dumps(list(names))
    meta.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in extra.items()})
    return meta


class _Reference:
    """The PyTorch output an exported file must reproduce: ``model``'s eval output, or for a float16
    file the same model run in float16 (as exported: BN folded, float32 heads), since float16 itself
    moves probabilities by up to ~2e-2 from the float32 model on real inputs."""

    def __init__(self, model, half: bool):
        self.model = model.eval()
        self.half = half
        self.net = _inference_copy(model, half=True) if half else self.model
        self.dtype = torch.float16 if half else torch.float32
        self.np_dtype = np.float16 if half else np.float32
        self.tol = HALF_TOLERANCE if half else TOLERANCE
        self.detects = bool(model.yolo_layers)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        device = next(self.net.parameters()).device
        with torch.no_grad():
            return self.net(x.to(device, self.dtype)).float().cpu()

    def log_float32_gap(self, out, x: torch.Tensor) -> None:
        device = next(self.model.parameters()).device
        with torch.no_grad():
            full = self.model(x.to(device, torch.float32)).cpu()
        gap = max_difference(out, full, tuple(x.shape[-2:]) if self.detects else None)
        logger.info("  float16 file vs the float32 model: largest difference %.3g (information only)", gap)


# ------------------------------------------------------------------------------ NMS in graph
@dataclass(frozen=True)
class NMSOptions:
    """Post-processing baked into an ONNX graph, with :func:`yolo.ops.postprocess`'s meaning:
    best class per box, keep ``objectness * class_prob > conf_thres``, per-class NMS at ``iou_thres``,
    at most ``max_det`` detections per image, sorted by score."""

    conf_thres: float = 0.25
    iou_thres: float = 0.45
    max_det: int = 300

    def __post_init__(self):
        if not 0.0 <= self.conf_thres < 1.0:
            raise ValueError(f"conf_thres={self.conf_thres} must be in [0, 1)")
        if not 0.0 < self.iou_thres <= 1.0:
            raise ValueError(f"iou_thres={self.iou_thres} must be in (0, 1]")
        if self.max_det < 1:
            raise ValueError(f"max_det={self.max_det} must be positive")


class _NonMaxSuppression(torch.autograd.Function):
    """Class-agnostic NMS per image, exported as one ONNX ``NonMaxSuppression`` over the batch.

    ``boxes`` Float[N, B, 4] xyxy, ``scores`` Float[N, B] -> Int64[K, 3] rows (image, 0, box index):
    per image, boxes with score > ``conf`` in decreasing score order, at most ``max_det`` of them
    (ONNX's ``max_output_boxes_per_class`` with one class), exactly as onnxruntime orders them.
    """

    @staticmethod
    def forward(ctx, boxes, scores, iou: float, conf: float, max_det: int):
        rows = []
        for b in range(boxes.shape[0]):
            idx = (scores[b] > conf).nonzero().squeeze(1)
            keep = idx[torchvision.ops.nms(boxes[b, idx].float(), scores[b, idx].float(), iou)[:max_det]]
            rows.append(torch.stack((torch.full_like(keep, b), torch.zeros_like(keep), keep), 1))
        return torch.cat(rows) if rows else torch.zeros((0, 3), dtype=torch.int64)

    @staticmethod
    def symbolic(g, boxes, scores, iou: float, conf: float, max_det: int):
        scores = g.op("Unsqueeze", scores, g.op("Constant", value_t=torch.tensor([1], dtype=torch.int64)))
        return g.op("NonMaxSuppression", boxes, scores,
                    g.op("Constant", value_t=torch.tensor([max_det], dtype=torch.int64)),
                    g.op("Constant", value_t=torch.tensor([iou], dtype=torch.float32)),
                    g.op("Constant", value_t=torch.tensor([conf], dtype=torch.float32)))


class DetectionsWithNMS(nn.Module):
    """A model followed by :func:`yolo.ops.postprocess`'s filtering, in traceable form.

    Input Float[N, C, H, W]; outputs ``boxes`` Float[K, 4] (xyxy input pixels), ``scores`` Float[K],
    ``labels`` Int64[K] and ``batch_index`` Int64[K] (the image of each detection), grouped by image
    and sorted by score within each image. Per-class NMS runs as one class-agnostic NMS over boxes
    shifted apart by class (the coordinate trick of ``torchvision.ops.batched_nms``, with the same
    per-image shift, so rounding matches :func:`yolo.ops.postprocess`).
    """

    def __init__(self, model: nn.Module, options: NMSOptions = NMSOptions()):
        super().__init__()
        self.model = model
        self.options = options

    def forward(self, x):
        pred = self.model(x).float()
        cxcy, wh = pred[..., 0:2], pred[..., 2:4]
        boxes = torch.cat((cxcy - wh / 2, cxcy + wh / 2), -1)  # [N, B, 4]
        scores, labels = (pred[..., 5:] * pred[..., 4:5]).max(-1)  # [N, B]
        candidate = (scores > self.options.conf_thres).unsqueeze(-1)
        largest = torch.where(candidate, boxes, torch.zeros_like(boxes)).amax(dim=(1, 2), keepdim=True)
        shifted = boxes + labels.unsqueeze(-1).to(boxes.dtype) * (largest + 1)
        sel = _NonMaxSuppression.apply(shifted, scores, float(self.options.iou_thres),
                                       float(self.options.conf_thres), int(self.options.max_det))
        image, index = sel[:, 0], sel[:, 2]
        flat = image * boxes.shape[1] + index
        return (boxes.reshape(-1, 4)[flat], scores.reshape(-1)[flat], labels.reshape(-1)[flat], image)


# ---------------------------------------------------------------------------------- ONNX
def export_onnx(model, path: Union[str, Path], img_size: Union[int, Sequence[int], None] = None,
                dynamic: bool = False, half: bool = False, nms: Optional[NMSOptions] = None,
                opset: int = DEFAULT_OPSET, names: Optional[Sequence[str]] = None,
                example: Optional[torch.Tensor] = None) -> Path:
    """Write ``model`` as an ONNX file and return its path.

    Args:
        model: a :class:`yolo.model.Darknet` (not changed; a fused CPU copy is traced).
        img_size: input ``(h, w)`` or an int; default the cfg's [net] size.
        dynamic: also dynamic height and width (the batch is always dynamic).
        half: float16 weights and input; the heads decode in float32, so the output is float32.
        nms: bake post-processing in: outputs ``boxes, scores, labels, batch_index`` (see
            :class:`DetectionsWithNMS`) instead of ``output`` Float[N, boxes, 5 + C].
        opset: ONNX opset, at least 17.
        names: class names, stored in the file's metadata.
        example: the tracing input (default: a drawn scene at ``img_size``).

    Input ``images`` Float[N, 3, H, W] (RGB 0..1). Metadata (``metadata_props``) records the image size,
    stride, classes, names, NMS settings and the cfg text.
    """
    import onnx

    if opset < MIN_OPSET:
        raise ValueError(f"opset {opset} is too old: at least {MIN_OPSET} is needed")
    path = Path(path)
    size = _as_size(img_size, model)
    if nms is not None and not model.yolo_layers:
        raise ValueError("NMS needs a detection model; this cfg has no [yolo]/[region] head")
    if nms is not None and _has_gaussian_heads(model):
        raise ValueError("NMS in the graph is not available for [Gaussian_yolo] heads (their scores use the "
                         "box uncertainties): export without it and post-process with yolo.Detector")
    net = _inference_copy(model, half=half)
    if nms is not None:
        net = DetectionsWithNMS(net, nms)
    x = example if example is not None else sample_input(size, 1, channels=model.input_channels)
    x = x.to(torch.float16 if half else torch.float32)
    spatial = {2: "height", 3: "width"} if dynamic else {}
    if nms is None:
        outputs = [OUTPUT_NAME]
        axes = {INPUT_NAME: {0: "batch", **spatial}, OUTPUT_NAME: {0: "batch", 1: "boxes"} if dynamic else {0: "batch"}}
    else:
        outputs = list(NMS_OUTPUT_NAMES)
        axes = {INPUT_NAME: {0: "batch", **spatial}, **{name: {0: "detections"} for name in outputs}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with _quiet_tracing(), torch.no_grad():
            # The tracing exporter records the sizes the forward reads (grids, reshapes) as graph
            # values, so one trace serves every batch and (with ``dynamic``) every input size.
            torch.onnx.export(net, (x,), str(tmp), dynamo=False, opset_version=opset, input_names=[INPUT_NAME],
                              output_names=outputs, dynamic_axes=axes, do_constant_folding=True)
        proto = onnx.load(str(tmp))
        meta = _metadata(model, size, half, names, dynamic=str(bool(dynamic)).lower(),
                         nms=asdict(nms) if nms is not None else "none")
        if nms is not None:
            meta["output"] = ("boxes [K, 4] x1, y1, x2, y2 (input pixels), scores [K], labels [K], "
                              "batch_index [K] (image of each detection)")
        for key, value in meta.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, value
        onnx.checker.check_model(proto)
        onnx.save(proto, str(tmp))
        tmp.replace(path)
    except ExportError:
        raise
    except Exception as exc:
        raise ExportError(f"{path}: ONNX export failed: {str(exc).strip().splitlines()[0][:300]}") from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    logger.info("wrote %s (ONNX opset %d, %.1f MB)", path, opset, path.stat().st_size / 1e6)
    return path


def onnxruntime_session(path: Union[str, Path], threads: Optional[int] = None, spinning: bool = True):
    """An onnxruntime CPU session for ``path`` with ``threads`` intra-op threads (default: ORT's).

    ``spinning=False`` stops idle ORT threads from busy-waiting after each run, so that other
    runtimes timed in the same process get the cores.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _onnx_input_dtype(session) -> np.dtype:
    return np.float16 if session.get_inputs()[0].type == "tensor(float16)" else np.float32


def verify_onnx(path: Union[str, Path], model, inputs: Sequence[torch.Tensor], tol: Optional[float] = None,
                nms: Optional[NMSOptions] = None) -> float:
    """Run ``path`` in onnxruntime on each input ``Float[N, 3, H, W]`` and compare with ``model``'s
    eval output (or with :func:`yolo.ops.postprocess` of it when the file has ``nms``); returns the
    largest difference (see :func:`max_difference`, :func:`detections_difference`).

    A float16 file is compared with ``model`` run in float16 (its gap to the float32 model is logged).
    ``tol`` defaults to :data:`TOLERANCE` (:data:`HALF_TOLERANCE` for float16); over it raises
    :class:`ExportError`.
    """
    from yolo.ops import postprocess

    session = onnxruntime_session(path)
    half = _onnx_input_dtype(session) == np.float16
    reference = _Reference(model, half)
    tol = reference.tol if tol is None else tol
    worst = 0.0
    for x in inputs:
        ref = reference(x)
        outs = session.run(None, {session.get_inputs()[0].name: x.float().numpy().astype(reference.np_dtype)})
        hw = tuple(x.shape[-2:])
        if nms is None:
            diff = max_difference(outs[0], ref, hw if reference.detects else None)
        else:
            expected = postprocess(ref, nms.conf_thres, nms.iou_thres, max_det=nms.max_det)
            diff = detections_difference(split_detections(*outs, batch_size=x.shape[0]), expected, hw)
        noise = None if half or nms is not None else (lambda: _float32_noise(model, x, ref))
        _check(f"{Path(path).name} in onnxruntime, input {tuple(x.shape)}", diff, tol, noise)
        if half and nms is None:
            reference.log_float32_gap(outs[0], x)
        worst = max(worst, diff)
    return worst


# --------------------------------------------------------------------------- TorchScript
def export_torchscript(model, path: Union[str, Path], img_size: Union[int, Sequence[int], None] = None,
                       half: bool = False, names: Optional[Sequence[str]] = None,
                       example: Optional[torch.Tensor] = None) -> Path:
    """Write ``model`` as a traced TorchScript file (``torch.jit.load`` reads it) and return its path.

    The traced module takes Float[N, 3, H, W] (float16 with ``half``) and returns the eval output
    Float[N, boxes, 5 + C] (float32; heads decode in float32). Any batch works, and so do other sizes
    that are multiples of the stride (the grids follow the traced sizes). The metadata of
    :func:`export_onnx` is stored as the extra file ``meta.json``.
    """
    path = Path(path)
    size = _as_size(img_size, model)
    net = _inference_copy(model, half=half)
    x = example if example is not None else sample_input(size, 1, channels=model.input_channels)
    x = x.to(torch.float16 if half else torch.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with _quiet_tracing(), torch.no_grad():
            traced = torch.jit.trace(net, (x,), check_trace=False)
            extra = {"meta.json": json.dumps(_metadata(model, size, half, names))}
            torch.jit.save(traced, str(tmp), _extra_files=extra)
        tmp.replace(path)
    except Exception as exc:
        raise ExportError(f"{path}: TorchScript export failed: {str(exc).strip().splitlines()[0][:300]}") from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    logger.info("wrote %s (TorchScript, %.1f MB)", path, path.stat().st_size / 1e6)
    return path


def verify_torchscript(path: Union[str, Path], model, inputs: Sequence[torch.Tensor],
                       tol: Optional[float] = None) -> float:
    """``torch.jit.load`` the file, run it on each input and compare with ``model``'s eval output
    (float16 files: with ``model`` run in float16); returns the largest difference (over ``tol``,
    default :data:`TOLERANCE` or :data:`HALF_TOLERANCE`, raises :class:`ExportError`)."""
    with _quiet_tracing():
        loaded = torch.jit.load(str(path), map_location="cpu").eval()
    half = any(p.dtype == torch.float16 for p in loaded.parameters())
    reference = _Reference(model, half)
    tol = reference.tol if tol is None else tol
    worst = 0.0
    for x in inputs:
        ref = reference(x)
        with torch.no_grad():
            out = loaded(x.to(reference.dtype))
        diff = max_difference(out, ref, tuple(x.shape[-2:]) if reference.detects else None)
        noise = None if half else (lambda: _float32_noise(model, x, ref))
        _check(f"{Path(path).name} in torch.jit, input {tuple(x.shape)}", diff, tol, noise)
        if half:
            reference.log_float32_gap(out, x)
        worst = max(worst, diff)
    return worst


# -------------------------------------------------------------------------------- Darknet
def export_darknet(model, weights_path: Union[str, Path],
                   cfg_path: Union[str, Path, None] = None) -> Tuple[Path, Optional[Path]]:
    """Write ``model`` (e.g. trained, loaded from a ``.pt``) as Darknet ``.weights``, and with
    ``cfg_path`` its cfg text too, so the pair loads in Darknet and OpenCV. Returns both paths.

    The model must not be fused (Darknet stores BatchNorm separately).
    """
    from yolo.models.weights import save_darknet_weights

    weights_path = Path(weights_path)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    save_darknet_weights(model, weights_path)
    if cfg_path is not None:
        if not model.cfg_text.strip():
            raise ExportError(f"{cfg_path}: the model carries no cfg text to write")
        cfg_path = Path(cfg_path)
        tmp = cfg_path.with_name(f".{cfg_path.name}.tmp")
        tmp.write_text(model.cfg_text if model.cfg_text.endswith("\n") else model.cfg_text + "\n", encoding="utf-8")
        tmp.replace(cfg_path)
    logger.info("wrote %s (Darknet weights, %.1f MB)", weights_path, weights_path.stat().st_size / 1e6)
    return weights_path, cfg_path


def _cfg_for_raw_opencv_output(cfg_text: str) -> str:
    """The cfg with ``thresh=0`` and ``nms_threshold=0`` in every head: OpenCV then returns every
    decoded box instead of zeroing class scores under ``thresh`` (0.2 by default)."""
    text = re.sub(r"^\s*(thresh|nms_threshold)\s*=.*$", "", cfg_text, flags=re.M)
    return re.sub(r"^\s*\[(yolo|region)\]", r"[\1]\nthresh=0\nnms_threshold=0", text, flags=re.M)


def _opencv_layout(model, out: torch.Tensor, input_hw: Size) -> np.ndarray:
    """Our eval output Float[N, rows, 5+C] in OpenCV's layout: rows ordered (y, x, anchor) within each
    head instead of (anchor, y, x), boxes relative to the input, class scores times objectness."""
    out = out.detach().float().cpu().numpy()
    n = out.shape[0]
    in_h, in_w = input_hw
    parts, start = [], 0
    for head in model.yolo_layers:
        h, w = round(in_h / head.stride[0]), round(in_w / head.stride[1])
        count = head.num_anchors * h * w
        part = out[:, start:start + count].reshape(n, head.num_anchors, h, w, -1).transpose(0, 2, 3, 1, 4)
        parts.append(part.reshape(n, count, -1))
        start += count
    rows = np.concatenate(parts, 1)
    rows[..., 0:4] /= np.array([in_w, in_h, in_w, in_h], dtype=rows.dtype)
    rows[..., 5:] *= rows[..., 4:5]
    return rows


def verify_darknet(weights_path: Union[str, Path], cfg_path: Union[str, Path], model,
                   inputs: Sequence[torch.Tensor], tol: float = TOLERANCE, opencv: bool = True) -> float:
    """Check a written ``.weights``/``.cfg`` pair two ways and return the largest OpenCV difference.

    1. Our loader reads the file back into a fresh model: every tensor must equal ``model``'s bit for bit.
    2. OpenCV DNN (``cv2.dnn.readNetFromDarknet``) runs the pair on each input; its output must equal
       ``model``'s eval output in OpenCV's layout within ``tol``. OpenCV normalizes BatchNorm with
       eps 1e-6, so the comparison uses a copy of ``model`` with that epsilon. For ``[region]`` heads
       only boxes and objectness are compared (OpenCV applies its own NMS to their class scores).
    """
    from yolo.models.model import Darknet
    from yolo.models.weights import layer_tensors, load_darknet_weights

    weights_path, cfg_path = Path(weights_path), Path(cfg_path)
    fresh = Darknet(cfg_path)
    load_darknet_weights(fresh, weights_path)
    for (index, ours), (_, back) in zip(layer_tensors(model), layer_tensors(fresh)):
        for a, b in zip(ours, back):
            if not torch.equal(a.detach().cpu().float(), b):
                raise ExportError(f"{weights_path}: layer {index} reads back different from the model")
    logger.info("%s reads back bit-exact with our loader", weights_path.name)
    if not opencv:
        return 0.0

    import cv2

    if not hasattr(cv2, "dnn") or not hasattr(cv2.dnn, "readNetFromDarknet"):
        raise ExportError(f"OpenCV {cv2.__version__} has no Darknet importer: cannot check {weights_path} "
                          "(skip the check to export anyway)")
    reference = copy.deepcopy(model).cpu().float().eval()
    for m in reference.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eps = 1e-6
    region = any(isinstance(h, RegionLayer) for h in reference.yolo_layers)
    with tempfile.TemporaryDirectory() as tmp:
        cfg_raw = Path(tmp) / cfg_path.name
        cfg_raw.write_text(_cfg_for_raw_opencv_output(cfg_path.read_text(encoding="utf-8")), encoding="utf-8")
        net = cv2.dnn.readNetFromDarknet(str(cfg_raw), str(weights_path))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    columns = 5 if region else None
    worst = 0.0
    for x in inputs:
        x = x.float().contiguous()
        hw = tuple(x.shape[-2:])
        net.setInput(x.numpy())
        with torch.no_grad():
            out32 = reference(x)
        if reference.yolo_layers:
            def layout(net_model, out, hw=hw):  # OpenCV's row order, boxes relative to the input
                return _opencv_layout(net_model, out, hw)[..., :columns]

            outs = net.forward(net.getUnconnectedOutLayersNames())
            ref = np.concatenate([o.reshape(x.shape[0], -1, o.shape[-1]) for o in outs], 1)[..., :columns]
            diff = max_difference(layout(reference, out32), ref, (1, 1))
        else:
            layout = None
            diff = max_difference(out32.reshape(x.shape[0], -1), net.forward().reshape(x.shape[0], -1))
        noise = lambda: _float32_noise(reference, x, out32, layout)  # noqa: E731
        _check(f"{weights_path.name} in OpenCV DNN, input {tuple(x.shape)}", diff, tol, noise)
        worst = max(worst, diff)
    return worst


# ------------------------------------------------------------------------------- timing
def onnxruntime_latency(path: Union[str, Path], inputs: ArrayLike, runs: int = 20, warmup: int = 3,
                        threads: Optional[int] = None) -> Dict[str, float]:
    """Time one onnxruntime CPU session on ``inputs`` (Float[N, 3, H, W]).

    Returns ``{"median_ms", "min_ms", "mean_ms", "runs", "threads"}`` (per call, the whole batch).
    """
    session = onnxruntime_session(path, threads)
    feed = {session.get_inputs()[0].name: _np(inputs).astype(_onnx_input_dtype(session))}
    for _ in range(warmup):
        session.run(None, feed)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - t0)
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
            "mean_ms": statistics.fmean(times) * 1e3, "runs": runs,
            "threads": threads or session.get_session_options().intra_op_num_threads}


def compare_latency(model, onnx_path: Union[str, Path], inputs: torch.Tensor, runs: int = 20, warmup: int = 3,
                    threads: int = 2, darknet: Optional[Tuple[Union[str, Path], Union[str, Path]]] = None,
                    ) -> Dict[str, Dict[str, float]]:
    """Model-only latency in one process, interleaved round by round so that machine load
    hits every runtime alike: onnxruntime on ``onnx_path``; PyTorch on ``model`` in eval mode
    (``torch eval``) and as the Detector runs it (``torch prepared``: BN folded, channels-last, CPU
    kernels); and OpenCV DNN on ``darknet = (cfg, weights)`` when given. Every runtime uses ``threads``.

    Returns runtime name -> ``{"median_ms", "min_ms"}`` (the minimum is the steadier figure on a
    machine shared with other work).
    """
    import cv2

    torch_threads, cv2_threads = torch.get_num_threads(), cv2.getNumThreads()
    torch.set_num_threads(threads)
    cv2.setNumThreads(threads)
    try:
        return _interleaved_latency(model, onnx_path, inputs, runs, warmup, threads, darknet)
    finally:
        torch.set_num_threads(torch_threads)
        cv2.setNumThreads(cv2_threads)


def _interleaved_latency(model, onnx_path, inputs, runs, warmup, threads, darknet):
    import cv2

    from yolo.inference.detector import prepare_for_inference

    x = inputs.float().contiguous()
    session = onnxruntime_session(onnx_path, threads, spinning=False)
    feed = {session.get_inputs()[0].name: x.numpy().astype(_onnx_input_dtype(session))}
    plain = copy.deepcopy(model).cpu().float().eval()
    prepared = prepare_for_inference(plain, "cpu", example_hw=tuple(x.shape[-2:]))
    x_cl = x.contiguous(memory_format=torch.channels_last)

    def run_torch(net, inp):
        with torch.inference_mode():
            net(inp)

    tasks: Dict[str, Callable[[], object]] = {
        "onnxruntime": lambda: session.run(None, feed),
        "torch eval": lambda: run_torch(plain, x),
        "torch prepared": lambda: run_torch(prepared, x_cl),
    }
    if darknet is not None:
        cfg, weights = darknet
        net = cv2.dnn.readNetFromDarknet(str(cfg), str(weights))
        net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        names = net.getUnconnectedOutLayersNames()
        blob = x.numpy()

        def run_opencv():
            net.setInput(blob)
            return net.forward(names)

        tasks["opencv dnn"] = run_opencv
    for _ in range(warmup):
        for fn in tasks.values():
            fn()
    times: Dict[str, List[float]] = {name: [] for name in tasks}
    order = list(tasks)
    for i in range(runs):
        for name in order[i % len(order):] + order[:i % len(order)]:
            t0 = time.perf_counter()
            tasks[name]()
            times[name].append(time.perf_counter() - t0)
    return {name: {"median_ms": statistics.median(t) * 1e3, "min_ms": min(t) * 1e3} for name, t in times.items()}
