"""Training settings: the hyperparameters resolved from cfg, YAML and flags (the command-line options,
:class:`TrainOptions`, are declared in :mod:`yolo.settings.train`).

Hyperparameters come from three places, each overriding the one before:

0. options Darknet would train with but that are not reproduced here stop the run at start, with the cfg's
   file and line (:mod:`yolo.models.cfg_options` lists every ``[net]``/``[yolo]``/``[region]`` key and its fate);
1. the cfg's ``[net]`` section (Darknet's own keys: ``batch``, ``subdivisions``, ``learning_rate``,
   ``momentum``, ``decay``, ``adam`` with ``B1``/``B2``/``eps``, the schedule keys (``burn_in``, ``power``,
   ``policy``, ``steps``, ``scales``, ``step``, ``scale``, ``gamma``, ``max_batches``, ``learning_rate_min``,
   ``sgdr_cycle``, ``sgdr_mult``; see :func:`yolo.engine.schedule.read_net_schedule`),
   ``width``/``height``, and the augmentation keys ``saturation``, ``exposure``,
   ``hue``, ``flip``, ``mosaic``; ``jitter`` and ``random`` from the first ``[yolo]``);
2. a hyperparameter YAML (``--hyp``) with the same names plus the trainer's own keys (:class:`Hyperparameters`);
3. command-line flags (``--epochs``, ``--batch-size``, ``--img-size``).

``batch`` is Darknet's: images per optimizer update over all processes; ``subdivisions`` splits it into
mini-batches whose gradients are accumulated (a ``batch`` that is not a multiple of ``subdivisions`` is
rounded down to one, as Darknet's integer ``batch / subdivisions`` does). With ``N`` processes each one loads
``batch / (subdivisions * N)`` images per mini-batch.
"""
from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import yaml

from yolo.counts import MAX_BATCH, MAX_IMAGE_SIDE
from yolo.data.augment_hyp import augment_from_cfg
from yolo.engine.schedule import SCHEDULE_DEFAULTS, LRSchedule, ScheduleHyperparameters, read_net_schedule, resolve_steps
from yolo.errors import ConfigError, shown
from yolo.files.yaml_files import load_yaml, yaml_problem
from yolo.models.cfg_options import check_training_options, last_head
from yolo.ops.postprocess_defaults import EVAL_CONF_THRES, EVAL_IOU_THRES
from yolo.ops.sizes import ImageSize, check_stride, image_size
from yolo.settings.declare import declared
from yolo.settings.values import MAX_WORKERS
from yolo.settings.train import TrainOptions  # declared with its flags; here for `from yolo.engine import TrainOptions`

logger = logging.getLogger(__name__)

@dataclass
class Hyperparameters(ScheduleHyperparameters):
    """Every training setting, resolved from ``[net]``, ``--hyp`` and the flags (:func:`resolve_hyp`).

    The field order is ``hyp.yaml``'s. Code that also takes a plain dict (a saved run's ``hyp.yaml``) reads
    it as a mapping: ``hyp["batch"]``, ``hyp.get("burn_in", 0)``.
    """

    # Darknet's [net] schedule keys come from ScheduleHyperparameters (yolo.engine.schedule), with Darknet's defaults.
    # Darknet's [net] update keys (parse_net_options); B1, B2 and eps are read only with adam=1.
    batch: int = 1  # images per update over all processes
    subdivisions: int = 1  # mini-batches per update (gradient accumulation)
    adam: int = 0
    momentum: float = 0.9
    decay: float = 0.0001
    B1: float = 0.9
    B2: float = 0.999
    eps: float = 0.000001
    img_size: ImageSize = (416, 416)  # (height, width); [net] height, width; hyp.yaml holds [height, width]
    # The trainer's own settings (Darknet's [net] does not have them).
    epochs: Optional[int] = None  # None: enough epochs to reach max_batches updates
    max_steps_per_epoch: Optional[int] = None  # cap on optimizer updates per epoch (None: the whole split)
    # None: the cfg's random (Darknet's rule; resolved to {"random": r, "resize_step": s} or False);
    # true: ours (multi_scale_range)
    multi_scale: Union[None, bool, Dict[str, Any]] = None
    multi_scale_range: List[float] = field(default_factory=lambda: [0.7, 1.3])  # input side factor range
    multi_scale_every: int = 10  # mini-batches between size changes (Darknet: 10)
    augment: Dict[str, Any] = field(default_factory=dict)  # yolo.data.transforms settings (hue, mosaic, ...)
    ema: bool = False  # our improvement, off for Darknet's training: evaluate/save an EMA of the weights
    ema_decay: float = 0.9999
    ema_tau: float = 2000.0
    amp: bool = True  # mixed precision on CUDA (ignored on the CPU)
    channels_last: Optional[bool] = None  # None: with amp on CUDA (yolo.engine.step_precision); the CPU: NCHW
    tf32: bool = False  # TF32 on CUDA: faster, but not Darknet's float32 step (gradients differ by ~5%)
    compile: bool = False  # the training forward through torch.compile (falls back with a warning)
    head_prior: bool = False  # our improvement: fresh heads' objectness/class biases start at a prior (Darknet: 0)
    # our improvement: in a run shorter than max_batches, burn_in keeps its share of max_batches (Darknet: burn_in
    # updates whatever the run's length; yolo.engine.schedule.scaled_burn_in)
    scale_burn_in: bool = False
    bn_momentum: Optional[float] = None  # None: Darknet's 0.01 per batch
    max_grad_norm: Optional[float] = None  # clip the gradient norm (None: no clipping, as Darknet)
    conf_thres: float = EVAL_CONF_THRES  # evaluation thresholds (COCO-style mAP)
    iou_thres: float = EVAL_IOU_THRES
    eval_interval: int = 1  # evaluate every N epochs (and always after the last)
    darknet_map: bool = False  # every evaluation also Darknet's detector map mAP@0.50 (results.csv darknet_mAP50)
    tensorboard: bool = True
    plots: bool = True  # results.png (redrawn every 30 s at most, and at the end); PR curves, confusion matrix
    tb_images: int = 4  # validation images with the boxes detect.py would draw, logged each evaluation
    workers: Optional[int] = None  # data-loading processes (None: automatic)
    cache_images: bool = False  # decode the train images once, keep them in memory where they fit (same items)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def to_dict(self) -> Dict[str, Any]:
        """Plain types, as ``hyp.yaml`` and checkpoints hold them (``img_size`` as ``[height, width]``: YAML's
        safe dumper has no tuples)."""
        values = asdict(self)
        values["img_size"] = list(self.img_size)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "hyp") -> "Hyperparameters":
        """From :meth:`to_dict`'s output (a saved run's, ``where``: its file, for the errors). A saved
        ``img_size`` (``[height, width]``, or one side in a run saved by an older version) becomes an
        :data:`~yolo.ops.sizes.ImageSize` here, where it enters."""
        kept = {k: v for k, v in values.items() if k in _FIELDS}
        if "img_size" in kept:
            kept["img_size"] = image_size(kept["img_size"], f"{where}: img_size")
        return cls(**kept)

    @classmethod
    def from_saved(cls, values: Any, where: str) -> "Hyperparameters":
        """A saved run's values (a checkpoint's ``hyp``) checked as a ``--hyp`` file's are: the types of the
        fields and :data:`HYP_RANGES`; a value out of them is a :class:`ConfigError` naming ``where``. The size
        becomes an ``ImageSize`` as in :meth:`from_dict`."""
        if not isinstance(values, Mapping):
            raise ConfigError(f"{where}: not a mapping of hyperparameters")
        typed = {key: _typed(key, value, where) for key, value in values.items() if key in _FIELDS}
        check_ranges(typed, lambda key: where)
        return cls.from_dict(typed, where)


_FIELDS = {f.name: f for f in fields(Hyperparameters)}
# The keys Darknet's [net] does not have.
TRAINER_KEYS = tuple(_FIELDS)[tuple(_FIELDS).index("epochs"):]
# The flag that overrides each hyperparameter it names (batch: --batch-size), as TrainOptions declares it.
_FLAG_OF = {flag.overrides: flag.name for _, flag in declared(TrainOptions) if flag.overrides}


def read_hyp(hyp: Union[str, Path, Mapping[str, Any], None]) -> Dict[str, Any]:
    """A hyperparameter dict from a YAML path, a mapping, or None."""
    if hyp is None:
        return {}
    if isinstance(hyp, Mapping):
        return dict(hyp)
    path = Path(hyp)
    if not path.is_file():
        raise ConfigError(f"{path}: hyperparameter file not found")
    try:
        data = load_yaml(path) or {}
    except yaml.YAMLError as exc:
        problem, line = yaml_problem(exc)
        where = f"{path}:{line}" if line is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {shown(problem)}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {shown(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a hyperparameter file must be a mapping of key: value")
    return data


def resolve_hyp(net, heads: Sequence, hyp_source: Union[str, Path, Mapping[str, Any], None],
                flags: Mapping[str, Any], stride: Optional[int] = None) -> Hyperparameters:
    """Hyperparameters from ``[net]`` (``net`` Section), the ``[yolo]`` ``heads`` sections, a YAML and flags.

    ``flags`` may hold ``epochs``, ``batch``, ``img_size``, ``workers``, ``tf32``, ``compile`` and ``cache_images``
    (None values are ignored).
    ``img_size`` comes out as ``(h, w)`` (:func:`yolo.ops.sizes.image_size`), a multiple of the network's
    ``stride`` when one is given, and ``augment`` as the full augmentation settings of
    :func:`yolo.data.augment_hyp.augment_from_cfg`. A bad value is a one-line :class:`ConfigError` naming the
    YAML (or the cfg's file and line for a [net] key).
    """
    where = str(hyp_source) if isinstance(hyp_source, (str, Path)) else "hyp"
    user = read_hyp(hyp_source)
    # Every option Darknet would train with is either reproduced or refused here (yolo.models.cfg_options);
    # a --hyp that names our own replacement (multi_scale, augment.mosaic) accepts the cfg key.
    check_training_options([net, *heads], user)
    hyp: Dict[str, Any] = read_net_schedule(net)
    for key in ("batch", "subdivisions", "adam"):
        hyp[key] = net.get_int(key, _FIELDS[key].default)
    for key in ("momentum", "decay"):
        hyp[key] = net.get_float(key, _FIELDS[key].default)
    for key in ("B1", "B2", "eps"):  # Darknet reads them only with adam=1
        hyp[key] = net.get_float(key, _FIELDS[key].default) if hyp["adam"] else _FIELDS[key].default
    hyp["img_size"] = (net.get_int("height", 416), net.get_int("width", 416))
    defaults = Hyperparameters()
    hyp.update({k: getattr(defaults, k) for k in TRAINER_KEYS})

    known = set(hyp) | {"img_size"}
    unknown = sorted(set(user) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown hyperparameters {unknown} (known: {', '.join(sorted(known))})")
    hyp.update(user)
    for key, value in flags.items():
        if value is not None:
            hyp[key] = value

    # Types (from the fields of Hyperparameters) and ranges.
    for key, value in hyp.items():
        hyp[key] = _typed(key, value, _origin(key, user, flags, net, where))
    check_ranges(hyp, lambda key: _origin(key, user, flags, net, where))
    for key in ("steps", "scales"):
        hyp[key] = _number_list(key, hyp[key], _origin(key, user, flags, net, where))
    _check_rate_signs(hyp, lambda key: _origin(key, user, flags, net, where))
    try:  # the schedule's own checks (policy name, steps against scales, ...) on the merged values;
        # a run without max_batches gets its length later (from --epochs): 1 stands in for it here
        check = {k: hyp[k] for k in SCHEDULE_DEFAULTS}
        check["max_batches"] = hyp["max_batches"] or 1
        check["sgdr_cycle"] = hyp["sgdr_cycle"] or check["max_batches"]
        check["steps"] = resolve_steps(hyp["steps"], check["max_batches"])
        LRSchedule(**check)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    size_source = _img_size_source(user, flags, net, where)
    size = image_size(hyp["img_size"], size_source)
    if max(size) > MAX_IMAGE_SIDE:
        raise ConfigError(f"{_origin('img_size', user, flags, net, where)}: img_size={list(size)} is out of range: "
                          f"each side must be between 1 and {MAX_IMAGE_SIDE:,}")
    if stride is not None:
        check_stride(size, stride, size_source)
    hyp["img_size"] = size
    if hyp["batch"] < 1 or hyp["subdivisions"] < 1:
        raise ConfigError(f"batch={hyp['batch']} and subdivisions={hyp['subdivisions']} must be positive")
    if hyp["batch"] % hyp["subdivisions"]:  # Darknet: mini-batch = batch / subdivisions, rounded down
        whole = hyp["batch"] // hyp["subdivisions"] * hyp["subdivisions"]
        if whole < 1:
            raise ConfigError(_batch_below_subdivisions(hyp, user, flags, net, where))
        logger.warning("batch=%d is not a multiple of subdivisions=%d: an update takes %d images, as in Darknet",
                       hyp["batch"], hyp["subdivisions"], whole)
        hyp["batch"] = whole
    if hyp["epochs"] is None and hyp["max_batches"] <= 0:
        raise ConfigError("the run length is unknown: give --epochs (or epochs in --hyp), or max_batches in [net]")
    if not isinstance(hyp["augment"], dict):
        raise ConfigError(f"{where}: 'augment' must be a mapping of augmentation settings")
    hyp["multi_scale"] = _multi_scale(hyp["multi_scale"], net, heads, where)
    hyp["multi_scale_range"] = _multi_scale_range(hyp["multi_scale_range"],
                                                  _origin("multi_scale_range", user, flags, net, where))
    try:
        hyp["augment"] = augment_from_cfg(net, heads, overrides=hyp["augment"])
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    _check_min_side(hyp["augment"], size, where)
    return Hyperparameters(**hyp)


# The optimizer steps in float32 (largest 3.4e38): a rate past this overflows in its arithmetic (learning_rate: 1e308
# was an OverflowError from deep in torch); any real rate is far below (Darknet's cfgs: 0.0001 to 0.1).
MAX_LEARNING_RATE = 1e30
# The numeric hyperparameters with a range (low, high, in words); those in _BELOW must stay under high.
HYP_RANGES = {
    "learning_rate": (0.0, MAX_LEARNING_RATE, f"between 0 and {MAX_LEARNING_RATE:g}"),
    "momentum": (0.0, 1.0, "at least 0 and below 1"),
    "decay": (0.0, 1.0, "at least 0 and below 1"),
    "B1": (0.0, 1.0, "at least 0 and below 1"),
    "B2": (0.0, 1.0, "at least 0 and below 1"),
    "eps": (1e-30, 1.0, "above 0 and at most 1"),
    "batch": (1, MAX_BATCH, f"between 1 and {MAX_BATCH:,}"),
    "subdivisions": (1, MAX_BATCH, f"between 1 and {MAX_BATCH:,}"),
    "ema_decay": (0.0, 1.0, "between 0 and 1"),
    "bn_momentum": (0.0, 1.0, "between 0 and 1"),
    "max_grad_norm": (1e-30, math.inf, "above 0"),
    "conf_thres": (0.0, 1.0, "between 0 and 1"),
    "iou_thres": (0.0, 1.0, "between 0 and 1"),
    "multi_scale_every": (1, math.inf, "at least 1"),
    "eval_interval": (1, math.inf, "at least 1"),
    "tb_images": (0, 1000, "between 0 and 1000"),
    "ema_tau": (1e-30, math.inf, "above 0"),
    "epochs": (1, math.inf, "at least 1"),
    "burn_in": (0, math.inf, "0 or more"),
    "max_batches": (0, math.inf, "0 or more"),
    "max_steps_per_epoch": (1, math.inf, "at least 1 (leave it out, or null, for no cap)"),
    "workers": (0, MAX_WORKERS, f"between 0 and {MAX_WORKERS} (as --workers)"),
}
_BELOW = ("momentum", "decay", "B1", "B2")


def check_ranges(hyp: Mapping[str, Any], origin: Callable[[str], str]) -> None:
    """Refuse a value of ``hyp`` outside :data:`HYP_RANGES`, naming where it came from (``origin(key)``)."""
    for key, (low, high, text) in HYP_RANGES.items():
        value = hyp.get(key)
        if value is not None and not (low <= value and (value < high if key in _BELOW else value <= high)):
            raise ConfigError(f"{origin(key)}: {key}={value!r} is out of range: it must be {text}")


def _origin(key: str, user: Mapping[str, Any], flags: Mapping[str, Any], net, where: str) -> str:
    """Where the value of ``key`` came from: a flag, the --hyp file, else the cfg's [net] line."""
    if flags.get(key) is not None:
        return _FLAG_OF.get(key, f"--{key.replace('_', '-')}")
    if key in user:
        return where
    return f"{net.source}:{net.option_lines.get(key, net.line)}" if hasattr(net, "option_lines") else where


def _img_size_source(user: Mapping[str, Any], flags: Mapping[str, Any], net, where: str) -> str:
    """Where ``img_size`` came from, for its errors: ``--img-size``, the --hyp file's key, else the cfg's [net]."""
    if flags.get("img_size") is not None:
        return _FLAG_OF["img_size"]
    if "img_size" in user:
        return f"{where}: img_size"
    return f"{_origin('height', user, flags, net, where)}: [net] height, width"


def _typed(key: str, value: Any, where: str) -> Any:
    """``value`` as the type of field ``key``: ``int``, ``float`` and ``bool`` fields (and their Optional
    forms) are converted; the other fields are checked later. A count is a whole number (4.0 is 4, 4.9 is
    refused rather than cut to 4), a boolean is YAML's true/false (or 0/1), and neither is a YAML boolean
    read as a number or a text such as 'false' read as true."""
    kind = _FIELDS[key].type
    optional = kind.startswith("Optional[")
    base = kind[len("Optional["):-1] if optional else kind
    convert = {"int": int, "float": float, "bool": bool}.get(base)
    if convert is None or (optional and value is None):
        return value
    if base == "bool":
        return _as_bool(key, value, where)
    kind_text = "an integer" if base == "int" else "a number"
    if isinstance(value, bool):  # YAML's true would otherwise count as 1
        raise ConfigError(f"{where}: {key}={value!r} is not {kind_text}")
    try:
        converted = convert(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: {key}={shown(repr(value))} is not {kind_text}") from None
    if base == "float" and not math.isfinite(converted):
        raise ConfigError(f"{where}: {key}={value!r} is not a finite number")
    if base == "int" and isinstance(value, float) and converted != value:
        raise ConfigError(f"{where}: {key}={value!r} is not a whole number")
    return converted


def _as_bool(key: str, value: Any, where: str) -> bool:
    """A YAML boolean, or the numbers 0 and 1; anything else (the text 'false' among them) is an error."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    raise ConfigError(f"{where}: {key}={shown(repr(value))} is not a boolean (true or false)")


def _number_list(key: str, value: Any, where: str) -> List[float]:
    """``steps`` or ``scales`` as finite floats: one number, a list of numbers, or Darknet's comma-separated
    text ('0.8,0.9')."""
    items = value
    if isinstance(value, str):
        items = [item for item in value.split(",") if item.strip()]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        items = [value]
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{where}: {key}={shown(repr(value))} is not a list of numbers")
    numbers = []
    for item in items:
        try:
            number = float(item) if not isinstance(item, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None:
            raise ConfigError(f"{where}: {key}={shown(repr(value))} holds {shown(repr(item))}, which is not a number")
        if not math.isfinite(number):
            raise ConfigError(f"{where}: {key}={shown(repr(value))} holds {number}, which is not a finite number")
        numbers.append(number)
    return numbers


def _check_rate_signs(hyp: Mapping[str, Any], origin) -> None:
    """Refuse the schedule values that make the learning rate negative (``origin(key)``: where a key's value
    came from). Darknet takes them and trains uphill; a scale or gamma of 0 (a rate of 0 from then on) stays."""
    negative = [s for s in hyp["scales"] if s < 0]
    if negative:
        raise ConfigError(f"{origin('scales')}: scales={hyp['scales']} holds {negative[0]:g}: a negative scale "
                          f"makes the learning rate negative")
    checks = [("scale", hyp["policy"] == "step"), ("gamma", hyp["policy"] == "exp"),
              ("learning_rate_min", hyp["policy"] == "sgdr")]
    for key, used in checks:
        if used and hyp[key] < 0:
            raise ConfigError(f"{origin(key)}: {key}={hyp[key]:g} is out of range: it must be 0 or more "
                              f"(with policy={hyp['policy']} a negative value makes the learning rate negative)")


def _multi_scale_range(value: Any, where: str) -> List[float]:
    """``multi_scale_range`` as ``[low, high]`` with ``0 < low <= 1 <= high`` (factors of the input side,
    :class:`yolo.data.collate.MultiScale`)."""
    pair = list(value) if isinstance(value, (list, tuple)) else None
    numbers = pair is not None and len(pair) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pair)
    if not numbers or not 0 < pair[0] <= 1 <= pair[1]:
        raise ConfigError(f"{where}: multi_scale_range={shown(repr(value))} must be two numbers [low, high] "
                          f"with 0 < low <= 1 <= high (factors of the input side)")
    return [float(pair[0]), float(pair[1])]


def _batch_below_subdivisions(hyp: Mapping[str, Any], user: Mapping[str, Any], flags: Mapping[str, Any], net,
                              where: str) -> str:
    """The message of a ``batch`` smaller than ``subdivisions``, naming where each came from."""
    batch_from = _origin("batch", user, flags, net, where)
    subdivisions_from = _origin("subdivisions", user, flags, net, where)
    also = f" ({subdivisions_from})" if subdivisions_from != batch_from else ""
    return f"{batch_from}: batch={hyp['batch']} is smaller than subdivisions={hyp['subdivisions']}{also}"


def _check_min_side(augment: Mapping[str, Any], size: Sequence[int], where: str) -> None:
    """The affine pipeline keeps a box only when both its sides are at least ``min_side`` pixels: one above
    the input's shorter side would drop every box."""
    if augment["pipeline"] == "affine" and augment["min_side"] > min(size):
        raise ConfigError(f"{where}: augment.min_side={augment['min_side']:g} is larger than the input image "
                          f"({size[0]}x{size[1]}): every box would be dropped")


def _multi_scale(value: Any, net, heads: Sequence, where: str) -> Union[bool, Dict[str, Any]]:
    """``multi_scale`` resolved: ``{"random": r, "resize_step": s}`` for Darknet's rule
    (yolo.data.darknet_multiscale; from the cfg when not named), ``True`` for this framework's own rule
    (uniform in ``multi_scale_range``), ``False`` for none."""
    if value is None:  # the cfg decides, as train_detector: the last head's random (a float), [net] resize_step
        head = last_head(heads)
        random = head.get_float("random", 0.0) if head is not None else 0.0
        if not random:
            return False
        if random < 0:
            raise head.error(f"random={random:g} must not be negative (Darknet would draw sizes below zero)", "random")
        step = int(net.get_float("resize_step", 32))  # Darknet stores the float in an int
        if step < 1:
            raise net.error(f"resize_step={step} must be at least 1 (random={random:g} resizes in its steps)",
                            "resize_step")
        return {"random": random, "resize_step": step}
    if isinstance(value, dict):  # a saved run's resolved value
        if set(value) != {"random", "resize_step"} or not value["random"] or int(value["resize_step"]) < 1:
            raise ConfigError(f"{where}: multi_scale as a mapping needs random (non-zero) and resize_step (>= 1), "
                              f"got {value}")
        return {"random": float(value["random"]), "resize_step": int(value["resize_step"])}
    return _as_bool("multi_scale", value, where)


__all__ = ["ConfigError", "Hyperparameters", "TRAINER_KEYS", "TrainOptions", "read_hyp", "resolve_hyp"]
