"""Transfer learning: start a model from Darknet ``.weights`` or a ``.pt`` whose heads may not fit, and freeze layers.

:func:`load_pretrained` copies every tensor that fits and says what it did not copy:

* a ``.pt`` checkpoint: tensors are matched by name and shape;
* a Darknet ``.weights`` file holds no shapes, only floats in cfg order, so it is read with the cfg it was
  written for. That is the model's own cfg when the float count matches; the first ``cutoff`` layers of it
  for a partial file (``darknet53.conv.74``-style, found by itself when the file ends on a layer boundary);
  or the same cfg with another class count in the heads (e.g. the COCO file for an 80-class cfg loaded into
  a 5-class one), found by solving the float count for the class count. Tensors are then matched by name
  and shape as for a ``.pt``.

The :class:`TransferReport` lists the re-initialized tensors by layer, so a user sees which heads start
from scratch.
"""
from __future__ import annotations

import copy
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.checkpoint import check_finite_state, check_float_weights, load_checkpoint_file
from yolo.models.model import Darknet
from yolo.models.weights import float_count, layer_tensors, read_header
from yolo.errors import WeightsError

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
_LAYER_KEY = re.compile(r"(?:^|\.)module_list\.(\d+)\.")


def layer_of(key: str) -> Optional[int]:
    """The Darknet layer index of a state-dict key (``module_list.15.conv.weight`` -> 15)."""
    m = _LAYER_KEY.search(key)
    return int(m.group(1)) if m else None


@dataclass
class TransferReport:
    """What :func:`load_pretrained` copied into the model.

    ``loaded``: state-dict keys copied; ``reinitialized``: ``(key, source shape, model shape)`` for tensors
    whose shapes differ (left as initialized); ``missing``: model keys the source does not have (left as
    initialized); ``unexpected``: source keys the model does not have; ``source_classes``: the class count
    the source was trained for (when known); ``cutoff``: layers read from a partial Darknet file.
    """

    source: str
    kind: str
    loaded: List[str] = field(default_factory=list)
    reinitialized: List[Tuple[str, Tuple[int, ...], Tuple[int, ...]]] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    unexpected: List[str] = field(default_factory=list)
    source_classes: Optional[int] = None
    cutoff: Optional[int] = None

    @property
    def complete(self) -> bool:
        return not (self.reinitialized or self.missing)

    def reinitialized_layers(self) -> List[int]:
        """Layers with at least one tensor not copied (mismatched or missing), sorted."""
        keys = [k for k, _, _ in self.reinitialized] + self.missing
        return sorted({i for i in (layer_of(k) for k in keys) if i is not None})

    def summary(self) -> str:
        what = f"{self.source} ({self.kind}"
        what += f", trained for {self.source_classes} classes" if self.source_classes is not None else ""
        what += f", first {self.cutoff} layers" if self.cutoff is not None else ""
        lines = [f"loaded {len(self.loaded)} tensors from {what})"]
        if self.reinitialized:
            by_layer: Dict[Optional[int], List[str]] = {}
            for key, src, dst in self.reinitialized:
                by_layer.setdefault(layer_of(key), []).append(
                    f"{key.split('.', 2)[-1]} {tuple(src)} -> {tuple(dst)}")
            for layer, items in sorted(by_layer.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
                lines.append(f"re-initialized layer {layer} (shape mismatch): {', '.join(items)}")
        if self.missing:
            layers = sorted({layer_of(k) for k in self.missing if layer_of(k) is not None})
            why = "beyond the cutoff" if self.cutoff is not None else "not in the source"
            lines.append(f"{why}, left as initialized: {len(self.missing)} tensors"
                         + (f" in layers {_ranges(layers)}" if layers else ""))
        if self.unexpected:
            lines.append(f"ignored {len(self.unexpected)} source tensors the model does not have")
        return "\n".join(lines)


def _ranges(values: Sequence[int]) -> str:
    out, start, prev = [], None, None
    for v in list(values) + [None]:
        if start is None:
            start = prev = v
        elif v is not None and v == prev + 1:
            prev = v
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = v
    return ", ".join(out)


# ------------------------------------------------------------------------------ state dicts
def transfer_state(model: nn.Module, state: Mapping[str, torch.Tensor], report: TransferReport) -> TransferReport:
    """Copy every tensor of ``state`` whose name and shape match ``model``'s; record the rest in ``report``."""
    own = model.state_dict()
    with torch.no_grad():
        for key, target in own.items():
            if key not in state:
                report.missing.append(key)
                continue
            value = state[key]
            if tuple(value.shape) != tuple(target.shape):
                report.reinitialized.append((key, tuple(value.shape), tuple(target.shape)))
                continue
            target.copy_(value.to(dtype=target.dtype))
            report.loaded.append(key)
    report.unexpected.extend(k for k in state if k not in own)
    return report


# ------------------------------------------------------------------------------ class count
def head_sections(sections: Sequence[Section]) -> List[int]:
    """Positions in ``sections`` of the ``[yolo]``/``[region]`` heads."""
    return [i for i, s in enumerate(sections) if s.type in ("yolo", "region")]


def with_num_classes(sections: Sequence[Section], num_classes: int) -> List[Section]:
    """A copy of cfg ``sections`` whose heads predict ``num_classes`` classes.

    Sets ``classes`` in every ``[yolo]``/``[region]`` section and ``filters`` of the ``[convolutional]``
    right before it (``(classes + 5) * len(mask)`` for yolo, ``(classes + 5) * num`` for region).
    """
    if num_classes < 1:
        raise ValueError(f"num_classes must be positive, got {num_classes}")
    out = copy.deepcopy(list(sections))
    heads = head_sections(out)
    if not heads:
        raise ValueError("the cfg has no [yolo] or [region] head")
    for i in heads:
        head, conv = out[i], out[i - 1]
        if conv.type not in ("convolutional", "conv"):
            raise head.error("the layer before this head is not [convolutional]; cannot change its class count")
        if head.type == "yolo":
            anchors = head.options.get("anchors", "")
            count = len([v for v in anchors.split(",") if v.strip()]) // 2
            mask = head.options.get("mask")
            per_cell = len([v for v in mask.split(",") if v.strip()]) if mask else int(head.options.get("num", count))
        else:
            per_cell = int(head.options.get("num", "1"))
        head.options["classes"] = str(num_classes)
        conv.options["filters"] = str((num_classes + 5) * per_cell)
    return out


def _solve_source_classes(model, floats: int) -> Optional[int]:
    """The class count for which the model's cfg needs exactly ``floats`` weights (None if there is none)."""
    base = model.num_classes
    try:
        n0 = float_count(model)
        n1 = float_count(Darknet(with_num_classes(model.sections, base + 1)))
    except Exception:  # a cfg this rule cannot rewrite
        return None
    per_class = n1 - n0
    if per_class <= 0 or (floats - n0) % per_class:
        return None
    classes = base + (floats - n0) // per_class
    return int(classes) if classes >= 1 else None


def _layer_boundary(model, floats: int) -> Optional[int]:
    """The cutoff ``k`` (layers 0..k-1) whose weights are exactly ``floats`` values, if any."""
    total = 0
    for index, tensors in layer_tensors(model):
        total += sum(t.numel() for t in tensors)
        if total == floats:
            return index + 1
        if total > floats:
            return None
    return None


def _darknet_floats(path: Path) -> int:
    header = read_header(path)
    payload = path.stat().st_size - header.nbytes
    if payload % 4:
        raise WeightsError(f"{path}: {payload} bytes after the header is not a whole number of float32 values")
    return payload // 4


def load_pretrained(model, path: PathLike, cutoff: Optional[int] = None) -> TransferReport:
    """Initialize ``model`` (a :class:`yolo.models.model.Darknet`) from ``path``; see the module docstring.

    Args:
        model: the model to fill (its cfg decides every shape).
        path: a Darknet ``.weights`` file or one of our ``.pt`` checkpoints.
        cutoff: read only layers ``0..cutoff-1`` of a Darknet file (the rest keep their initialization).

    Raises:
        WeightsError: the file is unreadable, or a Darknet file fits neither the cfg, a prefix of it, nor
            the cfg with another class count.
    """
    path = Path(path)
    if path.suffix in (".pt", ".pth"):
        ckpt = load_checkpoint_file(path)
        report = TransferReport(str(path), "checkpoint", source_classes=ckpt.get("num_classes"))
        check_finite_state(ckpt["model"], path)
        check_float_weights(ckpt["model"], model.state_dict(), path)
        return transfer_state(model, ckpt["model"], report)

    floats = _darknet_floats(path)
    if cutoff is not None:
        model.load_darknet_weights(path, cutoff=cutoff)
        report = TransferReport(str(path), "darknet", cutoff=cutoff)
        state = model.state_dict()
        report.loaded = [k for k in state if (layer_of(k) is not None and layer_of(k) < cutoff)]
        report.missing = [k for k in state if k not in set(report.loaded)]
        return report
    if floats == float_count(model):
        model.load_darknet_weights(path)
        return TransferReport(str(path), "darknet", loaded=list(model.state_dict()), source_classes=model.num_classes)
    boundary = _layer_boundary(model, floats)
    if boundary is not None:
        logger.info("%s holds exactly layers 0..%d of the cfg: loading it as a partial file", path, boundary - 1)
        return load_pretrained(model, path, cutoff=boundary)
    classes = _solve_source_classes(model, floats)
    if classes is not None and classes != model.num_classes:
        source = Darknet(with_num_classes(model.sections, classes))
        source.load_darknet_weights(path)
        report = TransferReport(str(path), "darknet", source_classes=classes)
        transfer_state(model, source.state_dict(), report)
        model.darknet_header = source.darknet_header
        return report
    model.load_darknet_weights(path)  # raises with the counts and a hint
    raise WeightsError(f"{path}: does not fit {model.cfg_path}")  # pragma: no cover (the line above raises)


# ------------------------------------------------------------------------------ freezing
def freeze_layers(model: nn.Module, count: int) -> List[str]:
    """Stop gradients for the parameters of layers ``0..count-1``; returns the frozen parameter names.

    The BatchNorm statistics of those layers are kept fixed too when :func:`frozen_to_eval` is applied after
    each ``model.train()``.
    """
    layers = model.module_list
    if not 0 <= count <= len(layers):
        raise ValueError(f"--freeze {count} is out of range: the model has {len(layers)} layers "
                         f"(0..{len(layers) - 1}); --freeze N freezes layers 0..N-1, so N is 0 to {len(layers)}")
    names = []
    for i in range(count):
        for name, p in layers[i].named_parameters():
            p.requires_grad_(False)
            names.append(f"module_list.{i}.{name}")
    return names


def frozen_to_eval(model: nn.Module, count: int) -> None:
    """Put layers ``0..count-1`` in eval mode (BatchNorm uses and keeps its running statistics)."""
    for i in range(count):
        model.module_list[i].eval()


__all__ = ["TransferReport", "freeze_layers", "frozen_to_eval", "head_sections", "layer_of", "load_pretrained",
           "transfer_state", "with_num_classes"]
