"""Exponential moving average of a model's weights, for evaluation and the saved ``best.pt``.

After update ``k`` the average moves towards the training weights with decay
``d_k = decay * (1 - exp(-k / tau))``: a short memory early (when the weights change fast), ``decay`` later.
Floating-point buffers (BatchNorm running statistics) are averaged too; integer buffers are copied.

Why not ``torch.optim.swa_utils.AveragedModel`` with ``get_ema_multi_avg_fn`` (or timm's ``ModelEmaV3``): its
decay is a constant (ours ramps up with ``tau``; timm's ramp is another formula), its update is ``lerp``, whose
rounding differs from ``value * d + new * (1 - d)`` (after 300 updates at decay 0.9999 on a small conv net, 8 of 9
tensors differed, by up to 7.8e-6), with ``use_buffers`` it averages integer buffers as numbers
(``num_batches_tracked`` stayed 0 where the model's reached 300), its first update copies the model instead of
averaging, and its state gains an ``n_averaged`` entry, so saved runs would no longer resume bit for bit.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Tuple

import torch
import torch.nn as nn
from torch import Tensor


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside a ``DistributedDataParallel`` / ``DataParallel`` wrapper (or ``model`` itself)."""
    return model.module if hasattr(model, "module") and isinstance(model, (nn.parallel.DistributedDataParallel,
                                                                           nn.DataParallel)) else model


class ModelEMA:
    """Moving average of ``model``'s state (a frozen copy in eval mode, same device).

    Args:
        model: the model being trained (a DDP wrapper is unwrapped).
        decay: the long-run decay.
        tau: how many updates the ramp of the decay takes (about 63% of ``decay`` after ``tau`` updates).
        updates: updates already made (when resuming).
    """

    def __init__(self, model: nn.Module, decay: float = 0.9999, tau: float = 2000.0, updates: int = 0):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        if tau <= 0:
            raise ValueError(f"EMA tau must be positive, got {tau}")
        self.module = copy.deepcopy(unwrap(model)).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.decay, self.tau, self.updates = float(decay), float(tau), int(updates)

    def current_decay(self) -> float:
        return self.decay * (1.0 - math.exp(-self.updates / self.tau))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the average one step towards ``model``'s current state."""
        self.updates += 1
        d = self.current_decay()
        averaged, sources, others = self._pairs(unwrap(model))
        if averaged:  # value = value * d + new * (1 - d): one call per operation for every tensor
            torch._foreach_mul_(averaged, d)
            torch._foreach_add_(averaged, sources, alpha=1.0 - d)
        for value, new in others:
            if value.dtype.is_floating_point:
                value.mul_(d).add_(new.to(value.dtype), alpha=1.0 - d)
            else:
                value.copy_(new)

    def _pairs(self, model: nn.Module) -> Tuple[List[Tensor], List[Tensor], List[Tuple[Tensor, Tensor]]]:
        """The averaged tensors of the same dtype as their sources in ``model``, those sources, and the other
        (average, source) pairs. Built once per source model: optimizer steps and ``load_state_dict`` change
        the tensors in place, so the references stay valid."""
        cached = getattr(self, "_cached_pairs", None)
        if cached is not None and cached[0] is model:
            return cached[1]
        source = model.state_dict()
        averaged, sources, others = [], [], []
        for name, value in self.module.state_dict().items():
            new = source[name].detach()
            if value.dtype.is_floating_point and new.dtype == value.dtype and new.device == value.device:
                averaged.append(value)
                sources.append(new)
            else:
                others.append((value, new))
        self._cached_pairs = (model, (averaged, sources, others))
        return averaged, sources, others

    def state_dict(self) -> Dict[str, Any]:
        return {"updates": self.updates, "decay": self.decay, "tau": self.tau}

    def load_state_dict(self, state: Dict[str, Any], weights: Dict[str, torch.Tensor]) -> None:
        """Restore the counters from :meth:`state_dict` and the averaged weights from ``weights``."""
        self.updates = int(state["updates"])
        self.decay, self.tau = float(state.get("decay", self.decay)), float(state.get("tau", self.tau))
        self.module.load_state_dict(weights)


__all__ = ["ModelEMA", "unwrap"]
