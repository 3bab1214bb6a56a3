"""One small ``nn.Module`` per Darknet layer type, computing exactly what Darknet computes.

Tensors are NCHW. Heads (:class:`YOLOLayer`, :class:`RegionLayer`) return raw maps
``Float[N, A, H, W, 5 + C]`` in training mode and decoded rows ``Float[N, A*H*W, 5 + C]``
(cx, cy, w, h in input pixels, objectness, class probabilities) in eval mode.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------- activations


class Mish(nn.Module):
    """x * tanh(softplus(x)), as Darknet's mish."""

    def forward(self, x):
        return F.mish(x)


def _leaky():
    return nn.LeakyReLU(0.1)  # Darknet's leaky slope is 0.1, not PyTorch's 0.01


# Activation lookup by Darknet name, in one place.
ACTIVATIONS: Dict[str, Callable[[], nn.Module]] = {
    "linear": nn.Identity,
    "leaky": _leaky,
    "logistic": nn.Sigmoid,
    "relu": nn.ReLU,
    "relu6": nn.ReLU6,
    "mish": Mish,
    "swish": nn.SiLU,
    "tanh": nn.Tanh,
}
# Darknet's other activations join at the end of this module (see there).


def create_activation(name: str) -> nn.Module:
    """Module for a Darknet activation name; raises KeyError for an unknown name."""
    return ACTIVATIONS[name]()


# ----------------------------------------------------------------------------- layers with weights


class ConvBNAct(nn.Module):
    """Darknet ``[convolutional]``: conv (bias only without BN) -> BatchNorm -> activation.

    BatchNorm uses Darknet's eps 1e-5 and moves running stats by 0.01 a batch (momentum 0.01).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int,
                 padding: int, groups: int, batch_normalize: bool, activation: str):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                              groups=groups, bias=not batch_normalize)
        self.bn = nn.BatchNorm2d(out_channels, eps=1e-5, momentum=0.01) if batch_normalize else None
        self.act = create_activation(activation)
        self.activation = activation
        self.batch_normalize = batch_normalize  # what the cfg asked for, even after fuse()

    def forward(self, x):
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        return self.act(x)

    def darknet_weights(self) -> List[torch.Tensor]:
        """Tensors in ``.weights`` file order (see :mod:`yolo.weights`): biases (BN beta), then with BN
        scales, rolling mean, rolling variance, then the OIHW weights. None for a layer that uses another
        layer's weights (``share_index``)."""
        if getattr(self, "shared_from", None) is not None:
            return []
        if self.bn is not None:
            return [self.bn.bias, self.bn.weight, self.bn.running_mean, self.bn.running_var, self.conv.weight]
        if self.conv.bias is None or self.batch_normalize:
            raise ValueError("BatchNorm was folded into the conv (fuse()); Darknet weights need the unfused model")
        return [self.conv.bias, self.conv.weight]

    @torch.no_grad()
    def fuse(self) -> None:
        """Fold BatchNorm into the conv (for inference); a no-op without BN."""
        if self.bn is None:
            return
        bn, conv = self.bn, self.conv
        std = torch.sqrt(bn.running_var + bn.eps)
        scale = bn.weight / std
        fused = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                          conv.padding, dilation=conv.dilation, groups=conv.groups, bias=True).to(conv.weight.device, conv.weight.dtype)
        fused.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
        fused.bias.copy_(bn.bias - bn.running_mean * scale)
        self.conv = fused
        self.bn = None


# ----------------------------------------------------------------------------- weightless layers


class MaxPool(nn.Module):
    """Darknet ``[maxpool]``: total padding ``padding`` (default size-1), split left/top = padding//2.

    Cells outside the input are ignored (padded with -inf), never read as zeros: with
    ``size=2 stride=1`` (yolov3-tiny) this repeats the last row/column.
    Output size: (in + padding - size) // stride + 1.
    """

    def __init__(self, size: int, stride: int, padding: int):
        super().__init__()
        self.size, self.stride, self.padding = size, stride, padding
        self.pad_before = padding // 2
        self.pad_after = padding - self.pad_before

    def forward(self, x):
        if self.pad_before == self.pad_after and self.pad_before <= self.size // 2:
            # Symmetric case: PyTorch's own padding already ignores out-of-range cells.
            return F.max_pool2d(x, self.size, self.stride, self.pad_before)
        if self.pad_before or self.pad_after:
            x = F.pad(x, (self.pad_before, self.pad_after, self.pad_before, self.pad_after), value=float("-inf"))
        return F.max_pool2d(x, self.size, self.stride)


class Upsample(nn.Module):
    """Darknet ``[upsample]``: nearest neighbour by an integer ``stride``, times ``scale``."""

    def __init__(self, stride: int, scale: float = 1.0):
        super().__init__()
        self.stride, self.scale = stride, scale

    def forward(self, x):
        x = F.interpolate(x, scale_factor=self.stride, mode="nearest")
        return x * self.scale if self.scale != 1.0 else x


class Route(nn.Module):
    """Darknet ``[route]``: concatenate earlier outputs along channels.

    With ``groups > 1`` each input is cut into ``groups`` channel slices and slice ``group_id`` is kept.
    """

    def __init__(self, layers: Sequence[int], groups: int = 1, group_id: int = 0):
        super().__init__()
        self.layers = list(layers)
        self.groups, self.group_id = groups, group_id

    def forward(self, inputs: List[torch.Tensor]):
        if self.groups > 1:
            inputs = [t.chunk(self.groups, dim=1)[self.group_id] for t in inputs]
        return inputs[0] if len(inputs) == 1 else torch.cat(inputs, 1)


class Shortcut(nn.Module):
    """Darknet ``[shortcut]``: add the output of layer ``source`` then apply the activation.

    When channel counts differ only the overlapping channels add (the result keeps ``x``'s channels).
    """

    def __init__(self, source: int, activation: str = "linear"):
        super().__init__()
        self.source = source
        self.act = create_activation(activation)

    def forward(self, x, other):
        if x.shape[1] == other.shape[1]:
            out = x + other
        else:
            n = min(x.shape[1], other.shape[1])
            out = torch.cat([x[:, :n] + other[:, :n], x[:, n:]], 1)
        return self.act(out)


class Reorg(nn.Module):
    """Darknet ``[reorg]`` (YOLOv2 passthrough): C x H x W -> C*s*s x H/s x W/s.

    Darknet's reorg reads its input as if it had C/s^2 channels of size (H*s, W*s) (a known quirk
    that trained weights depend on); this reproduces that exact permutation.
    """

    def __init__(self, stride: int):
        super().__init__()
        self.stride = stride

    def forward(self, x):
        n, c, h, w = x.shape
        s = self.stride
        x = x.reshape(n, c // (s * s), h, s, w, s)
        x = x.permute(0, 3, 5, 1, 2, 4).reshape(n, c, h, w)
        return x.reshape(n, c * s * s, h // s, w // s)


class GlobalAvgPool(nn.Module):
    """Darknet ``[avgpool]``: mean over H and W -> Float[N, C, 1, 1]."""

    def forward(self, x):
        return x.mean(dim=(2, 3), keepdim=True)


class Softmax(nn.Module):
    """Darknet ``[softmax]``: each image's C*H*W values (C, H, W order) cut into ``groups`` contiguous groups,
    one softmax over each whole group, spatial cells included (src/softmax_layer.c ``softmax_cpu``)."""

    def __init__(self, groups: int = 1, temperature: float = 1.0):
        super().__init__()
        self.groups, self.temperature = groups, temperature

    def forward(self, x):
        y = x.reshape(x.shape[0], self.groups, -1) / self.temperature
        return torch.softmax(y, dim=2).reshape(x.shape)


class Dropout(nn.Dropout):
    """Darknet ``[dropout]``: identity in eval; in training Darknet scales kept cells by 1/(1-p) too."""


# ----------------------------------------------------------------------------- heads


@dataclass
class HeadOptions:
    """Options of a ``[yolo]`` / ``[region]`` section that the decode and the loss use."""

    ignore_thresh: float = 0.5
    truth_thresh: float = 1.0
    iou_thresh: float = 1.0
    scale_x_y: float = 1.0
    new_coords: int = 0
    iou_loss: str = "mse"
    iou_normalizer: float = 0.75
    obj_normalizer: float = 1.0
    cls_normalizer: float = 1.0
    max_delta: float = float("inf")
    label_smooth_eps: float = 0.0
    delta_normalizer: float = 1.0
    objectness_smooth: int = 0
    focal_loss: int = 0
    iou_thresh_kind: str = "iou"
    counters_per_class: str = ""  # comma-separated counts, one per class ("" = none)
    random: int = 0
    jitter: float = 0.2
    resize: float = 1.0


class YOLOLayer(nn.Module):
    """Darknet ``[yolo]`` head.

    Input Float[N, A*(5+C), H, W] (the preceding conv). Training: the same values viewed as
    Float[N, A, H, W, 5+C]. Eval: Float[N, A*H*W, 5+C] rows (cx, cy, w, h in input pixels,
    objectness, class probabilities), decoded as Darknet's yolo layer:
    xy = sigmoid(t) * s - (s - 1) / 2, cx = (col + xy_x) / W * input_w, w = exp(tw) * anchor_w;
    with ``new_coords=1`` no sigmoid here (the conv already applied logistic) and w = 4 * tw^2 * anchor_w.
    """

    def __init__(self, anchors: torch.Tensor, mask: Sequence[int], num_classes: int, opts: HeadOptions):
        super().__init__()
        self.mask = list(mask)
        self.num_classes = num_classes
        self.num_anchors = len(self.mask)
        self.opts = opts
        self.register_buffer("all_anchors", anchors.float().reshape(-1, 2), persistent=False)
        self.register_buffer("anchors", self.all_anchors[self.mask].clone(), persistent=False)
        self.stride = None  # (stride_y, stride_x) of the last forward, in input pixels per cell
        self._grid_cache: Dict[tuple, torch.Tensor] = {}

    def _grid(self, h: int, w: int, device, dtype) -> torch.Tensor:
        key = (h, w, device, dtype)
        grid = self._grid_cache.get(key)
        if grid is None:
            ys, xs = torch.meshgrid(torch.arange(h, device=device, dtype=dtype),
                                    torch.arange(w, device=device, dtype=dtype), indexing="ij")
            grid = torch.stack((xs, ys), -1).reshape(1, 1, h, w, 2)
            self._grid_cache = {key: grid}
        return grid

    def forward(self, x: torch.Tensor, input_hw: Sequence[int]):
        n, _, h, w = x.shape
        a, k = self.num_anchors, self.num_classes + 5
        self.stride = (input_hw[0] / h, input_hw[1] / w)
        raw = x.reshape(n, a, k, h, w).permute(0, 1, 3, 4, 2)
        if self.training:
            return raw.contiguous()
        return self.decode(raw, input_hw).reshape(n, a * h * w, k)

    def decode(self, raw: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Float[N, A, H, W, 5+C] raw -> decoded (same shape), boxes in input pixels."""
        _, _, h, w, _ = raw.shape
        in_h, in_w = input_hw
        scale = torch.tensor([in_w / w, in_h / h], device=raw.device, dtype=raw.dtype)
        grid = self._grid(h, w, raw.device, raw.dtype)
        anchors = self.anchors.to(raw.dtype).reshape(1, -1, 1, 1, 2)
        s = self.opts.scale_x_y
        if self.opts.new_coords:
            xy = raw[..., 0:2]
            wh = 4.0 * raw[..., 2:4] ** 2 * anchors
            rest = raw[..., 4:]
        else:
            xy = torch.sigmoid(raw[..., 0:2])
            wh = torch.exp(raw[..., 2:4]) * anchors
            rest = torch.sigmoid(raw[..., 4:])
        if s != 1.0:
            xy = xy * s - 0.5 * (s - 1.0)
        xy = (xy + grid) * scale
        return torch.cat((xy, wh, rest), -1)


class RegionLayer(nn.Module):
    """Darknet ``[region]`` head (YOLOv2).

    Anchors are given in grid cells; ``anchors`` here is kept in input pixels of the cfg's
    [net] size for the loss, while the decode uses cells: w = exp(tw) * anchor_cells / W * input_w.
    Objectness is logistic; classes are a softmax when ``softmax=1``, else left raw (as Darknet's region layer).

    Training (yolo/region_loss.py) reads ``train_opts`` (the section's training options, set by the builder) and
    ``images_seen`` (images trained on, the current batch included; the trainer keeps it up to date through
    :func:`yolo.region_loss.set_images_seen`): Darknet's prior term is on while it is below 12800.
    """

    def __init__(self, anchors_cells: torch.Tensor, num_classes: int, softmax: bool, opts: HeadOptions,
                 net_stride: float = 32.0):
        super().__init__()
        num = anchors_cells.numel() // 2
        self.mask = list(range(num))
        self.num_classes = num_classes
        self.num_anchors = num
        self.softmax = softmax
        self.opts = opts
        self.train_opts = None
        self.images_seen = 0
        self.register_buffer("anchors_cells", anchors_cells.float().reshape(-1, 2), persistent=False)
        self.register_buffer("all_anchors", self.anchors_cells * net_stride, persistent=False)
        self.register_buffer("anchors", self.all_anchors.clone(), persistent=False)
        self.stride = None

    def forward(self, x: torch.Tensor, input_hw: Sequence[int]):
        n, _, h, w = x.shape
        a, k = self.num_anchors, self.num_classes + 5
        self.stride = (input_hw[0] / h, input_hw[1] / w)
        raw = x.reshape(n, a, k, h, w).permute(0, 1, 3, 4, 2)
        if self.training:
            return raw.contiguous()
        in_h, in_w = input_hw
        ys, xs = torch.meshgrid(torch.arange(h, device=x.device, dtype=x.dtype),
                                torch.arange(w, device=x.device, dtype=x.dtype), indexing="ij")
        grid = torch.stack((xs, ys), -1).reshape(1, 1, h, w, 2)
        cells = torch.tensor([w, h], device=x.device, dtype=x.dtype)
        size = torch.tensor([in_w, in_h], device=x.device, dtype=x.dtype)
        xy = (torch.sigmoid(raw[..., 0:2]) + grid) / cells * size
        wh = torch.exp(raw[..., 2:4]) * self.anchors_cells.to(x.dtype).reshape(1, -1, 1, 1, 2) / cells * size
        obj = torch.sigmoid(raw[..., 4:5])
        # Without softmax Darknet's forward_region_layer leaves the class outputs as they are (no logistic).
        cls = torch.softmax(raw[..., 5:], -1) if self.softmax else raw[..., 5:]
        return torch.cat((xy, wh, obj, cls), -1).reshape(n, a * h * w, k)


# Darknet's other activations (exact formulas of src/activations.h; elu, selu and gelu with Darknet's constants).
# Imported last: importing yolo.layer_types runs every layer-type module, and those import this one.
from yolo.models.layer_types.activations import DARKNET_ACTIVATIONS  # noqa: E402

ACTIVATIONS.update(DARKNET_ACTIVATIONS)
