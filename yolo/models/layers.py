"""One small ``nn.Module`` per Darknet layer type, computing exactly what Darknet computes.

Tensors are NCHW. The heads are in :mod:`yolo.models.heads`, Darknet's activations in
:mod:`yolo.models.activations`, the less common layer types in :mod:`yolo.models.layer_types`.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from yolo.models.activations import create_activation

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
                          conv.padding, dilation=conv.dilation, groups=conv.groups, bias=True).to(conv.weight.device, conv.weight.dtype)
        fused.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
        fused.bias.copy_(bn.bias - bn.running_mean * scale)
        self.conv = fused
        self.bn = None


# ----------------------------------------------------------------------------- weightless layers


class PoolWindow(nn.Module):
    """Base of Darknet's pooling layers: a ``size`` x ``size`` window moved by ``stride`` over the input padded by
    ``padding`` in total, ``pad_before = padding // 2`` left/top and the rest right/bottom.
    Output size: (in + padding - size) // stride + 1."""

    def __init__(self, size: int, stride: int, padding: int):
        super().__init__()
        self.size, self.stride, self.padding = size, stride, padding
        self.pad_before = padding // 2
        self.pad_after = padding - self.pad_before


class MaxPool(PoolWindow):
    """Darknet ``[maxpool]``: total padding ``padding`` (default size-1), split left/top = padding//2.

    Cells outside the input are ignored (padded with -inf), never read as zeros: with
    ``size=2 stride=1`` (yolov3-tiny) this repeats the last row/column.
    """

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
