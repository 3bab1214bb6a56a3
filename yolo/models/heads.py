"""Detection heads: the layers that turn a conv map into boxes, and the decode that both the model and the
losses use.

Every head derives from :class:`Head` (:func:`is_head` recognizes them). A head takes the previous layer's
output and the network input size (H, W). In training mode it returns its raw maps (for the losses), in eval
mode decoded rows ``Float[N, boxes, K]``: cx, cy, w, h (centre boxes, ``cxcywh``, in input pixels), then
objectness and class probabilities (and for ``[Gaussian_yolo]`` the four uncertainties).

The ``[yolo]`` arithmetic lives here once: :func:`yolo_activation` is Darknet's layer output, :func:`yolo_wh`
its box size and :func:`yolo_boxes` its ``get_yolo_box``; :meth:`YOLOLayer.decode` (boxes in input pixels) and
the [yolo] loss (:mod:`yolo.losses.yolo_head_loss`, boxes as fractions of the input) are both built on them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from yolo.models.cfg import Section


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
    rule (:func:`yolo.models.layer_types.gaussian_yolo.postprocess_gaussian`)."""
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


# ----------------------------------------------------------------------------- the [yolo] arithmetic


def yolo_activation_parts(raw: torch.Tensor, scale_x_y: float,
                          new_coords: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`yolo_activation` in its three parts: x, y Float[..., 2]; w, h Float[..., 2] (raw); objectness and
    classes Float[..., 1 + C]."""
    if new_coords:
        xy, rest = raw[..., 0:2], raw[..., 4:]
    else:
        xy, rest = torch.sigmoid(raw[..., 0:2]), torch.sigmoid(raw[..., 4:])
    if scale_x_y != 1.0:
        xy = xy * scale_x_y - 0.5 * (scale_x_y - 1.0)
    return xy, raw[..., 2:4], rest


def yolo_activation(raw: torch.Tensor, scale_x_y: float, new_coords: int) -> torch.Tensor:
    """Darknet's ``[yolo]`` layer output from its input Float[..., 5 + C] (the same shape).

    Logistic on x, y, objectness and classes (not with ``new_coords=1``, where the conv before already applied
    it), then x, y mapped to ``s * x - (s - 1) / 2`` for ``scale_x_y = s``; w, h stay raw.
    """
    return torch.cat(yolo_activation_parts(raw, scale_x_y, new_coords), -1)


def yolo_wh(act_wh: torch.Tensor, anchors: torch.Tensor, new_coords: int,
            max_log_scale: Optional[float] = None) -> torch.Tensor:
    """Box (w, h) Float[..., 2] from the [yolo] output's w, h Float[..., 2], in the unit of ``anchors``
    (broadcastable): ``exp(w) * anchor_w``, or with ``new_coords=1`` ``4 * w^2 * anchor_w``.
    ``max_log_scale`` (the loss's guard) caps w, h before ``exp``."""
    if new_coords:
        return act_wh * act_wh * 4 * anchors
    if max_log_scale is not None:
        act_wh = act_wh.clamp(max=max_log_scale)
    return act_wh.exp() * anchors


def yolo_boxes(act: torch.Tensor, anchors: torch.Tensor, grid: torch.Tensor, grid_hw: Tuple[int, int],
               new_coords: int, max_log_scale: Optional[float] = None) -> torch.Tensor:
    """Darknet's ``get_yolo_box``: centre boxes Float[..., 4] (cx, cy, w, h) as fractions of the input.

    ``act`` the [yolo] output Float[N, A, H, W, >=4] (:func:`yolo_activation`); ``anchors`` the anchors'
    (w, h) as fractions of the input, broadcastable to Float[N, A, H, W, 2]; ``grid`` the cells' (column, row)
    (:func:`cell_grid`); ``grid_hw`` (H, W). cx = (column + x) / W; w, h by :func:`yolo_wh`.
    """
    grid_h, grid_w = grid_hw
    xy = act[..., 0:2] + grid
    wh = yolo_wh(act[..., 2:4], anchors, new_coords, max_log_scale)
    return torch.stack((xy[..., 0] / grid_w, xy[..., 1] / grid_h, wh[..., 0], wh[..., 1]), -1)


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


@dataclass
class RegionTrainOptions(CellLossScales):
    """The training options of a ``[region]`` section (Darknet's parse_region defaults)."""

    thresh: float = 0.5
    bias_match: int = 0
    classfix: int = 0
    focal_loss: int = 0
    max_boxes: int = 200
    tree: Optional[str] = None
    map: Optional[str] = None
    where: str = "<cfg>"  # "path:line" of the section


def region_train_options(section: Section) -> RegionTrainOptions:
    """Read (and check) a ``[region]`` section's training options."""
    opts = RegionTrainOptions(where=f"{section.source}:{section.line}")
    opts.read_scales(section)
    opts.thresh = section.get_float("thresh", opts.thresh)
    for key in ("bias_match", "classfix", "focal_loss"):
        setattr(opts, key, section.get_int(key, getattr(opts, key)))
    opts.max_boxes = section.get_int("max", 200)
    if opts.max_boxes <= 0:
        raise section.error(f"max={opts.max_boxes} must be positive", "max")
    if opts.classfix not in (-1, 0, 1, 2):
        raise section.error(f"classfix={opts.classfix} is not one of -1, 0, 1, 2", "classfix")
    section.get_int("absolute", 0)  # read for the record: Darknet's region layer always works in absolute mode
    opts.tree = section.get_str("tree", None)
    opts.map = section.get_str("map", None)
    return opts


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
        """Keep the cfg's anchors Float[total, 2] (input pixels) and this head's masked ones as buffers."""
        self.register_buffer("all_anchors", all_anchors.float().reshape(-1, 2), persistent=False)
        self.register_buffer("anchors", self.all_anchors[self.mask].clone(), persistent=False)

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


class YOLOLayer(Head):
    """Darknet ``[yolo]`` head.

    Input Float[N, A*(5+C), H, W] (the preceding conv). Training: the same values viewed as
    Float[N, A, H, W, 5+C]. Eval: Float[N, A*H*W, 5+C] rows (cx, cy, w, h in input pixels,
    objectness, class probabilities), decoded as Darknet's yolo layer:
    xy = sigmoid(t) * s - (s - 1) / 2, cx = (col + xy_x) / W * input_w, w = exp(tw) * anchor_w;
    with ``new_coords=1`` no sigmoid here (the conv already applied logistic) and w = 4 * tw^2 * anchor_w.
    """

    def __init__(self, anchors: torch.Tensor, mask: Sequence[int], num_classes: int, opts: HeadOptions):
        super().__init__(num_classes, mask)
        self.opts = opts
        self._register_anchors(anchors)

    def decode(self, raw: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Float[N, A, H, W, 5+C] raw -> decoded (same shape), boxes in input pixels."""
        _, _, h, w, _ = raw.shape
        in_h, in_w = input_hw
        # Input pixels per cell: the same at every input size, so a traced model keeps it as a constant.
        stride = self.constant((in_w / w, in_h / h), raw.device, raw.dtype)
        xy, wh, rest = yolo_activation_parts(raw, self.opts.scale_x_y, self.opts.new_coords)
        xy = (xy + self.grid(h, w, raw.device, raw.dtype)) * stride
        wh = yolo_wh(wh, self.anchors.to(raw.dtype).reshape(1, -1, 1, 1, 2), self.opts.new_coords)
        return torch.cat((xy, wh, rest), -1)


class RegionLayer(Head):
    """Darknet ``[region]`` head (YOLOv2).

    Anchors are given in grid cells; ``anchors`` here is kept in input pixels of the cfg's
    [net] size for the loss, while the decode uses cells: w = exp(tw) * anchor_cells / W * input_w.
    Objectness is logistic; classes are a softmax when ``softmax=1``, else left raw (as Darknet's region layer).

    Training (:mod:`yolo.losses.region_loss`) reads ``train_opts`` (the section's :class:`RegionTrainOptions`,
    set by the builder) and ``images_seen`` (images trained on, the current batch included; the trainer keeps
    it up to date through :func:`yolo.losses.region_loss.set_images_seen`): Darknet's prior term is on while
    it is below 12800.
    """

    def __init__(self, anchors_cells: torch.Tensor, num_classes: int, softmax: bool, opts: HeadOptions,
                 net_stride: float = 32.0):
        super().__init__(num_classes, range(anchors_cells.numel() // 2))
        self.softmax = softmax
        self.opts = opts
        self.train_opts: Optional[RegionTrainOptions] = None
        self.images_seen = 0
        self.register_buffer("anchors_cells", anchors_cells.float().reshape(-1, 2), persistent=False)
        self._register_anchors(self.anchors_cells * net_stride)

    def region_boxes(self, raw: torch.Tensor) -> torch.Tensor:
        """Darknet's ``get_region_box``: Float[N, A, H, W, >=4] raw -> centre boxes Float[N, A, H, W, 4] as
        fractions of the input: cx = (col + sigmoid(tx)) / W, w = exp(tw) * anchor_cells_w / W."""
        _, _, h, w, _ = raw.shape
        cells = self.constant((w, h), raw.device, raw.dtype)
        xy = (torch.sigmoid(raw[..., 0:2]) + self.grid(h, w, raw.device, raw.dtype)) / cells
        wh = torch.exp(raw[..., 2:4]) * self.anchors_cells.to(raw.dtype).reshape(1, -1, 1, 1, 2) / cells
        return torch.cat((xy, wh), -1)

    def decode(self, raw: torch.Tensor, input_hw: Sequence[int]) -> torch.Tensor:
        """Float[N, A, H, W, 5+C] raw -> decoded (same shape), boxes in input pixels."""
        in_h, in_w = input_hw
        size = self.constant((in_w, in_h), raw.device, raw.dtype)
        boxes = self.region_boxes(raw) * torch.cat((size, size))
        obj = torch.sigmoid(raw[..., 4:5])
        # Without softmax Darknet's forward_region_layer leaves the class outputs as they are (no logistic).
        cls = torch.softmax(raw[..., 5:], -1) if self.softmax else raw[..., 5:]
        return torch.cat((boxes, obj, cls), -1)


__all__ = ["Head", "is_head", "is_gaussian_head", "has_gaussian_heads", "uniform_eval_rows", "SIGMA_COLUMNS",
           "cell_grid", "yolo_activation", "yolo_activation_parts", "yolo_wh", "yolo_boxes",
           "HeadOptions", "RegionTrainOptions", "region_train_options", "YOLOLayer", "RegionLayer"]
