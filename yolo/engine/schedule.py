"""Darknet's learning-rate policies (``get_current_rate``), driven by the cfg's ``[net]`` section.

The rate depends only on the number of optimizer updates ``n`` (Darknet's ``get_current_batch``: the
first update has ``n = 1``), so the schedule needs no state of its own and a resumed run continues
exactly from the update counter stored in its checkpoint.

* burn-in: ``n < burn_in`` gives ``learning_rate * (n / burn_in) ** power`` (``power`` defaults to 4);
* ``constant``: ``learning_rate``;
* ``steps``: ``learning_rate`` times every ``scales[i]`` whose ``steps[i] <= n``;
* ``step``: ``learning_rate * scale ** (n // step)``;
* ``exp``: ``learning_rate * gamma ** n``;
* ``poly``: ``learning_rate * (1 - n / max_batches) ** power``;
* ``sig``: ``learning_rate / (1 + exp(gamma * (n - step)))``.

Darknet's ``steps`` are update counts. A step written as a fraction below 1 (``steps=0.8,0.9``) is read
as that fraction of the run's updates, which keeps a schedule valid when the run length changes.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Sequence

POLICIES = ("constant", "steps", "step", "exp", "poly", "sig")


@dataclass
class LRSchedule:
    """A Darknet learning-rate policy; call it with the update number ``n`` (1-based)."""

    learning_rate: float
    policy: str = "constant"
    burn_in: int = 0
    power: float = 4.0
    steps: List[int] = field(default_factory=list)
    scales: List[float] = field(default_factory=list)
    step: int = 1
    scale: float = 1.0
    gamma: float = 1.0
    max_batches: int = 0

    def __post_init__(self):
        self.policy = str(self.policy).lower()
        if self.policy not in POLICIES:
            raise ValueError(f"unknown learning-rate policy '{self.policy}' (known: {', '.join(POLICIES)})")
        if self.learning_rate < 0:
            raise ValueError(f"learning_rate={self.learning_rate} must not be negative")
        if self.burn_in < 0:
            raise ValueError(f"burn_in={self.burn_in} must not be negative")
        self.steps = [int(s) for s in self.steps]
        self.scales = [float(s) for s in self.scales]
        if self.policy == "steps":
            if len(self.steps) != len(self.scales):
                raise ValueError(f"policy=steps needs as many scales as steps, got steps={self.steps} "
                                 f"scales={self.scales}")
            if any(b < a for a, b in zip(self.steps, self.steps[1:])):
                raise ValueError(f"steps must be increasing, got {self.steps}")
        if self.policy == "step" and self.step <= 0:
            raise ValueError(f"policy=step needs step > 0, got {self.step}")
        if self.policy == "poly" and self.max_batches <= 0:
            raise ValueError("policy=poly needs max_batches > 0")

    def __call__(self, n: int) -> float:
        lr = self.learning_rate
        if n < self.burn_in:
            return lr * (max(n, 0) / self.burn_in) ** self.power
        if self.policy == "constant":
            return lr
        if self.policy == "steps":
            for boundary, scale in zip(self.steps, self.scales):
                if boundary > n:
                    break
                lr *= scale
            return lr
        if self.policy == "step":
            return lr * self.scale ** (n // self.step)
        if self.policy == "exp":
            return lr * self.gamma ** n
        if self.policy == "poly":
            return lr * max(0.0, 1.0 - n / self.max_batches) ** self.power
        # sig
        return lr / (1.0 + math.exp(min(self.gamma * (n - self.step), 700.0)))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def resolve_steps(steps: Sequence[float], total_updates: int) -> List[int]:
    """Darknet steps as update counts: values below 1 are fractions of ``total_updates``."""
    out = []
    for s in steps:
        s = float(s)
        if s < 0:
            raise ValueError(f"steps must not be negative, got {s}")
        out.append(int(round(s * total_updates)) if s < 1 else int(s))
    return out


def schedule_from_hyp(hyp: Mapping[str, Any], total_updates: int) -> LRSchedule:
    """An :class:`LRSchedule` from resolved hyperparameters (see :mod:`yolo.engine.config`).

    ``total_updates`` (the run's optimizer updates) resolves fractional steps and is the ``max_batches``
    of ``poly`` (the run length, as in Darknet, where ``max_batches`` is where training stops).
    """
    return LRSchedule(
        learning_rate=float(hyp["learning_rate"]),
        policy=str(hyp.get("policy", "constant")),
        burn_in=int(hyp.get("burn_in", 0)),
        power=float(hyp.get("power", 4.0)),
        steps=resolve_steps(hyp.get("steps") or [], total_updates),
        scales=list(hyp.get("scales") or []),
        step=int(hyp.get("step", 1)),
        scale=float(hyp.get("scale", 1.0)),
        gamma=float(hyp.get("gamma", 1.0)),
        max_batches=int(total_updates),
    )


def set_lr(optimizer, lr: float) -> None:
    """Give every parameter group of ``optimizer`` the rate ``lr``."""
    for group in optimizer.param_groups:
        group["lr"] = lr


__all__ = ["LRSchedule", "POLICIES", "resolve_steps", "schedule_from_hyp", "set_lr"]
