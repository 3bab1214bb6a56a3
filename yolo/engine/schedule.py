"""Darknet's learning-rate policies (``get_current_rate`` in network.c), driven by the cfg's ``[net]`` section.

The rate depends only on the number of optimizer updates ``n`` (Darknet's ``get_current_batch``: the
first update has ``n = 1``), so the schedule needs no state of its own and a resumed run continues
exactly from the update counter stored in its checkpoint.

* burn-in: ``n < burn_in`` gives ``learning_rate * (n / burn_in) ** power`` (``power`` defaults to 4),
  whatever the policy;
* ``constant``: ``learning_rate``;
* ``steps``: ``learning_rate`` times ``scales[i]`` for each ``i`` in order, stopping at the first
  ``steps[i] > n`` (Darknet's loop: steps need not be increasing);
* ``step``: ``learning_rate * scale ** (n // step)``;
* ``exp``: ``learning_rate * gamma ** n``;
* ``poly``: ``learning_rate * (1 - n / max_batches) ** power`` (0 past ``max_batches``, where Darknet
  has stopped training);
* ``sigmoid``: ``learning_rate / (1 + exp(gamma * (n - step)))``;
* ``sgdr``: cosine annealing with warm restarts: cycles of ``sgdr_cycle`` updates (default
  ``max_batches``), each ``sgdr_mult`` times longer than the one before, within which the rate falls
  from ``learning_rate`` to ``learning_rate_min`` as ``min + (lr - min) * (1 + cos(pi * t / cycle)) / 2``;
* ``random``: ``learning_rate * u ** power`` with ``u`` uniform in [0, 1). Darknet draws ``u`` from the C
  library's ``rand()``, a stream shared with its data augmentation, so its draws cannot be reproduced;
  here ``u`` is a fixed function of ``(seed, n)``: the same seed gives the same rates, also on resume.

The arithmetic follows Darknet's, including its float32 values of ``power``, ``gamma`` and ``scale``, its
float32 roundings of ``n / burn_in``, ``1 - n / max_batches`` and ``gamma * (n - step)`` (without them poly's
rate would differ by up to 5e-5 relative with max_batches=1000 and 2e-3 with 500200, near the end of the run;
exp's by 1e-5 after a thousand updates) and its value of pi (3.14159265); the rate itself is kept in double precision, so it equals Darknet's float32 rate to within
float32 rounding (relative 1e-6).

The cfg keys are read as Darknet's ``parse_net_options`` reads them (:func:`read_net_schedule`).
"""
from __future__ import annotations

import math
import random as _random
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

# Darknet's policy names (get_policy in parser.c; case-sensitive there too).
POLICIES = ("constant", "step", "steps", "exp", "poly", "sigmoid", "sgdr", "random")
DARKNET_PI = 3.14159265  # the constant Darknet's sgdr uses

@dataclass
class ScheduleHyperparameters:
    """Darknet's ``[net]`` learning-rate keys with Darknet's defaults (parse_net_options): the one declaration
    that :class:`LRSchedule` and the trainer's :class:`yolo.engine.config.Hyperparameters` both extend.

    ``steps`` are update numbers (or, in training settings, fractions of the run below 1); ``sgdr_cycle`` None
    means ``max_batches``.
    """

    learning_rate: float = 0.001
    policy: str = "constant"
    burn_in: int = 0
    power: float = 4.0
    steps: List[float] = field(default_factory=list)
    scales: List[float] = field(default_factory=list)
    step: int = 1
    scale: float = 1.0
    gamma: float = 1.0
    max_batches: int = 0
    learning_rate_min: float = 0.00001
    sgdr_cycle: Optional[int] = None
    sgdr_mult: int = 2


# The same keys and defaults as a plain dict (a fresh list for each list default).
SCHEDULE_DEFAULTS: Dict[str, Any] = asdict(ScheduleHyperparameters())


def _f32(value: float) -> float:
    return float(np.float32(value))


@dataclass
class LRSchedule(ScheduleHyperparameters):
    """A Darknet learning-rate policy; call it with the update number ``n`` (1-based).

    ``sgdr_cycle`` None means ``max_batches`` (Darknet's default). ``seed`` drives ``policy=random`` only.
    ``scales`` may be longer than ``steps`` (Darknet uses the first ``len(steps)``), never shorter.
    """

    seed: int = 0

    def __post_init__(self):
        self.policy = str(self.policy)
        if self.policy not in POLICIES:
            raise ValueError(f"unknown learning-rate policy '{self.policy}' (Darknet's: {', '.join(POLICIES)})")
        if self.learning_rate < 0:
            raise ValueError(f"learning_rate={self.learning_rate} must not be negative")
        if self.burn_in < 0:
            raise ValueError(f"burn_in={self.burn_in} must not be negative")
        self.steps = [int(s) for s in self.steps]
        self.scales = [float(s) for s in self.scales]
        if self.policy == "steps":
            if not self.steps or not self.scales:
                raise ValueError("policy=steps needs steps and scales")
            if len(self.scales) < len(self.steps):
                raise ValueError(f"policy=steps: {len(self.steps)} steps but only {len(self.scales)} scales "
                                 f"(Darknet would read past the end of scales)")
        self.scales = self.scales[:len(self.steps)] if self.steps else self.scales
        if self.policy == "step" and self.step <= 0:
            raise ValueError(f"policy=step needs step > 0, got {self.step}")
        if self.policy == "poly" and self.max_batches <= 0:
            raise ValueError("policy=poly needs max_batches > 0")
        if self.sgdr_cycle is None:
            self.sgdr_cycle = int(self.max_batches)
        if self.policy == "sgdr":
            if self.sgdr_cycle <= 0:  # Darknet would loop forever looking for the current cycle
                raise ValueError("policy=sgdr needs sgdr_cycle > 0 (or max_batches > 0, its default)")
            if self.sgdr_mult < 1:
                raise ValueError(f"policy=sgdr needs sgdr_mult >= 1, got {self.sgdr_mult}")

    def __call__(self, n: int) -> float:
        lr = self.learning_rate
        if n < self.burn_in:
            return lr * math.pow(_f32(max(n, 0) / self.burn_in), _f32(self.power))
        policy = self.policy
        if policy == "constant":
            return lr
        if policy == "steps":
            for boundary, scale in zip(self.steps, self.scales):
                if boundary > n:
                    break
                lr *= scale
            return lr
        if policy == "step":
            return lr * math.pow(_f32(self.scale), n // self.step)
        if policy == "exp":
            return lr * math.pow(_f32(self.gamma), n)
        if policy == "poly":
            base = _f32(1.0 - _f32(n / self.max_batches))
            return lr * math.pow(base, _f32(self.power)) if base > 0 else 0.0
        if policy == "sigmoid":
            return lr / (1.0 + math.exp(min(_f32(_f32(self.gamma) * (n - self.step)), 700.0)))
        if policy == "sgdr":
            start, cycle = 0, self.sgdr_cycle
            while start + cycle < n:
                start += cycle
                cycle *= self.sgdr_mult
            low = self.learning_rate_min
            return low + 0.5 * (lr - low) * (1.0 + math.cos(_f32(n - start) * DARKNET_PI / cycle))
        # random: a fixed draw per (seed, update) so that a resumed run repeats it.
        u = _random.Random(f"{self.seed}:{n}").random()
        return lr * math.pow(u, _f32(self.power))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------ the cfg keys
def _atoi_list(net, key: str) -> List[int]:
    """Darknet's ``steps``: comma-separated integers (it reads each with atoi, so '0.8' would be 0)."""
    raw = net.get_str(key)
    items = raw.split(",")
    out = []
    for item in items:
        text = item.strip()
        if not text.lstrip("+-").isdigit():
            raise net.error(f"{key}={raw}: '{text}' is not a whole number of updates (Darknet reads each "
                            f"step as an integer; fractions of the run belong in the hyperparameter YAML)", key)
        out.append(int(text))
    return out


def read_net_schedule(net) -> Dict[str, Any]:
    """The ``[net]`` schedule keys of ``net`` (a :class:`yolo.models.cfg.Section`) as Darknet's parse_net_options reads them.

    Bad values raise the section's one-line :class:`yolo.models.cfg.CfgError` (file and line). ``scales`` longer than
    ``steps`` are cut to ``len(steps)`` as Darknet does; shorter ones are refused (Darknet reads past their end).
    """
    out: Dict[str, Any] = {}
    out["learning_rate"] = net.get_float("learning_rate", 0.001)
    out["max_batches"] = net.get_int("max_batches", 0)
    out["learning_rate_min"] = net.get_float("learning_rate_min", 0.00001)
    out["sgdr_cycle"] = net.get_int("sgdr_cycle", out["max_batches"])
    out["sgdr_mult"] = net.get_int("sgdr_mult", 2)
    out["power"] = net.get_float("power", 4.0)
    out["burn_in"] = net.get_int("burn_in", 0)
    policy = net.get_str("policy", "constant")
    if policy not in POLICIES:  # Darknet falls back to constant with a message; we refuse
        raise net.error(f"unknown policy '{policy}' (Darknet's names: {', '.join(POLICIES)})", "policy")
    out["policy"] = policy
    # Darknet reads each of these only for the policies that use them (a leftover key is ignored).
    out["step"] = net.get_int("step", 1) if policy in ("step", "sigmoid") else 1
    out["scale"] = net.get_float("scale", 1.0) if policy == "step" else 1.0
    out["gamma"] = net.get_float("gamma", 1.0) if policy in ("exp", "sigmoid") else 1.0
    with_steps = policy in ("steps", "sgdr")
    steps = _atoi_list(net, "steps") if with_steps and net.has("steps") else []
    scales = net.get_floats("scales") if with_steps and net.has("scales") else []
    if policy == "steps" and not (steps and scales):
        raise net.error("policy=steps needs both steps and scales", "policy")
    if steps and scales and len(scales) < len(steps):
        raise net.error(f"{len(steps)} steps but only {len(scales)} scales: Darknet would read past the end of "
                        f"scales", "scales")
    out["steps"] = steps
    out["scales"] = scales[:len(steps)] if steps else scales
    for key in ("burn_in", "max_batches"):
        if out[key] < 0:
            raise net.error(f"{key}={out[key]} must not be negative", key)
    if policy == "step" and out["step"] <= 0:
        raise net.error(f"policy=step needs step > 0, got {out['step']}", "step")
    if policy == "sgdr" and net.has("sgdr_cycle") and out["sgdr_cycle"] <= 0:  # Darknet would loop forever
        raise net.error(f"sgdr_cycle={out['sgdr_cycle']} must be positive", "sgdr_cycle")
    if policy == "sgdr" and out["sgdr_mult"] < 1:  # a cycle of 0 updates: Darknet would loop forever
        raise net.error(f"sgdr_mult={out['sgdr_mult']} must be at least 1", "sgdr_mult")
    return out


def resolve_steps(steps: Sequence[float], total_updates: int) -> List[int]:
    """Steps as update counts: a value strictly between 0 and 1 (only possible from the hyperparameter YAML,
    the cfg takes Darknet's whole numbers) is that fraction of ``total_updates``."""
    out = []
    for s in steps:
        s = float(s)
        if 0 < s < 1:
            out.append(int(round(s * total_updates)))
        elif s != int(s):
            raise ValueError(f"steps: {s} is neither a whole number of updates nor a fraction below 1")
        else:
            out.append(int(s))
    return out


def schedule_from_hyp(hyp: Mapping[str, Any], total_updates: int, seed: int = 0) -> LRSchedule:
    """An :class:`LRSchedule` from resolved hyperparameters (see :mod:`yolo.engine.config`).

    ``total_updates`` (the run's optimizer updates) resolves fractional steps, and stands in for
    ``max_batches`` (the end of poly's decay, sgdr's first cycle) when the cfg gives none.
    """
    max_batches = int(hyp.get("max_batches") or 0) or int(total_updates)
    cycle = hyp.get("sgdr_cycle")
    value = {key: hyp.get(key, default) for key, default in SCHEDULE_DEFAULTS.items()}
    burn_in = int(value["burn_in"])
    if hyp.get("scale_burn_in"):
        burn_in = scaled_burn_in(burn_in, max_batches, int(total_updates))
    return LRSchedule(
        learning_rate=float(value["learning_rate"]),
        policy=str(value["policy"]),
        burn_in=burn_in,
        power=float(value["power"]),
        steps=resolve_steps(value["steps"] or [], total_updates),
        scales=list(value["scales"] or []),
        step=int(value["step"]),
        scale=float(value["scale"]),
        gamma=float(value["gamma"]),
        max_batches=max_batches,
        learning_rate_min=float(value["learning_rate_min"]),
        sgdr_cycle=int(cycle) if cycle else max_batches,
        sgdr_mult=int(value["sgdr_mult"]),
        seed=int(seed),
    )


def scaled_burn_in(burn_in: int, max_batches: int, total_updates: int) -> int:
    """``burn_in`` for a run of ``total_updates`` shorter than the cfg's ``max_batches``: the same share of the run,
    rounded (``burn_in=1000`` of ``max_batches=500200`` over 300 updates: 1); unchanged for a run at least as long.
    Darknet ramps for ``burn_in`` updates whatever the run's length (``hyp.scale_burn_in`` false, the default)."""
    if max_batches <= 0 or total_updates >= max_batches:
        return burn_in
    return int(round(burn_in * total_updates / max_batches))


def burn_in_outlasts_run(schedule: LRSchedule, total_updates: int) -> Optional[str]:
    """A warning when ``burn_in`` (in updates) is longer than the run: the learning rate then never reaches
    ``learning_rate`` (a stock cfg's ``burn_in=1000`` on a fine-tuning run of a few dozen updates learns
    almost nothing), else None. It names ``--scale-burn-in`` where that helps (a cfg ``max_batches`` longer than
    the run), else the ``burn_in`` to set."""
    if schedule.burn_in <= total_updates or schedule.learning_rate <= 0:
        return None
    final = schedule(total_updates)
    scaled = scaled_burn_in(schedule.burn_in, schedule.max_batches, total_updates)
    if scaled < schedule.burn_in:
        fix = (f"pass --scale-burn-in (scale_burn_in: true in --hyp) to give it its share of max_batches="
               f"{schedule.max_batches}: burn_in {scaled} here")
    else:
        fix = f"set burn_in below {total_updates} (e.g. burn_in: {max(1, total_updates // 10)} in --hyp)"
    return (f"burn_in={schedule.burn_in} updates is longer than this run's {total_updates} updates: the learning "
            f"rate only ramps up to {final:.3g} ({final / schedule.learning_rate:.2g} of learning_rate="
            f"{schedule.learning_rate:g}) and the run learns little (Darknet trains so too, and so does this run); "
            f"{fix}")


def rate_warnings(schedule: LRSchedule) -> List[str]:
    """Warnings for schedules Darknet trains without a word: a rate of 0 throughout, and ``steps`` out of order
    (defined, as Darknet's loop stops at the first step not yet reached, but rarely what was meant)."""
    warnings = []
    if schedule.learning_rate == 0 and not (schedule.policy == "sgdr" and schedule.learning_rate_min > 0):
        warnings.append("learning_rate=0: the weights never change (Darknet trains so too); set learning_rate in "
                        "the cfg's [net] or in --hyp")
    steps = schedule.steps if schedule.policy == "steps" else []
    if steps != sorted(steps):
        warnings.append(f"lr steps {steps} are not in increasing order: as in Darknet, the scales apply in the "
                        f"listed order and stop at the first step not yet reached, so a step after a larger one "
                        f"waits for it")
    return warnings


def set_lr(optimizer, lr: float) -> None:
    """Give every parameter group of ``optimizer`` the rate ``lr`` times its ``lr_scale`` (Darknet's per-layer
    ``learning_rate``, 1 by default)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


__all__ = ["LRSchedule", "POLICIES", "SCHEDULE_DEFAULTS", "ScheduleHyperparameters", "burn_in_outlasts_run", "scaled_burn_in",
           "rate_warnings", "read_net_schedule", "resolve_steps", "schedule_from_hyp", "set_lr"]
