"""3x3 stride-1 convolutions by Winograd's minimal filtering F(m x m, 3 x 3) on the CPU.

Tested against the plain PyTorch ``act(F.conv2d(x, weight, bias, padding=1))`` for F(2,3), F(3,3) and F(4,3)
(``tests/test_detector.py``). The channel products run in oneDNN through PyTorch's private
``torch.ops.mkldnn`` operators (see :mod:`yolo.accel.cpu_conv`).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["WinogradConv3x3", "winograd_matrices", "winograd_tile", "is_winograd_shape"]


def winograd_matrices(m: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        at, g, bt = winograd_matrices(m)
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


def winograd_tile(h: int, w: int, c_in: int, c_out: int) -> int:
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


def is_winograd_shape(conv: nn.Conv2d) -> bool:
    """Whether :class:`WinogradConv3x3` can replace ``conv``: 3x3, stride 1, padding 1, groups 1, dilation 1."""
    return conv.kernel_size == (3, 3) and conv.stride == (1, 1) and conv.padding == (1, 1) \
        and conv.groups == 1 and conv.dilation == (1, 1)
