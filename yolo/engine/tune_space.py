"""The search space of a hyperparameter search (:mod:`yolo.engine.tune`): which keys are drawn, from which range.

Every key has a *declared* range, the values training accepts: :data:`yolo.engine.config.HYP_RANGES` and the
field's type (``int`` or ``float``) of :class:`yolo.engine.config.Hyperparameters` for the top-level keys, and
:data:`AUGMENT_RANGES` (the values :func:`yolo.data.augment_hyp.augment_config` accepts) for the augmentation
strengths, named ``augment.KEY``, and :data:`GAIN_RANGE` for the loss gains of the cfg's ``[yolo]`` heads,
named ``gain.KEY`` (multipliers of each head's own value: :mod:`yolo.engine.tune_gains`). The search draws from
a narrower *default* range (:data:`DEFAULT_SPACE`) that a YAML file (``--space``) narrows, widens within the
declared range, extends with other keys or empties::

    learning_rate: [0.001, 0.05]      # drawn log-uniformly (the default for the learning rate and the decay)
    burn_in: [0, 200]                  # an int key draws ints
    augment.hue: [0.0, 0.05]           # or nested: augment: {hue: [0.0, 0.05]}
    gain.obj_normalizer: [0.5, 2.0]    # times each [yolo] head's obj_normalizer (log-uniform by default)
    momentum: {low: 0.8, high: 0.95, log: false}
    decay: null                        # not searched (the cfg's / --hyp's value stands)

An unknown key, a key that is not a number, or a range outside the declared one is a one-line
:class:`~yolo.errors.ConfigError` naming the file and line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

from yolo.engine.config import HYP_RANGES, Hyperparameters
from yolo.engine.tune_gains import GAIN_DEFAULTS, GAIN_PREFIX, is_gain
from yolo.errors import ConfigError, shown
from yolo.files.yaml_files import load_yaml, yaml_problem


@dataclass(frozen=True)
class Param:
    """One searched key: ``key`` (``learning_rate``, ``augment.hue``), ``kind`` (``int`` or ``float``), the range
    ``[low, high]`` it is drawn from, log-uniformly when ``log``."""

    key: str
    kind: type
    low: float
    high: float
    log: bool = False


# The augmentation strengths a search may draw (yolo.data.transforms: augment_config's checks): (low, high,
# whether high itself is refused). hue, saturation and exposure are Darknet's; scale and translate the affine
# pipeline's (a search over Darknet's pipeline leaves them out).
AUGMENT_RANGES: Dict[str, Tuple[float, float, bool]] = {
    "hue": (0.0, 0.5, False),          # a shift of up to half the hue circle
    "saturation": (1.0, math.inf, False),  # s and 1/s are one range (rand_scale): the search draws s >= 1
    "exposure": (1.0, math.inf, False),
    "jitter": (0.0, 0.5, True),         # a crop side moved by half the image or more leaves nothing
    "flip": (0.0, 1.0, False),          # a probability
    "scale": (0.0, 1.0, True),
    "translate": (0.0, 1.0, True),
    "degrees": (0.0, 180.0, False),
    "mosaic": (0.0, 1.0, False),
}
AFFINE_ONLY = ("scale", "translate", "degrees", "mosaic")

# The multiplier of a loss gain. Darknet declares no range for the gains (parse_yolo reads any float) and our cfg
# option table none either; a negative gain turns its term's gradient round, 0 switches the term off, and beyond
# ten times its value one term drowns the other two.
GAIN_RANGE: Tuple[float, float, bool] = (0.0, 10.0, False)
# Searched by default from a quarter to four times the cfg's value, log-uniformly: about the span of the box,
# objectness and class gains in Ultralytics' YOLOv5 evolve space (box 0.02-0.2 about 0.05, obj 0.2-4 about 1).
GAIN_DEFAULT_SPACE = (0.25, 4.0)

# The usual keys and the ranges a search draws them from by default.
DEFAULT_SPACE: Tuple[Param, ...] = (
    Param("learning_rate", float, 1e-4, 1e-1, log=True),
    Param("momentum", float, 0.6, 0.98),
    Param("decay", float, 1e-5, 1e-2, log=True),
    Param("burn_in", int, 0, 100),  # updates: a trial is short, and a burn-in past its end leaves it untrained
    Param("augment.hue", float, 0.0, 0.1),
    Param("augment.saturation", float, 1.0, 2.0),
    Param("augment.exposure", float, 1.0, 2.0),
    Param("augment.jitter", float, 0.0, 0.3),
    Param("augment.flip", float, 0.0, 0.5),
    Param("augment.scale", float, 0.0, 0.5),
    Param("augment.translate", float, 0.0, 0.2),
    *(Param(GAIN_PREFIX + key, float, *GAIN_DEFAULT_SPACE, log=True) for key in GAIN_DEFAULTS),
)
_LOG_BY_DEFAULT = ("learning_rate", "decay", *(GAIN_PREFIX + key for key in GAIN_DEFAULTS))
_KIND = {f.name: f.type for f in fields(Hyperparameters)}


def declared_range(key: str) -> Optional[Tuple[type, float, float, bool]]:
    """``(kind, low, high, high_refused)`` of a searchable ``key``; None for a key that is not one."""
    if key.startswith("augment."):
        known = AUGMENT_RANGES.get(key[len("augment."):])
        return None if known is None else (float, *known)
    if is_gain(key):
        return (float, *GAIN_RANGE) if key[len(GAIN_PREFIX):] in GAIN_DEFAULTS else None
    kind = {"int": int, "float": float}.get(str(_KIND.get(key, "")).replace("Optional[", "").rstrip("]"))
    if kind is None or key not in HYP_RANGES:
        return None
    low, high, _ = HYP_RANGES[key]
    return kind, low, high, key in ("momentum", "decay", "B1", "B2")


def searchable_keys() -> List[str]:
    """Every key a space file may name."""
    keys = [k for k in HYP_RANGES if declared_range(k) is not None]
    return keys + [f"augment.{k}" for k in AUGMENT_RANGES] + [GAIN_PREFIX + k for k in GAIN_DEFAULTS]


def default_space(pipeline: str, gains: bool = True) -> List[Param]:
    """:data:`DEFAULT_SPACE` for the augmentation ``pipeline`` the trials run (``affine``, ``darknet``, ...), the
    loss gains left out unless ``gains`` (the cfg has a ``[yolo]`` head)."""
    return [p for p in DEFAULT_SPACE
            if (pipeline == "affine" or p.key[len("augment."):] not in AFFINE_ONLY) and (gains or not is_gain(p.key))]


def read_space(path: Optional[str], pipeline: str, gains: bool = True) -> List[Param]:
    """The search space: :func:`default_space` changed by the YAML file ``path`` (None: the defaults)."""
    space = {p.key: p for p in default_space(pipeline, gains)}
    if path is None:
        return list(space.values())
    for key, value, line in _entries(Path(path)):
        where = f"{path}:{line}"
        declared = declared_range(key)
        if declared is None:
            raise ConfigError(f"{where}: '{shown(key)}' cannot be searched (searchable: "
                              f"{', '.join(searchable_keys())})")
        if value is None or value is False:
            space.pop(key, None)
            continue
        if key[len("augment."):] in AFFINE_ONLY and pipeline != "affine":
            raise ConfigError(f"{where}: {key} belongs to the affine augmentation pipeline; the trials run "
                              f"'{pipeline}' (set augment: {{pipeline: affine}} in --hyp)")
        if is_gain(key) and not gains:
            raise ConfigError(f"{where}: {key}: the cfg has no [yolo] or [Gaussian_yolo] head whose "
                              f"{key[len(GAIN_PREFIX):]} it could scale")
        space[key] = _param(key, value, declared, where)
    return list(space.values())


def _param(key: str, value: Any, declared: Tuple[type, float, float, bool], where: str) -> Param:
    """A :class:`Param` from a space entry (``[low, high]`` or ``{low, high, log}``), checked against ``declared``."""
    kind, low_limit, high_limit, high_refused = declared
    log = key in _LOG_BY_DEFAULT
    if isinstance(value, Mapping):
        extra = set(value) - {"low", "high", "log"}
        if extra or not {"low", "high"} <= set(value):
            raise ConfigError(f"{where}: {key} takes [low, high] or {{low: ..., high: ..., log: true/false}}")
        log = value.get("log", log)
        if not isinstance(log, bool):
            raise ConfigError(f"{where}: {key}: log={shown(repr(log))} is not true or false")
        value = [value["low"], value["high"]]
    if isinstance(value, list):  # PyYAML reads 1e-3 and 1.0e25 (no '.' or no sign) as text, as --hyp takes them
        value = [_number_text(v) for v in value]
    if not (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise ConfigError(f"{where}: {key}={shown(repr(value))}: give the range as [low, high] (or null to leave "
                          f"it out of the search)")
    low, high = value
    if kind is int and (low != int(low) or high != int(high)):
        raise ConfigError(f"{where}: {key} is an integer: its range [{low}, {high}] must be whole numbers")
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ConfigError(f"{where}: {key}: [{low}, {high}] is not a range (low <= high, finite)")
    if low < low_limit or high > high_limit or (high_refused and high >= high_limit):
        limit = f"below {high_limit:g}" if high_refused else f"at most {high_limit:g}"
        raise ConfigError(f"{where}: {key}: [{low:g}, {high:g}] is outside its declared range (at least "
                          f"{low_limit:g} and {limit})")
    if log and low <= 0:
        raise ConfigError(f"{where}: {key}: a log-uniform range must start above 0 (got {low:g}); "
                          f"write {{low: {low:g}, high: {high:g}, log: false}}")
    return Param(key, kind, kind(low), kind(high), log)


def _number_text(value: Any) -> Any:
    """A text that is a number (``1e-3``) as that number; anything else as it is."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _entries(path: Path) -> List[Tuple[str, Any, int]]:
    """``(key, value, line)`` of each entry of the space file, ``augment: {...}`` flattened to ``augment.KEY`` (and
    ``gain: {...}`` to ``gain.KEY``)."""
    if not path.is_file():
        raise ConfigError(f"{path}: search space file not found")
    try:
        data = load_yaml(path)
        root = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        problem, line = yaml_problem(exc)
        raise ConfigError(f"{path}:{line}: not valid YAML: {shown(problem)}" if line is not None
                          else f"{path}: not valid YAML: {shown(problem)}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {shown(exc)}") from None
    if data is None:
        return []
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: a search space is a mapping of key: [low, high]")
    lines = {str(k.value): (k.start_mark.line + 1, v) for k, v in root.value}
    entries = []
    for key, value in data.items():
        line, node = lines.get(str(key), (1, None))
        if key in ("augment", "gain") and isinstance(value, dict):
            inner = {str(k.value): k.start_mark.line + 1 for k, _ in node.value} if node is not None else {}
            entries += [(f"{key}.{k}", v, inner.get(str(k), line)) for k, v in value.items()]
        else:
            entries.append((str(key), value, line))
    return entries


__all__ = ["AUGMENT_RANGES", "DEFAULT_SPACE", "GAIN_RANGE", "Param", "declared_range", "default_space", "read_space",
           "searchable_keys"]
