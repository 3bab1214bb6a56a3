"""The loss gains of a hyperparameter search (:mod:`yolo.engine.tune`): a trial's own copy of the cfg.

The gains are keys of the cfg's ``[yolo]`` (and ``[Gaussian_yolo]``) sections, not of ``--hyp``: Darknet's
src/parser.c (``parse_yolo``, ``parse_gaussian_yolo``) reads ``iou_normalizer`` (default 0.75), ``obj_normalizer``
(1) and ``cls_normalizer`` (1) per head, and :mod:`yolo.losses` scales the box, objectness and class deltas by them.
A search draws ``gain.iou_normalizer``, ``gain.obj_normalizer`` and ``gain.cls_normalizer`` as *multipliers* of
each head's own value (Darknet's default where the head leaves the key out), so a trial writes its own cfg with
those keys set to ``value * multiplier``, trains from it, and the best trial's cfg is ``best.cfg``.

Why multipliers and not one value for every head: a cfg's gains belong to its box loss (yolov3's ``mse`` keeps
Darknet's 0.75; yolov4's ``ciou`` heads set 0.07), and a cfg may give its heads different ones; a multiplier
keeps both, and its range means the same for every cfg.

The copy differs from the cfg only on those keys' lines (the value rewritten, a trailing comment kept), or by one
``key=value`` line after a head's header where the head did not set the key; every other byte is the cfg's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Mapping, Sequence

from yolo.files.atomic import write_bytes_atomic
from yolo.errors import CfgError
from yolo.models.cfg import Section, parse_cfg, parse_cfg_text
from yolo.models.head_sections import LOSS_GAIN_HEADS

GAIN_PREFIX = "gain."
# The gain keys with Darknet's defaults (parse_yolo and parse_gaussian_yolo read the same ones).
GAIN_DEFAULTS: Dict[str, float] = {"iou_normalizer": 0.75, "obj_normalizer": 1.0, "cls_normalizer": 1.0}
_ENCODING = ("utf-8", "surrogateescape")  # any byte of the cfg, UTF-8 or not, is written back as it was


def is_gain(key: str) -> bool:
    """Whether the searched ``key`` is a loss gain (``gain.iou_normalizer``, ...)."""
    return key.startswith(GAIN_PREFIX)


def gain_multipliers(params: Mapping[str, float]) -> Dict[str, float]:
    """The gain multipliers of a trial's ``params``, by cfg key (``{"iou_normalizer": 1.7, ...}``)."""
    return {k[len(GAIN_PREFIX):]: float(v) for k, v in params.items() if is_gain(k)}


def gain_heads(sections: Sequence[Section]) -> List[Section]:
    """The sections whose gains a search scales."""
    return [s for s in sections if s.type in LOSS_GAIN_HEADS]


def has_gain_heads(cfg: Path) -> bool:
    """Whether the cfg file has a head whose gains a search can scale; True when it cannot be read (its one-line
    error then comes from the first trial's training, as any cfg's)."""
    try:
        return bool(gain_heads(parse_cfg(cfg)))
    except CfgError:
        return True


def cfg_with_gains(text: str, multipliers: Mapping[str, float], source: str = "<cfg>") -> str:
    """``text`` (a cfg) with each head's gain ``key`` of ``multipliers`` set to its value times the multiplier.

    A head's value is the one Darknet reads (the first of a repeated key); a bad value is the parser's one-line
    :class:`~yolo.errors.CfgError`. Written with 6 significant digits."""
    heads = iter(gain_heads(parse_cfg_text(text, source)))
    out: List[str] = []
    head = None
    done: set = set()
    for raw in text.splitlines(keepends=True):
        line = "".join(ch for ch in raw if not ch.isspace() and ch != "\0").lstrip("\ufeff")
        if line.startswith("["):
            head = next(heads) if line[1:-1].lower() in LOSS_GAIN_HEADS else None
            done = set()
            out.append(raw)
            if head is not None:  # the keys this head leaves out, right after its header
                ending = raw[len(raw.rstrip("\r\n")):]
                if not ending:  # a header without its line end (the last line)
                    ending = "\n"
                    out[-1] = raw + ending
                out += [f"{key}={_value(head, key, m)}{ending}" for key, m in multipliers.items()
                        if key not in head.options]
            continue
        key = line.split("=", 1)[0] if "=" in line and line[0] not in "#;" else None
        if head is not None and key in multipliers and key not in done:
            done.add(key)
            raw = _with_value(raw, _value(head, key, multipliers[key]))
        out.append(raw)
    return "".join(out)


def _value(head: Section, key: str, multiplier: float) -> str:
    return f"{head.get_float(key, GAIN_DEFAULTS[key]) * multiplier:.6g}"


def _with_value(raw: str, value: str) -> str:
    """The option line ``raw`` with its value replaced (its indent, ``=`` spacing, comment and line end kept)."""
    body = raw.rstrip("\r\n")
    ending = raw[len(body):]
    equals = body.index("=") + 1
    start = len(body) - len(body[equals:].lstrip())
    comment = body.find("#", start)
    end = len(body[:comment if comment >= 0 else len(body)].rstrip())
    return f"{body[:start]}{value}{body[end:]}{ending}"


def write_cfg_with_gains(cfg: Path, multipliers: Mapping[str, float], path: Path) -> Path:
    """:func:`cfg_with_gains` of the file ``cfg`` written to ``path``, atomically."""
    text = Path(cfg).read_bytes().decode(*_ENCODING)
    return write_bytes_atomic(path, cfg_with_gains(text, multipliers, str(cfg)).encode(*_ENCODING))


__all__ = ["GAIN_DEFAULTS", "GAIN_PREFIX", "cfg_with_gains", "gain_heads", "gain_multipliers",
           "has_gain_heads", "is_gain", "write_cfg_with_gains"]
