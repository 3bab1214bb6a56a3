"""What every detection head shares: the :class:`Head` interface, the options of the anchor heads and the
layout of their eval rows. The head types themselves are layer types (:mod:`yolo.models.layer_types`: ``yolo_head``,
``region``, ``gaussian_yolo``, ``detection``), each registered with its builder.

Every head derives from :class:`Head` (:func:`is_head` recognizes them). A head takes the previous layer's
output and the network input size (H, W). In training mode it returns its raw maps (for the losses), in eval
mode decoded rows ``Float[N, boxes, K]``: cx, cy, w, h (centre boxes, ``cxcywh``, in input pixels), then
objectness and class probabilities (and for ``[Gaussian_yolo]`` the four uncertainties).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from yolo.models.cfg import Section
from yolo.models.head_sections import NMS_HEADS
from yolo.ops.postprocess_defaults import BETA_NMS, NMS_KINDS

logger = logging.getLogger(__name__)


def is_head(module) -> bool:
    """True for a detection head (a :class:`Head`): the layers a detector's output and losses come from."""
    return isinstance(module, Head)


SIGMA_COLUMNS = 4  # a [Gaussian_yolo] eval row ends with sigma_tx, sigma_ty, sigma_tw, sigma_th


def is_gaussian_head(module) -> bool:
    """True for a head whose eval rows end with the :data:`SIGMA_COLUMNS` box uncertainties ([Gaussian_yolo])."""
    return is_head(module) and module.box_sigmas


def has_gaussian_heads(heads) -> bool:
    """Whether any of ``heads`` (a model's ``yolo_layers``) is a [Gaussian_yolo] head: then every row of the
    model's eval output has the sigma columns (:func:`uniform_eval_rows`) and is scored by Darknet's Gaussian
    rule (:func:`yolo.inference.postprocess.threshold_and_nms`)."""
    return any(is_gaussian_head(h) for h in heads)


def uniform_eval_rows(rows, heads) -> torch.Tensor:
    """The heads' eval rows (``rows[k]`` Float[N, B_k, K_k] from ``heads[k]``) as one Float[N, sum B_k, K].

    Rows of one layout concatenate as they are. Otherwise every row is brought to cx, cy, w, h, objectness,
    C class probabilities (C: the most classes of any head), and with a [Gaussian_yolo] head 4 sigmas:

    * a head with fewer classes gets zero probabilities for the others: Darknet sizes every detection's
      probabilities by its first head and leaves those a head does not write at zero (calloc);
    * a non-Gaussian head's rows get :data:`SIGMA_COLUMNS` zeros. Darknet's detections of a [yolo] layer in
      such a network carry zeroed uncertainties too (calloc in make_network_boxes), and Darknet's Gaussian
      score ``objectness * p * (1 - mean sigma)`` is then its [yolo] score ``objectness * p``.
    """
    classes = max(h.num_classes for h in heads)
    sigmas = has_gaussian_heads(heads)
    if all(h.num_classes == classes and is_gaussian_head(h) == sigmas for h in heads):
        return torch.cat(rows, 1)
    uniform = []
    for r, h in zip(rows, heads):
        zeros = r.new_zeros(r.shape[:-1] + (classes - h.num_classes,))
        own = r[..., 5 + h.num_classes:] if is_gaussian_head(h) else \
            r.new_zeros(r.shape[:-1] + (SIGMA_COLUMNS if sigmas else 0,))
        uniform.append(torch.cat((r[..., :5 + h.num_classes], zeros, own), -1))
    return torch.cat(uniform, 1)


def cell_grid(h: int, w: int, device=None, dtype=None) -> torch.Tensor:
    """Float[1, 1, H, W, 2]: each grid cell's (column, row), to add to the offsets of Float[N, A, H, W, ...]."""
    ys, xs = torch.meshgrid(torch.arange(h, device=device, dtype=dtype),
                            torch.arange(w, device=device, dtype=dtype), indexing="ij")
    return torch.stack((xs, ys), -1).reshape(1, 1, h, w, 2)


# ----------------------------------------------------------------------------- options


@dataclass
class HeadOptions:
    """Options of a ``[yolo]`` / ``[region]`` section that the decode and the loss use."""

    ignore_thresh: float = 0.5
    truth_thresh: float = 1.0
    iou_thresh: float = 1.0
    scale_x_y: float = 1.0
    new_coords: int = 0
    iou_loss: str = "mse"
    iou_normalizer: float = 0.75
    obj_normalizer: float = 1.0
    cls_normalizer: float = 1.0
    max_delta: float = float("inf")
    label_smooth_eps: float = 0.0
    delta_normalizer: float = 1.0
    objectness_smooth: int = 0
    focal_loss: int = 0
    iou_thresh_kind: str = "iou"
    counters_per_class: str = ""  # comma-separated counts, one per class ("" = none)
    random: int = 0
    jitter: float = 0.2
    resize: float = 1.0


@dataclass
class CellLossScales:
    """The loss scales and ``rescore`` that Darknet's [region] and [detection] layers share, with their defaults
    (parse_region, parse_detection)."""

    coord_scale: float = 1.0
    object_scale: float = 1.0
    noobject_scale: float = 1.0
    class_scale: float = 1.0
    rescore: int = 0

    def read_scales(self, section: Section) -> None:
        """Read these keys from ``section`` (bad values: its one-line error with file and line)."""
        for key in ("coord_scale", "object_scale", "noobject_scale", "class_scale"):
            setattr(self, key, section.get_float(key, getattr(self, key)))
        self.rescore = section.get_int("rescore", self.rescore)


def head_options(section: Section) -> HeadOptions:
    """A ``[yolo]`` / ``[region]`` section's :class:`HeadOptions`, each key read with its default's type."""
    opts = HeadOptions()
    for key, default in vars(HeadOptions()).items():
        getter = section.get_str if isinstance(default, str) else (
            section.get_int if isinstance(default, int) else section.get_float)
        setattr(opts, key, getter(key, default))
    if opts.iou_loss not in ("mse", "iou", "giou", "diou", "ciou"):
        raise section.error(f"unknown iou_loss '{opts.iou_loss}'", "iou_loss")
    return opts


def check_nms_options(section: Section, kinds: Sequence[str] = NMS_KINDS) -> None:
    """Refuse a ``beta_nms`` that turns ``nms_kind=diounms`` off, and warn of an ``nms_kind`` that is none of
    ``kinds`` (Darknet's parse_yolo falls back to ``default`` without a word).

    Darknet's box_diounms is ``IoU - (d / c) ** beta_nms`` (d <= c): at ``beta_nms <= 0`` the penalty is at
    least 1, so no box is ever suppressed."""
    kind = section.get_str("nms_kind", "default").strip()
    beta = section.get_float("beta_nms", BETA_NMS)
    if kind == "diounms" and not beta > 0:
        raise section.error(f"beta_nms={section.options.get('beta_nms')} must be above 0 with nms_kind=diounms "
                            "(Darknet's DIoU-NMS subtracts (d/c)^beta_nms: at 0 or below it suppresses nothing)",
                            "beta_nms")
    if kind not in kinds:
        logger.warning("%s:%s: [%s] nms_kind=%s is not one of %s: using default NMS, as Darknet does",
                       section.source, section.option_lines.get("nms_kind", section.line), section.type, kind,
                       ", ".join(kinds))


def nms_settings(sections: Sequence[Section]) -> Tuple[str, float]:
    """``(nms_kind, beta_nms)`` that Darknet applies for a cfg: those of its *last* layer (Darknet's detector reads
    ``net.layers[net.n - 1]``) when that is a ``[yolo]`` or ``[Gaussian_yolo]`` head (:data:`NMS_HEADS`), else
    ``("default", BETA_NMS)``.

    ``sections`` are :class:`yolo.models.cfg.Section` objects (anything with ``type``, ``get_str`` and
    ``get_float``). A name Darknet does not know for ``[yolo]`` (e.g. ``cornersnms``, which only its
    ``[Gaussian_yolo]`` reads) falls back to ``default``, as in Darknet.
    """
    sections = list(sections)
    last = sections[-1] if sections else None
    if last is None or last.type not in NMS_HEADS:
        return "default", BETA_NMS
    kind = last.get_str("nms_kind", "default").strip()
    beta = last.get_float("beta_nms", BETA_NMS)
    return (kind if kind in NMS_KINDS else "default"), float(beta)


def check_head_filters(section: Section, prev: Tuple[int, int, int], expected: int, why: str) -> None:
    """Refuse a head whose previous layer's output ``prev`` (C, H, W) has not the ``expected`` C channels
    (``why``: the formula, written out for the message)."""
    if prev[0] != expected:
        raise section.error(f"the layer before has filters={prev[0]}, but this head needs {why} = {expected}")


# ----------------------------------------------------------------------------- the head interface


class Head(nn.Module):
    """Base of every detection head.

    Attributes every head has: ``num_classes``; ``num_anchors`` (A, boxes per cell); ``mask`` (the indices of
    its anchors among the cfg's); ``num_outputs`` (values per box row, ``num_box_entries + num_classes``);
    ``stride`` ((stride_y, stride_x) of the last forward, input pixels per cell). Anchor heads also have
    ``all_anchors`` Float[total, 2] and ``anchors`` Float[A, 2] (the masked ones), both in input pixels.

    The default forward views the input Float[N, A*K, H, W] as raw maps Float[N, A, H, W, K]; training
    returns them, eval returns :meth:`decode`'s rows Float[N, A*H*W, K].
    """

    num_box_entries = 5  # values per box before the class probabilities: cx, cy, w, h, objectness
    box_sigmas = False  # whether eval rows end with SIGMA_COLUMNS box uncertainties (is_gaussian_head)

    def __init__(self, num_classes: int, mask: Sequence[int]):
        super().__init__()
        self.num_classes = num_classes
        self.mask = list(mask)
        self.num_anchors = len(self.mask)
        self.stride: Optional[Tuple[float, float]] = None
        self._grid_cache: Dict[tuple, torch.Tensor] = {}

    @property
    def num_outputs(self) -> int:
        return self.num_box_entries + self.num_classes

    def _register_anchors(self, all_anchors: torch.Tensor) -> None:
        """Keep the cfg's anchors Float[total, 2] (input pixels) and this head's masked ones as buffers, and
        ``host_anchors``, a copy of ``all_anchors`` that stays on the CPU when the model moves: the losses assign
        the targets on the CPU, where reading it costs no wait for the GPU."""
        self.register_buffer("all_anchors", all_anchors.float().reshape(-1, 2), persistent=False)
        self.register_buffer("anchors", self.all_anchors[self.mask].clone(), persistent=False)
        self.host_anchors = self.all_anchors.detach().cpu().clone()

    def grid(self, h: int, w: int, device, dtype) -> torch.Tensor:
        """:func:`cell_grid`, kept for the last size (not while tracing: the trace must compute it)."""
        if torch.jit.is_tracing():
            return cell_grid(h, w, device, dtype)
        key = (h, w, device, dtype)
        grid = self._grid_cache.get(key)
        if grid is None:
            grid = cell_grid(h, w, device, dtype)
            self._grid_cache = {key: grid}
        return grid

    def constant(self, values: Tuple[float, ...], device, dtype) -> torch.Tensor:
        """``torch.tensor(values)`` on ``device``, made once per value, device and dtype: built in every
        forward it would be a host-to-device copy per head (a sync on CUDA, refused inside a CUDA graph
        capture). Not cached while tracing (the trace keeps it as a constant)."""
        if torch.jit.is_tracing():
            return torch.tensor(values, device=device, dtype=dtype)
        key = (tuple(values), device, dtype)
        cache = self.__dict__.setdefault("_constant_cache", {})
        if key not in cache:
            if len(cache) >= 16:  # a few input sizes at a time
                cache.clear()
            cache[key] = torch.tensor(values, device=device, dtype=dtype)
        return cache[key]

    def raw_maps(self, x: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Float[N, A*K, H, W] -> the raw maps Float[N, A, H, W, K] (a view); records :attr:`stride`."""
        n, _, h, w = x.shape
        self.stride = (input_hw[0] / h, input_hw[1] / w)
        return x.reshape(n, self.num_anchors, self.num_outputs, h, w).permute(0, 1, 3, 4, 2)

    def forward(self, x: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        raw = self.raw_maps(x, input_hw)
        if self.training:
            return raw.contiguous()
        n, a, h, w, k = raw.shape
        return self.decode(raw, input_hw).reshape(n, a * h * w, k)

    def decode(self, raw: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Raw maps Float[N, A, H, W, K] -> eval rows of the same shape, boxes cxcywh in input pixels."""
        raise NotImplementedError


__all__ = ["Head", "is_head", "is_gaussian_head", "has_gaussian_heads", "uniform_eval_rows", "SIGMA_COLUMNS", "nms_settings",
           "cell_grid", "HeadOptions", "CellLossScales", "head_options", "check_head_filters"]
