"""Darknet ``[convolutional]`` (also ``[conv]``): conv (bias only without BN) -> BatchNorm -> activation, and its
binary forms (``xnor=1``, ``binary=1``).

Float[N, C, H, W] -> Float[N, filters, out_h, out_w], out = (in + 2 * padding - size) // stride + 1, with
``padding = size // 2`` when ``pad=1``, else the ``padding`` key (default 0).

Binary convolutions: with ``binary=1`` the weights are binarized per filter, w -> sign(w) * mean(|w|) over that
filter (w > 0 -> +mean, else -mean). ``xnor=1``: the same, and the input is binarized too, x -> +1 where x > 0, else
-1 (padding stays 0). Then bias or BatchNorm and the activation, as an ordinary [convolutional].

This is what Darknet's CUDA path computes (``fast_binarize_weights_gpu``, per filter). Darknet's CPU path
passes the whole layer's weight count as the filter size to ``binarize_weights`` and so uses one mean over
all filters (and writes past its buffer); where the filters' mean |w| are equal the two agree, which is how
the tests compare with it. Darknet's bit-packed inference path (``calculate_binary_weights``, used by its
detector CLI) is not reproduced. Backward is straight-through: the gradient of the binarized weights goes to
the real weights, and the input's gradient passes unchanged.
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

from yolo.models.activations import create_activation
from yolo.models.cfg import Section
from yolo.models.layer_types.limits import check_layer_size
from yolo.models.layer_types.registry import LayerInfo, Shape, layer_index, positive, register
from yolo.models.layer_types.registry import activation as checked_activation


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
        """Tensors in ``.weights`` file order (see :mod:`yolo.models.weights`): biases (BN beta), then with BN
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
                          conv.padding, dilation=conv.dilation, groups=conv.groups, bias=True)
        fused = fused.to(conv.weight.device, conv.weight.dtype)
        fused.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
        fused.bias.copy_(bn.bias - bn.running_mean * scale)
        self.conv = fused
        self.bn = None


class BinaryConvBNAct(ConvBNAct):
    """A [convolutional] with binarized weights (and with ``xnor`` a binarized input); see the module docstring."""

    def __init__(self, *args, xnor: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.xnor = xnor

    def binarized_weight(self) -> torch.Tensor:
        w = self.conv.weight
        mean = w.abs().mean(dim=(1, 2, 3), keepdim=True)
        binary = torch.where(w > 0, mean, -mean)
        return w + (binary - w).detach()  # straight-through

    def forward(self, x):
        if self.xnor:
            x = x + (torch.where(x > 0, 1.0, -1.0).to(x.dtype) - x).detach()
        conv = self.conv
        x = F.conv2d(x, self.binarized_weight(), conv.bias, conv.stride, conv.padding, conv.dilation, conv.groups)
        if self.bn is not None:
            x = self.bn(x)
        return self.act(x)

    def fuse(self) -> None:
        """Kept unfused: BatchNorm cannot fold into weights that are binarized afterwards."""


@register("convolutional", "conv")
def build_convolutional(section: Section, shapes: List[Shape], prev: Shape) -> LayerInfo:
    c, h, w = prev
    filters = positive(section, "filters", section.get_int("filters", 1))
    size = positive(section, "size", section.get_int("size", 1))
    stride = positive(section, "stride", section.get_int("stride", 1))
    groups = positive(section, "groups", section.get_int("groups", 1))
    pad_flag = section.get_int("pad", 0)
    padding = size // 2 if pad_flag else section.get_int("padding", 0)
    bn = bool(section.get_int("batch_normalize", 0))
    act = checked_activation(section, "logistic", conv=True)  # Darknet's default when the key is missing
    if c % groups or filters % groups:
        raise section.error(f"groups={groups} must divide input channels ({c}) and filters ({filters})", "groups")
    out_h = (h + 2 * padding - size) // stride + 1
    out_w = (w + 2 * padding - size) // stride + 1
    if out_h <= 0 or out_w <= 0:
        raise section.error(f"input {h}x{w} is too small for size={size} stride={stride} padding={padding}")
    check_layer_size(section, filters * (c // groups) * size * size, (filters, out_h, out_w),
                     "size" if size * size > filters else "filters",
                     f"filters={filters} size={size} on a {c}x{h}x{w} input")
    xnor, binary = bool(section.get_int("xnor", 0)), bool(section.get_int("binary", 0))
    if xnor or binary:
        module = BinaryConvBNAct(c, filters, size, stride, padding, groups, bn, act, xnor=xnor)
    else:
        module = ConvBNAct(c, filters, size, stride, padding, groups, bn, act)
    shares = None
    if "share_index" in section.options:  # this layer uses another layer's weights (Darknet's share_layer)
        shares = layer_index(section, "share_index", section.get_int("share_index", 0))
    dilation = positive(section, "dilation", section.get_int("dilation", 1)) if size > 1 else 1
    if dilation > 1:
        # Darknet pads by padding*dilation but sizes the output as if undilated; the two agree only for
        # "same" padding (padding = size // 2 with odd size), the only case Darknet computes consistently.
        span = dilation * (size - 1) + 1
        if (h + 2 * padding * dilation - span) // stride + 1 != out_h or \
                (w + 2 * padding * dilation - span) // stride + 1 != out_w:
            raise section.error(f"dilation={dilation} with size={size} padding={padding}: Darknet's output size "
                                f"disagrees with its dilated windows (only padding=size//2 is consistent)", "dilation")
        module.conv.dilation = (dilation, dilation)
        module.conv.padding = (padding * dilation, padding * dilation)
    return LayerInfo(module, (filters, out_h, out_w), prev, shares=shares)

