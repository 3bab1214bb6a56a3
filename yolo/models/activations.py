"""Darknet's activations by name (:data:`ACTIVATIONS`, :func:`create_activation`), each computing
src/activations.h's formula exactly (elu, selu and gelu with Darknet's constants).

Every module maps Float[N, C, H, W] -> the same shape, elementwise except the ``normalize_channels``
family, which normalizes across channels at each pixel (as Darknet's [convolutional] does).
"""
from __future__ import annotations

from typing import Callable, Dict

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mish(nn.Module):
    """x * tanh(softplus(x)), as Darknet's mish."""

    def forward(self, x):
        return F.mish(x)


def _leaky():
    return nn.LeakyReLU(0.1)  # Darknet's leaky slope is 0.1, not PyTorch's 0.01


class Elementwise(nn.Module):
    """Base for a Darknet activation given as a formula of x."""

    def forward(self, x):
        return self.formula(x)

    @staticmethod
    def formula(x):
        raise NotImplementedError


class Ramp(Elementwise):
    """x * (x > 0) + 0.1 * x."""

    @staticmethod
    def formula(x):
        return torch.relu(x) + 0.1 * x


class Relie(Elementwise):
    """x for x > 0, else 0.01 * x."""

    @staticmethod
    def formula(x):
        return torch.where(x > 0, x, 0.01 * x)


class Loggy(Elementwise):
    """2 / (1 + exp(-x)) - 1."""

    @staticmethod
    def formula(x):
        return 2.0 * torch.sigmoid(x) - 1.0


class Plse(Elementwise):
    """Piecewise linear sigmoid: 0.01 * (x + 4) below -4, 0.01 * (x - 4) + 1 above 4, else 0.125 * x + 0.5."""

    @staticmethod
    def formula(x):
        return torch.where(x < -4, 0.01 * (x + 4), torch.where(x > 4, 0.01 * (x - 4) + 1, 0.125 * x + 0.5))


class Hardtan(Elementwise):
    """x clipped to [-1, 1]."""

    @staticmethod
    def formula(x):
        return torch.clamp(x, -1.0, 1.0)


class Lhtan(Elementwise):
    """Leaky hard tanh: 0.001 * x below 0, 0.001 * (x - 1) + 1 above 1, else x."""

    @staticmethod
    def formula(x):
        return torch.where(x < 0, 0.001 * x, torch.where(x > 1, 0.001 * (x - 1) + 1, x))


class Stair(Elementwise):
    """floor(x / 2) where floor(x) is even, else (x - floor(x)) + floor(x / 2). Its gradient is 1 (as Darknet's,
    which is 0 only on exact integers)."""

    @staticmethod
    def formula(x):
        n = torch.floor(x)
        even = torch.remainder(n, 2) == 0
        value = torch.where(even, torch.floor(x / 2), (x - n) + torch.floor(x / 2))
        return x + (value - x).detach()  # straight-through: the forward is the stair, the gradient 1


class Elu(Elementwise):
    """x for x >= 0, else exp(x) - 1 (alpha 1)."""

    @staticmethod
    def formula(x):
        return torch.where(x >= 0, x, torch.expm1(torch.clamp(x, max=0)))


class Selu(Elementwise):
    """Darknet's SELU with its rounded constants: 1.0507 * x for x >= 0, else 1.0507 * 1.6732 * (exp(x) - 1)."""

    @staticmethod
    def formula(x):
        return torch.where(x >= 0, 1.0507 * x, 1.0507 * 1.6732 * torch.expm1(torch.clamp(x, max=0)))


class Gelu(Elementwise):
    """Darknet's GELU, the tanh approximation with its own constants:
    0.5 * x * (1 + tanh(0.797885 * x + 0.035677 * x^3)) (PyTorch's default GELU is the erf form)."""

    @staticmethod
    def formula(x):
        return 0.5 * x * (1.0 + torch.tanh(0.797885 * x + 0.035677 * x * x * x))


class HardMish(Elementwise):
    """x for x > 0, x^2 / 2 + x for -2 < x <= 0, else 0."""

    @staticmethod
    def formula(x):
        return torch.where(x > 0, x, torch.where(x > -2, x * x / 2 + x, torch.zeros_like(x)))


class NormalizeChannels(nn.Module):
    """``normalize_channels``: at each pixel, positive values divided by (0.0001 + their sum over channels);
    non-positive values become 0."""

    def forward(self, x):
        pos = torch.relu(x)
        return pos / (pos.sum(dim=1, keepdim=True) + 0.0001)


class NormalizeChannelsSoftmax(nn.Module):
    """``normalize_channels_softmax``: at each pixel exp(x) / (0.0001 + sum over channels of exp(x));
    ``_maxval`` subtracts the channel maximum first (the same up to the 0.0001)."""

    def __init__(self, use_max: bool = False):
        super().__init__()
        self.use_max = use_max

    def forward(self, x):
        if self.use_max:
            x = x - x.amax(dim=1, keepdim=True)
        e = torch.exp(x)
        return e / (e.sum(dim=1, keepdim=True) + 0.0001)


# Activations that only [convolutional] computes: Darknet's generic activate() returns 0 for them,
# so other layer types refuse them.
CONV_ONLY = {"hard_mish", "normalize_channels", "normalize_channels_softmax", "normalize_channels_softmax_maxval"}

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
    "ramp": Ramp,
    "relie": Relie,
    "loggy": Loggy,
    "plse": Plse,
    "hardtan": Hardtan,
    "lhtan": Lhtan,
    "stair": Stair,
    # revleaky differs from leaky only in Darknet's gradient (a CPU/CUDA inconsistency); forward is leaky.
    "revleaky": _leaky,
    "elu": Elu,
    "selu": Selu,
    "gelu": Gelu,
    "hard_mish": HardMish,
    "normalize_channels": NormalizeChannels,
    "normalize_channels_softmax": NormalizeChannelsSoftmax,
    "normalize_channels_softmax_maxval": lambda: NormalizeChannelsSoftmax(use_max=True),
}


def create_activation(name: str) -> nn.Module:
    """Module for a Darknet activation name; raises KeyError for an unknown name."""
    return ACTIVATIONS[name]()
