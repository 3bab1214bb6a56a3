"""``Detector``: images in, detections in original-image pixels out.

Pipeline: BGR ``uint8`` image -> resize (``letterbox`` or ``stretch``: by default the cfg's choice, as
Darknet's ``letter_box``) on ``uint8`` -> one conversion to RGB float 0..1 -> model (eval decode)
-> :func:`yolo.ops.postprocess` -> boxes mapped back to the original image and clipped.

For speed the model is prepared for inference once (:func:`prepare_for_inference`): BatchNorm folded
into the convs, channels-last memory, and on the CPU each conv replaced by a oneDNN kernel with its
weights reordered once and the activation fused (:class:`FusedConvCPU`), or, for 3x3 stride-1 convs
with many channels, by a Winograd convolution (:class:`WinogradConv3x3`), which needs about 2-3x fewer
multiplications; 2x2 max-pools on channels-last maps use two elementwise maxima. On the CPU a batch
runs one image per forward pass (activations stay in the caches). On CUDA: fused convs, channels-last,
optional fp16. ``torch.compile`` is optional everywhere. All of it keeps outputs equal to the plain
eval model to float tolerance (checked in ``tests/test_detector.py``).
"""
from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer, postprocess_gaussian
from yolo.ops import LetterboxInfo, letterbox_params, nms_settings, postprocess, scale_boxes_to_original
from yolo.device import parse_device
from yolo.errors import ImageReadError
from yolo.files.names import read_names

logger = logging.getLogger(__name__)

__all__ = [
    "Detector",
    "ImageReadError",
    "load_image",
    "preprocess",
    "prepare_for_inference",
    "FusedConvCPU",
    "WinogradConv3x3",
]

ImageInput = Union[str, Path, np.ndarray]
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pbm", ".jp2")


def load_image(path: Union[str, Path]) -> np.ndarray:
    """Read an image file as BGR ``uint8`` ``H x W x 3``; raises :class:`ImageReadError` naming the path."""
    path = Path(path)
    try:
        data = np.fromfile(str(path), dtype=np.uint8)  # works for any file name, unlike cv2.imread
    except OSError as exc:
        raise ImageReadError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise ImageReadError(f"{path}: not a readable image (corrupt or unsupported format)")
    return image


def _as_bgr(image: np.ndarray, where: str = "image") -> np.ndarray:
    """Check an in-memory image: ``H x W x 3`` BGR ``uint8`` (gray ``H x W`` and BGRA accepted)."""
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{where}: expected a path or a numpy array, got {type(image).__name__}")
    if image.ndim == 2:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    elif image.ndim == 3 and image.shape[2] == 4:
        image = cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] == 0 or image.shape[1] == 0:
        raise ValueError(f"{where}: expected an H x W x 3 BGR image, got shape {image.shape}")
    if image.dtype != np.uint8:
        raise ValueError(f"{where}: expected uint8 pixels, got {image.dtype}")
    return image


# ---------------------------------------------------------------------------------- pre-process
def preprocess(
    images: Sequence[np.ndarray],
    img_size: Tuple[int, int],
    mode: str = "letterbox",
    device: Union[str, torch.device] = "cpu",
    dtype: torch.dtype = torch.float32,
) -> Tuple[torch.Tensor, List[LetterboxInfo]]:
    """BGR ``uint8`` images -> network input batch and the placement of each image.

    Each image is resized on ``uint8`` with ``cv2.resize`` (bilinear), then converted once to RGB
    float 0..1. ``letterbox`` keeps the aspect ratio and fills the border with exactly 0.5 (Darknet);
    ``stretch`` resizes to the input size (``cv2.dnn.blobFromImage(img, 1/255, (w, h), swapRB=True)``).

    Returns:
        ``(batch, infos)``: ``batch`` is ``Float[N, 3, h, w]`` in channels-last memory on ``device``;
        ``infos[i]`` maps boxes of image ``i`` back (:func:`yolo.ops.scale_boxes_to_original`).
    """
    net_h, net_w = img_size
    n = len(images)
    batch = torch.empty((n, net_h, net_w, 3), dtype=dtype, device=device)  # NHWC storage
    infos = []
    for i, image in enumerate(images):
        h, w = image.shape[:2]
        if mode == "letterbox":
            (rh, rw), (px, py) = letterbox_params((h, w), (net_h, net_w))
            info = LetterboxInfo(scale_x=rw / w, scale_y=rh / h, pad_x=float(px), pad_y=float(py))
        elif mode == "stretch":
            (rh, rw), (px, py) = (net_h, net_w), (0, 0)
            info = LetterboxInfo(scale_x=net_w / w, scale_y=net_h / h)
        else:
            raise ValueError(f"unknown resize mode {mode!r}: use 'letterbox' or 'stretch'")
        resized = image if (rh, rw) == (h, w) else cv2.resize(image, (rw, rh), interpolation=cv2.INTER_LINEAR)
        pixels = torch.from_numpy(cv2.cvtColor(resized, cv2.COLOR_BGR2RGB)).to(device, non_blocking=True)
        if (rh, rw) != (net_h, net_w):
            batch[i].fill_(0.5)
        torch.div(pixels, 255.0, out=batch[i, py:py + rh, px:px + rw])  # the one uint8 -> float conversion
        infos.append(info)
    return batch.permute(0, 3, 1, 2), infos


# ------------------------------------------------------------------------ fast CPU convolutions
# Activations that oneDNN can apply inside the conv kernel: Darknet name -> (oneDNN attr, scalars).
_ONEDNN_ACTIVATIONS = {
    "linear": ("none", []),
    "leaky": ("leaky_relu", [0.1]),
    "relu": ("relu", []),
    "logistic": ("sigmoid", []),
    "swish": ("swish", []),
    "tanh": ("tanh", []),
}


def _onednn_conv_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_convolution_pointwise")


class FusedConvCPU(nn.Module):
    """A fused (BN-folded) conv run by oneDNN with weights reordered once and the activation fused.

    Input/output ``Float[N, C, H, W]`` in channels-last memory (float32, CPU). Gives the same result
    as ``act(conv(x))`` to float rounding.
    """

    def __init__(self, conv: nn.Conv2d, activation: str, act_module: nn.Module, example_shape: Sequence[int]):
        super().__init__()
        self.padding = list(conv.padding)
        self.stride = list(conv.stride)
        self.dilation = list(conv.dilation)
        self.groups = conv.groups
        attr, scalars = _ONEDNN_ACTIVATIONS.get(activation, ("none", []))
        self.attr, self.scalars = attr, scalars
        # Activations oneDNN cannot fuse (mish, ...) run after the kernel.
        self.post_act = act_module if activation not in _ONEDNN_ACTIVATIONS else None
        weight = conv.weight.detach().float().contiguous()
        self.register_buffer("weight", torch.ops.mkldnn._reorder_convolution_weight(
            weight, self.padding, self.stride, self.dilation, self.groups, list(example_shape)), persistent=False)
        bias = conv.bias.detach().float() if conv.bias is not None else None
        self.register_buffer("bias", bias, persistent=False)

    def forward(self, x):
        y = torch.ops.mkldnn._convolution_pointwise(
            x.contiguous(memory_format=torch.channels_last), self.weight, self.bias, self.padding, self.stride,
            self.dilation, self.groups, self.attr, self.scalars, "")
        return self.post_act(y) if self.post_act is not None else y


def _winograd_matrices(m: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Transform matrices ``(A^T [m, n], G [n, 3], B^T [n, n])`` of Winograd F(m, 3), ``n = m + 2``.

    Built by Toom-Cook on the points 0, +-1, +-2, +-1/2, ... and infinity; ``B^T`` is solved from the
    identity ``sum_j A^T[i,j] G[j,k] B^T[j,l] = [l == i + k]`` (1-D correlation), which is checked.
    """
    r, n = 3, m + 2
    points = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5][: n - 1]
    a = np.array(points, dtype=np.float64)
    at = np.zeros((m, n))
    g = np.zeros((n, r))
    for j in range(n - 1):
        at[:, j] = a[j] ** np.arange(m)
        g[j] = a[j] ** np.arange(r) / np.prod([a[j] - a[k] for k in range(n - 1) if k != j])
    at[m - 1, n - 1] = 1.0  # the point at infinity
    g[n - 1, r - 1] = 1.0
    rows = np.array([at[i] * g[:, k] for i in range(m) for k in range(r)])
    rhs = np.array([np.eye(n)[i + k] for i in range(m) for k in range(r)])
    bt = np.linalg.lstsq(rows, rhs, rcond=None)[0]
    if np.abs(rows @ bt - rhs).max() > 1e-9:
        raise RuntimeError(f"Winograd F({m},3) transform is inconsistent")
    return at, g, bt


class WinogradConv3x3(nn.Module):
    """3x3, stride 1, padding 1 convolution by Winograd F(m x m, 3 x 3), plus bias and activation.

    The input is cut into overlapping ``(m+2) x (m+2)`` tiles; tiles and filters are transformed so that
    the convolution becomes ``(m+2)^2`` independent products ``[tiles, C] @ [C, K]``: ``(m+2)^2``
    multiplications per tile and channel pair instead of ``9 m^2``. Those products run as one grouped
    1x1 convolution in oneDNN (one group per transform point), with the bias folded in. Input and
    output ``Float[N, C, H, W]`` channels-last, CPU float32; agrees with ``F.conv2d`` to about 1e-5
    relative for F(2,3), F(3,3) and F(4,3).
    """

    def __init__(self, conv: nn.Conv2d, activation: str, act_module: nn.Module, m: int = 4,
                 example_shape: Optional[Sequence[int]] = None):
        super().__init__()
        if conv.kernel_size != (3, 3) or conv.stride != (1, 1) or conv.padding != (1, 1) or conv.groups != 1 \
                or conv.dilation != (1, 1):
            raise ValueError("WinogradConv3x3 needs a 3x3 conv with stride 1, padding 1, groups 1")
        at, g, bt = _winograd_matrices(m)
        n = m + 2
        self.m, self.n = m, n
        self.activation = activation
        self.act = act_module
        weight = conv.weight.detach().double()  # [K, C, 3, 3]
        k, c = weight.shape[:2]
        self.in_channels, self.out_channels = c, k
        u = torch.from_numpy(np.kron(g, g)) @ weight.reshape(k * c, 9).T  # [n2, K*C]
        # Grouped 1x1 conv weight: group q (a transform point) maps C -> K channels.
        gemm_weight = u.reshape(n * n * k, c, 1, 1).float().contiguous()
        # Bias through the GEMM: any e with A^T e = 1 spreads it so every output gets it exactly once.
        e = np.linalg.lstsq(at, np.ones(m), rcond=None)[0]
        bias = conv.bias.detach().double() if conv.bias is not None else torch.zeros(k, dtype=torch.float64)
        self.register_buffer("gemm_bias", (torch.from_numpy(np.kron(e, e))[:, None] * bias[None]).reshape(-1).float(),
                             persistent=False)
        self.register_buffer("bt2", torch.from_numpy(np.kron(bt, bt)).float(), persistent=False)  # [n2, n2]
        self.register_buffer("at2", torch.from_numpy(np.kron(at, at)).float(), persistent=False)  # [m2, n2]
        h, w = (example_shape[-2], example_shape[-1]) if example_shape is not None else (13, 13)
        self.register_buffer("gemm_weight", torch.ops.mkldnn._reorder_convolution_weight(
            gemm_weight, [0, 0], [1, 1], [1, 1], n * n, [1, n * n * c, -(-h // m), -(-w // m)]), persistent=False)

    def forward(self, x):
        n_img, c, h, w = x.shape
        m, n, k = self.m, self.n, self.out_channels
        th, tw = -(-h // m), -(-w // m)
        p = n_img * th * tw
        # NHWC with a 1-pixel zero border (plus the bottom/right rows the last tiles need).
        xp = F.pad(x.permute(0, 2, 3, 1), (0, 0, 1, tw * m + 1 - w, 1, th * m + 1 - h)).contiguous()
        s_n, s_h, s_w, s_c = xp.stride()
        tiles = xp.as_strided((n_img, th, tw, n, n, c), (s_n, s_h * m, s_w * m, s_h, s_w, s_c)).reshape(p, n * n, c)
        v = torch.matmul(self.bt2, tiles)  # [P, n2, C]
        # As N images of th x tw tiles with n2*C channels (channels-last), point q's channels form group q.
        prod = torch.ops.mkldnn._convolution_pointwise(
            v.view(n_img, th, tw, n * n * c).permute(0, 3, 1, 2), self.gemm_weight, self.gemm_bias, [0, 0],
            [1, 1], [1, 1], n * n, "none", [], "")
        y = torch.matmul(self.at2, prod.permute(0, 2, 3, 1).reshape(p, n * n, k))  # [P, m2, K]
        y = F.leaky_relu_(y, 0.1) if self.activation == "leaky" else self.act(y)
        out = torch.empty((n_img, th, m, tw, m, k), dtype=y.dtype, device=y.device)
        out.copy_(y.view(n_img, th, tw, m, m, k).permute(0, 1, 3, 2, 4, 5))  # tiles back to an image
        out = out.view(n_img, th * m, tw * m, k)
        if th * m != h or tw * m != w:
            out = out[:, :h, :w].contiguous()
        return out.permute(0, 3, 1, 2)  # channels-last NCHW view


def _winograd_tile(h: int, w: int, c_in: int, c_out: int) -> int:
    """Winograd tile size for a 3x3 conv on an ``h x w`` map, or 0 when the direct kernel is faster.

    Winograd pays off once the channel products dominate its transforms: from 64 channels in and out
    (measured with AVX-512 on 2 threads: 1.2x at 64 channels, about 2x from 128). Its transformed
    weights are 3-4x larger, so on small maps, where reading the weights dominates, the direct kernel wins.
    """
    if c_in < 64 or c_out < 64 or min(h, w) < 12:
        return 0

    def padded_area(m: int) -> int:
        return -(-h // m) * m * -(-w // m) * m

    # 4x4 tiles need fewer products per output; 3x3 tiles win when they waste less padding (13, 26).
    return 3 if padded_area(3) < padded_area(4) else 4


class _FastMaxPool(nn.Module):
    """Darknet maxpool (see :class:`yolo.layers.MaxPool`) without padding copies where they change nothing."""

    def __init__(self, pool: nn.Module):
        super().__init__()
        self.size, self.stride, self.padding = pool.size, pool.stride, pool.padding
        self.pad_before = pool.padding // 2
        self.pad_after = pool.padding - self.pad_before
        self.reference = pool

    def forward(self, x):
        n, c, h, w = x.shape
        k, s, p = self.size, self.stride, self.padding
        if k == 2 and s == 2 and self.pad_before == 0 and h % 2 == 0 and w % 2 == 0 \
                and x.is_contiguous(memory_format=torch.channels_last):
            # 2x2/2 on channels-last: two elementwise maxima over views, faster than max_pool2d here.
            v = x.permute(0, 2, 3, 1).reshape(n, h // 2, 2, w // 2, 2 * c)
            rows = torch.maximum(v[:, :, 0], v[:, :, 1]).view(n, h // 2, w // 2, 2, c)
            return torch.maximum(rows[..., 0, :], rows[..., 1, :]).permute(0, 3, 1, 2)
        if self.pad_before == 0 and (h + p - k) // s == (h - k) // s and (w + p - k) // s == (w - k) // s:
            # The padded cells lie in no window: plain pooling gives the same windows.
            return F.max_pool2d(x, k, s)
        if self.pad_before <= k - 1 and self.pad_after <= k - 1:
            # Every window keeps at least one real cell next to the padding: repeating the edge
            # equals ignoring out-of-range cells.
            x = F.pad(x, (self.pad_before, self.pad_after, self.pad_before, self.pad_after), mode="replicate")
            return F.max_pool2d(x, k, s)
        return self.reference(x)


def _is_winograd_shape(conv: nn.Conv2d) -> bool:
    return conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (1, 1) \
        and conv.groups == 1 and conv.dilation == (1, 1)


def _swap_modules_for_cpu(model: nn.Module, example_hw: Tuple[int, int], winograd: bool = True) -> nn.Module:
    """Replace convs and maxpools in ``model.module_list`` by the fast CPU kernels (in place).

    A layer whose fast kernel cannot be built keeps its original module (logged at DEBUG).
    """
    from yolo.models.layers import ConvBNAct, MaxPool

    if not _onednn_conv_available():
        logger.debug("oneDNN convolutions are not available: keeping the PyTorch convs")
        winograd = False
    # Shapes of every layer's input at ``example_hw``: needed to choose kernels and reorder weights.
    shapes: Dict[int, Tuple[int, ...]] = {}
    hooks = [mod.register_forward_pre_hook(lambda mod, args, i=i: shapes.__setitem__(i, tuple(args[0].shape)))
             for i, mod in enumerate(model.module_list) if isinstance(mod, (ConvBNAct, MaxPool))]
    try:
        with torch.inference_mode():
            model(torch.zeros(1, getattr(model, "input_channels", 3), *example_hw))
    finally:
        for hook in hooks:
            hook.remove()
    for i, module in enumerate(model.module_list):
        if i not in shapes:
            continue
        if isinstance(module, MaxPool):
            model.module_list[i] = _FastMaxPool(module)
            continue
        conv, shape = module.conv, shapes[i]
        try:
            tile = _winograd_tile(shape[2], shape[3], conv.in_channels, conv.out_channels) \
                if winograd and _is_winograd_shape(conv) else 0
            if tile:
                model.module_list[i] = WinogradConv3x3(conv, module.activation, module.act, m=tile, example_shape=shape)
            elif _onednn_conv_available():
                model.module_list[i] = FusedConvCPU(conv, module.activation, module.act, (1, *shape[1:]))
        except RuntimeError as exc:  # an unusual conv oneDNN refuses: the plain module still works
            logger.debug("layer %d keeps its PyTorch conv: %s", i, exc)
    return model


def prepare_for_inference(
    model: nn.Module,
    device: Union[str, torch.device] = "cpu",
    half: bool = False,
    channels_last: bool = True,
    fast_cpu_kernels: bool = True,
    compile: bool = False,
    example_hw: Optional[Tuple[int, int]] = None,
) -> nn.Module:
    """A copy of a :class:`yolo.model.Darknet` made for fast eval: BN folded, channels-last, and on the
    CPU oneDNN/Winograd kernels (``fast_cpu_kernels``); on CUDA optionally fp16 (``half``).
    With ``compile``, ``torch.compile`` wraps the result. Outputs equal the model's eval outputs to
    float tolerance (fp16: to half-precision tolerance). The original model is not changed.
    """
    device = torch.device(device)
    model = copy.deepcopy(model).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    model.fuse()
    model.to(device)
    if device.type == "cuda" and half:
        model.half()
    if channels_last:
        model.to(memory_format=torch.channels_last)
    if device.type == "cpu" and fast_cpu_kernels and not half:
        example_hw = example_hw or tuple(model.input_size)
        _swap_modules_for_cpu(model, example_hw)
        with torch.inference_mode():  # first call creates oneDNN kernels: do it now, not on the first image
            model(torch.zeros(1, getattr(model, "input_channels", 3), *example_hw).contiguous(
                memory_format=torch.channels_last))
    if compile:
        model = torch.compile(model, dynamic=False)
    return model


def cfg_resize_mode(model) -> str:
    """The pre-processing Darknet's ``detector test``/``detector map`` apply for ``model``'s cfg:
    ``"letterbox"`` when its ``[net]`` sets ``letter_box`` (non-zero), else ``"stretch"``."""
    net = getattr(model, "net", None)
    return "letterbox" if net is not None and net.get_int("letter_box", 0) else "stretch"


# ------------------------------------------------------------------------------------ detector
class Detector:
    """Run a Darknet detector on images.

    Args:
        cfg: Darknet ``.cfg`` path (may be ``None`` with a ``.pt`` that carries its cfg).
        weights: Darknet ``.weights`` or a ``.pt`` checkpoint.
        names: class names (a ``.names`` file or a sequence); default ``"0", "1", ...``
            (or the names stored in a ``.pt`` checkpoint).
        device: ``"cpu"``, ``"cuda"``, ...; default CUDA when available.
        img_size: network input, an int (square) or ``(h, w)``; multiples of the network stride. Default 416, or
            the cfg's [net] size for a network whose weights are tied to it (YOLOv1's [connected]).
        conf_thres, iou_thres: score threshold (objectness x class probability) and NMS IoU.
        resize: ``"letterbox"`` (Darknet's ``letterbox_image``) or ``"stretch"`` (Darknet's ``resize_image``,
            as OpenCV ``blobFromImage``); default: the cfg's, as Darknet (``letter_box=1`` in ``[net]``
            letterboxes, else stretch; :func:`cfg_resize_mode`).
        half: fp16 on CUDA (ignored on the CPU).
        classes: keep only these class indices. agnostic: class-agnostic NMS.
        multi_label: every class above the threshold per box (for evaluation).
        max_det: most detections per image.
        fast: prepare the model for inference (fusion, channels-last, CPU kernels); ``False`` runs the
            plain eval model. compile: ``torch.compile`` the prepared model.
        max_batch: most images per forward pass (default: 1 on the CPU, where that is fastest because
            activations stay in the caches; all at once on CUDA).
        nms_kind, beta_nms: Darknet's NMS variant (:func:`yolo.ops.nms`); default: the cfg's own, from
            its last ``[yolo]`` section (``nms_kind``, ``beta_nms``), as Darknet does.

    ``detector(images)`` takes a path, a BGR ``uint8`` image, or a list of them, and returns one dict
    per image: ``boxes`` ``Float[K, 4]`` xyxy original-image pixels, ``scores`` ``Float[K]``,
    ``labels`` ``Int64[K]`` and ``names`` (``list[str]``, one per box); empty tensors when nothing is found.
    With ``[Gaussian_yolo]`` heads each dict also has ``box_sigmas`` ``Float[K, 4]`` (the uncertainties of
    tx, ty, tw, th), and scores follow Darknet's rule for them
    (:func:`yolo.layer_types.gaussian_yolo.postprocess_gaussian`).
    """

    def __init__(
        self,
        cfg: Union[str, Path, None],
        weights: Union[str, Path, None],
        names: Union[str, Path, Sequence[str], None] = None,
        device: Union[str, torch.device, None] = None,
        img_size: Union[int, Tuple[int, int], None] = None,
        conf_thres: float = 0.25,
        iou_thres: float = 0.45,
        resize: Optional[str] = None,
        half: bool = False,
        classes: Optional[Sequence[int]] = None,
        agnostic: bool = False,
        multi_label: bool = False,
        max_det: int = 300,
        fast: bool = True,
        compile: bool = False,
        max_batch: Optional[int] = None,
        nms_kind: Optional[str] = None,
        beta_nms: Optional[float] = None,
    ):
        from yolo.models.model import load_model

        if resize not in ("letterbox", "stretch", None):
            raise ValueError(f"unknown resize mode {resize!r}: use 'letterbox' or 'stretch'")
        self.device = parse_device(device)
        self.half = bool(half) and self.device.type == "cuda"
        self.model = load_model(cfg, weights, device="cpu").eval()
        if getattr(self.model, "input_channels", 3) != 3 or not self.model.yolo_layers:
            raise ValueError(f"{cfg or weights}: not a detector on 3-channel images (channels="
                             f"{getattr(self.model, 'input_channels', 3)}, heads={len(self.model.yolo_layers)})")
        if img_size is None:  # a network tied to its cfg's size (YOLOv1's [connected]) runs at that size
            img_size = tuple(self.model.input_size) if getattr(self.model, "size_fixed_by", None) else 416
        self.img_size = (img_size, img_size) if isinstance(img_size, int) else tuple(int(v) for v in img_size)
        stride = int(getattr(self.model, "stride", 32))
        if self.img_size[0] % stride or self.img_size[1] % stride or min(self.img_size) <= 0:
            raise ValueError(f"img_size {self.img_size} must be positive multiples of the network stride {stride}")
        if hasattr(self.model, "check_input_size"):
            self.model.check_input_size(self.img_size, "img_size")
        self.num_classes = int(self.model.num_classes)
        self.gaussian = any(isinstance(h, GaussianYOLOLayer) for h in self.model.yolo_layers)
        self.names = self._resolve_names(names, weights)
        self.conf_thres, self.iou_thres = float(conf_thres), float(iou_thres)
        self.resize = resize if resize is not None else cfg_resize_mode(self.model)
        self.classes = list(classes) if classes is not None else None
        self.agnostic, self.multi_label, self.max_det = agnostic, multi_label, int(max_det)
        cfg_kind, cfg_beta = nms_settings(getattr(self.model, "sections", ()))
        self.nms_kind = nms_kind if nms_kind is not None else cfg_kind
        self.beta_nms = float(beta_nms) if beta_nms is not None else cfg_beta
        if fast:
            self.net = prepare_for_inference(self.model, self.device, half=self.half, compile=compile,
                                             example_hw=self.img_size)
        else:
            self.net = self.model.to(self.device)
        self.dtype = torch.float16 if self.half else torch.float32
        # On the CPU one image per forward pass is fastest: its activations stay in the caches.
        self.max_batch = max_batch if max_batch is not None else (1 if self.device.type == "cpu" else 0)
        self.timings: Dict[str, float] = {}

    def _resolve_names(self, names, weights) -> List[str]:
        if names is None and weights is not None and Path(weights).suffix in (".pt", ".pth"):
            from yolo.models.checkpoint import load_checkpoint_file
            names = load_checkpoint_file(weights).get("names")
        if names is None:
            return [str(i) for i in range(self.num_classes)]
        if isinstance(names, (str, Path)):
            names = read_names(names)
        names = [str(n) for n in names]
        if len(names) != self.num_classes:
            raise ValueError(f"{len(names)} class names given but the model has {self.num_classes} classes")
        return names

    @staticmethod
    def _load(images) -> List[np.ndarray]:
        if isinstance(images, (str, Path, np.ndarray)):
            images = [images]
        out = []
        for i, image in enumerate(images):
            if isinstance(image, (str, Path)):
                out.append(load_image(image))
            else:
                out.append(_as_bgr(image, where=f"image {i}"))
        return out

    @torch.inference_mode()
    def __call__(self, images: Union[ImageInput, Sequence[ImageInput]]) -> List[Dict]:
        """Detect objects; see the class docstring for the output format."""
        t0 = time.perf_counter()
        loaded = self._load(images)
        if not loaded:
            return []
        batch, infos = preprocess(loaded, self.img_size, self.resize, self.device, self.dtype)
        t1 = time.perf_counter()
        step = self.max_batch if self.max_batch > 0 else len(batch)
        predictions = torch.cat([self.net(batch[i:i + step]) for i in range(0, len(batch), step)]) \
            if len(batch) > step else self.net(batch)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t2 = time.perf_counter()
        results = self.postprocess(predictions, infos, [im.shape[:2] for im in loaded])
        t3 = time.perf_counter()
        self.timings = {"preprocess": t1 - t0, "inference": t2 - t1, "postprocess": t3 - t2}
        return results

    def postprocess(self, predictions: torch.Tensor, infos: Sequence[LetterboxInfo],
                    shapes: Sequence[Tuple[int, int]]) -> List[Dict]:
        """Model output ``Float[N, B, 5+C]`` -> per-image detections in original pixels (CPU tensors)."""
        select = postprocess_gaussian if self.gaussian else postprocess
        dets = select(predictions.float(), conf_thres=self.conf_thres, iou_thres=self.iou_thres, classes=self.classes,
                      agnostic=self.agnostic, multi_label=self.multi_label, max_det=self.max_det,
                      nms_kind=self.nms_kind, beta_nms=self.beta_nms)
        out = []
        for det, info, shape in zip(dets, infos, shapes):
            boxes = scale_boxes_to_original(det["boxes"], info, shape).cpu()
            labels = det["labels"].cpu()
            out.append({"boxes": boxes, "scores": det["scores"].cpu(), "labels": labels,
                        "names": [self.names[int(k)] for k in labels]})
            if "box_sigmas" in det:
                out[-1]["box_sigmas"] = det["box_sigmas"].cpu()
        return out

    def __repr__(self) -> str:
        return (f"Detector(classes={self.num_classes}, img_size={self.img_size}, device={self.device}, "
                f"resize={self.resize!r}, conf_thres={self.conf_thres}, iou_thres={self.iou_thres})")
