"""``Darknet``: a Darknet cfg turned into an ``nn.Module`` whose ``module_list`` mirrors the cfg's layers.

Each section is built by a builder looked up by section name in :data:`BUILDERS` (every layer type is a module
of :mod:`yolo.models.layer_types`, its builder registered there). A builder gets the section and
the shapes of every earlier layer's output, checks its options, and returns the module and its output shape
``(channels, height, width)`` at the cfg's [net] size. So a bad cfg fails at build time with the file and
line, never deep inside ``forward``.
"""
from __future__ import annotations

import logging
import math
import numbers
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

from yolo.device import parse_device
from yolo.errors import CfgError, WeightsError
from yolo.models import layer_types  # noqa: F401  (importing the package registers every layer type's builder)
from yolo.models.cfg import Section, parse_cfg, parse_cfg_text, sections_to_text
from yolo.models.cfg_options import known_keys
from yolo.models.checkpoint import check_finite_state, check_float_weights, load_checkpoint_file
from yolo.models.heads import is_head, uniform_eval_rows
from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.registry import BUILDERS, LayerInfo, Shape, positive
from yolo.models.layer_types.route import Route
from yolo.models.preprocessing import checked_record
from yolo.models.summary import model_summary
from yolo.models.weights import load_darknet_weights, save_darknet_weights
from yolo.settings.checks import check_path

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- option tables

# Options that Darknet uses only for training, data loading or post-processing: accepted without a warning.
# [net], [yolo], [region] and [detection] come from yolo.models.cfg_options, which says what training does with each.
TRAINING_OPTIONS = {
    "*": {"stopbackward", "dontload", "dontloadscales", "train_only_bn", "onlyforward", "learning_rate_scale",
          "learning_rate", "dont_update", "burnin_update", "clip", "grad_centr"},  # yolo.engine.optimizer
    "net": set(known_keys("net")),
    "yolo": set(known_keys("yolo")),
    "region": set(known_keys("region")),
    "detection": set(known_keys("detection")),
    "softmax": {"spatial", "noloss"},
}
# Options that would change what a layer computes: refused unless they have their neutral value.
UNSUPPORTED_OPTIONS = {
    "antialiasing": {"0"},
    "stride_x": set(), "stride_y": set(), "reverse": {"0"}, "flatten": {"0"}, "extra": {"0"},
    "maxpool_depth": {"0"}, "deform": {"0"},
    "tree": set(),  # hierarchical softmax (YOLO9000): changes [region]/[softmax] outputs
}

# ----------------------------------------------------------------------------- the model


def _given_sections(cfg) -> List[Section]:
    """``cfg`` given as parsed sections, checked: a non-empty sequence of :class:`Section` (``[net]`` first)."""
    if isinstance(cfg, (bytes, str)) or not isinstance(cfg, Iterable):
        raise TypeError(f"cfg must be a .cfg path (str or pathlib.Path) or a sequence of sections from "
                        f"yolo.models.cfg.parse_cfg, got {type(cfg).__name__} {cfg!r}")
    sections = list(cfg)
    if not sections:
        raise ValueError("cfg: no sections given (a network starts with its [net] section)")
    for section in sections:
        if not isinstance(section, Section):
            raise TypeError(f"cfg must be a sequence of sections from yolo.models.cfg.parse_cfg, got "
                            f"{type(section).__name__} {section!r} in it")
    return sections


def _check_bn_eps(bn_eps) -> None:
    """BatchNorm's epsilon: a finite number above 0 (0 divides by a zero variance; NaN spoils every output)."""
    if isinstance(bn_eps, bool) or not isinstance(bn_eps, numbers.Real):
        raise TypeError(f"bn_eps must be a number, got {type(bn_eps).__name__} {bn_eps!r}")
    if not (math.isfinite(bn_eps) and bn_eps > 0):
        raise ValueError(f"bn_eps: {bn_eps} is out of range: BatchNorm's epsilon must be a finite number above 0")


class Darknet(nn.Module):
    """A Darknet network built from a cfg.

    Args:
        cfg: path to a ``.cfg`` file, or sections from :func:`yolo.models.cfg.parse_cfg`.
        bn_eps: BatchNorm epsilon, (x - mean) / sqrt(var + eps). Darknet uses 1e-5 (AlexeyAB's CPU
            path and cuDNN in both forks); OpenCV's Darknet importer uses 1e-6. It matters only for
            layers with tiny running variances (depthwise convs, e.g. Yolo-Fastest).

    Forward takes Float[N, C, H, W] (RGB, 0..1; H and W multiples of :attr:`stride`) and returns
    in training mode a list of raw head maps Float[N, A, Hg, Wg, 5+C], one per head (a [detection] head: its
    flat input Float[N, side*side*(5*num+C)]); in eval mode
    Float[N, boxes, 5+C] rows (cx, cy, w, h in input pixels, objectness, class probabilities); with a
    [Gaussian_yolo] head every row has 4 more columns, its box uncertainties (zero for the rows of any other
    head: :func:`yolo.models.heads.uniform_eval_rows`).
    A network without heads (a classifier) returns its last layer's output.
    """

    def __init__(self, cfg: Union[str, Path, Sequence[Section]], bn_eps: float = 1e-5):
        super().__init__()
        _check_bn_eps(bn_eps)
        if isinstance(cfg, (str, Path)):
            self.cfg_path = str(cfg)
            self.cfg_text = Path(cfg).read_text(encoding="utf-8", errors="replace") if Path(cfg).is_file() else ""
            sections = parse_cfg(cfg)
        else:
            sections = _given_sections(cfg)
            self.cfg_path = sections[0].source
            self.cfg_text = sections_to_text(sections)
        self.sections = sections
        self.net = sections[0]
        if self.net.has("inputs") and not any(self.net.has(k) for k in ("height", "width", "channels")):
            # A vector network (Darknet's text rnn/gru/lstm cfgs): 'inputs' values, seen as inputs x 1 x 1.
            self.input_channels, height, width = positive(self.net, "inputs", self.net.get_int("inputs")), 1, 1
        else:
            self.input_channels = positive(self.net, "channels", self.net.get_int("channels", 3))
            height = positive(self.net, "height", self.net.get_int("height", 416))
            width = positive(self.net, "width", self.net.get_int("width", 416))
        self.input_size = (height, width)

        self.module_list = nn.ModuleList()
        self.layer_infos: List[LayerInfo] = []
        shapes: List[Shape] = []
        prev: Shape = (self.input_channels, height, width)
        for section in sections[1:]:
            builder = BUILDERS.get(section.type)
            if builder is None:
                raise CfgError(f"unknown section type [{section.type}] (known: "
                               f"{', '.join(sorted(BUILDERS))})", section.source, section.line)
            info = builder(section, shapes, prev)
            self.module_list.append(info.module)
            self.layer_infos.append(info)
            shapes.append(info.out_shape)
            prev = info.out_shape
        self._warn_unused_options()
        self._share_weights()
        for module in self.module_list.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.eps = bn_eps

        self.yolo_layers = [m for m in self.module_list if is_head(m)]
        self.num_classes = max(h.num_classes for h in self.yolo_layers) if self.yolo_layers else prev[0]
        # Earlier layers each layer reads (route, shortcut, sam, scale_channels, ...): forward keeps only those.
        self._sources = [tuple(info.inputs) for info in self.layer_infos]
        self._saved = sorted({i for sources in self._sources for i in sources})
        self._is_head = [is_head(m) for m in self.module_list]
        self._check_head_outputs_unread(sections[1:])
        self._check_head_classes(sections[1:])
        self.stride = self._network_stride()
        self.size_fixed_by = self._size_fixing_section(sections[1:])
        self.darknet_header = (0, 2, 0, 0)  # major, minor, revision, seen: what a loaded file had
        self.preprocessing: Optional[Dict] = None  # a training checkpoint's record (yolo.models.preprocessing)
        self.class_names: Optional[List[str]] = None  # the class names a checkpoint of ours carries

    def _check_head_classes(self, layers: Sequence[Section]) -> None:
        """Warn about heads whose ``classes`` differ from the first head's, as Darknet's parser does (it goes on).
        Their eval rows share the most classes (:func:`yolo.models.heads.uniform_eval_rows`); Darknet sizes its
        detections by the first head and writes past them for a head with more."""
        heads = [(i, m) for i, m in enumerate(self.module_list) if is_head(m)]
        for i, head in heads[1:]:
            first, first_head = heads[0]
            if head.num_classes != first_head.num_classes:
                section = layers[i]
                logger.warning("%s:%d: [%s] classes=%d, but the first head (layer %d) has classes=%d: the "
                               "detections take the most classes of any head", section.source,
                               section.option_lines.get("classes", section.line), section.type, head.num_classes,
                               first, first_head.num_classes)

    def _check_head_outputs_unread(self, layers: Sequence[Section]) -> None:
        """Refuse a layer that reads a head's output. Darknet's heads output their activated input (its own
        layout per head type), which this model does not reproduce: heads here return raw or decoded maps."""
        for i, section in enumerate(layers):
            read = set(self._sources[i])
            if i > 0 and not isinstance(self.module_list[i], Route):
                read.add(i - 1)  # every layer but [route] also reads the previous layer's output
            heads = sorted(j for j in read if self._is_head[j])
            if heads:
                raise section.error(f"reads the output of head layer {heads[0]} ([{layers[heads[0]].type}]): "
                                    "only [route] may follow a head, and it may not read the head itself")

    def _share_weights(self) -> None:
        """Layers with ``share_index``: use that layer's conv weights, bias and BatchNorm (statistics included),
        keeping their own stride, padding, dilation and activation, as Darknet's share_layer does."""
        for i, info in enumerate(self.layer_infos):
            if info.shares is None:
                continue
            module, source = self.module_list[i], self.module_list[info.shares]
            section = self.sections[i + 1]
            if not isinstance(source, ConvBNAct) or source.conv.weight.shape != module.conv.weight.shape \
                    or (source.bn is None) != (module.bn is None):
                raise section.error(f"share_index: layer {info.shares} is not a [convolutional] with the same "
                                    "filters, size, channels and batch_normalize", "share_index")
            module.conv.weight = source.conv.weight
            module.conv.bias = source.conv.bias
            module.bn = source.bn
            module.shared_from = info.shares

    def _size_fixing_section(self, layers: Sequence[Section]) -> Optional[Section]:
        """The first layer whose weights are tied to the cfg's input size, or None: a [connected] reading a
        map larger than 1x1 (one weight per input value) or a [local] (one weight set per output cell)."""
        for section, info in zip(layers, self.layer_infos):
            if section.type == "local" or (section.type == "connected" and info.in_shape[1] * info.in_shape[2] > 1):
                return section
        return None

    def check_input_size(self, size_hw: Sequence[int], what: str = "input size") -> None:
        """Raise ``ValueError`` (naming the cfg line) when ``size_hw`` differs from the cfg's [net] size in a
        network whose weights are tied to that size (:attr:`size_fixed_by`, e.g. YOLOv1's [connected])."""
        section = self.size_fixed_by
        if section is not None and tuple(int(v) for v in size_hw) != tuple(self.input_size):
            h, w = self.input_size
            raise ValueError(f"{section.source}:{section.line}: [{section.type}] ties the weights to the cfg's "
                             f"{h}x{w} input; {what} {size_hw[0]}x{size_hw[1]} cannot be used")

    def _network_stride(self) -> int:
        """The largest input/output ratio over the layers (32 for YOLOv3): inputs must be multiples of it."""
        height = self.input_size[0]
        return max((height // info.out_shape[1] for info in self.layer_infos if info.out_shape[1] > 1), default=1)

    def _warn_unused_options(self) -> None:
        """One warning listing options the cfg carries that nothing here reads (training-only keys
        that Darknet documents are accepted silently)."""
        unknown = []
        for section in self.sections:
            known = TRAINING_OPTIONS.get(section.type, set()) | TRAINING_OPTIONS["*"]
            for key in section.unused_options():
                if key in UNSUPPORTED_OPTIONS and section.options[key] not in UNSUPPORTED_OPTIONS[key]:
                    raise section.error(f"option '{key}={section.options[key]}' changes the computation and "
                                        "is not supported", key)
                if key not in known:
                    unknown.append(f"{section.option_lines[key]}:[{section.type}] {key}")
        if unknown:
            logger.warning("%s: ignoring options this framework does not use: %s", self.cfg_path, ", ".join(unknown))

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor):
        head_outputs = []
        x = self._run_layers(x, head_outputs)
        if not head_outputs:
            return x.flatten(1) if x.shape[-1] == 1 and x.shape[-2] == 1 else x
        if self.training:
            return head_outputs
        return uniform_eval_rows(head_outputs, self.yolo_layers)

    def _run_layers(self, x: torch.Tensor, head_outputs: List[torch.Tensor],
                    every: Optional[List[torch.Tensor]] = None) -> torch.Tensor:
        """Run every layer; heads append to ``head_outputs``; ``every`` (if given) gets each layer's output
        (a head's entry is its input: heads pass their input on unchanged, as in Darknet)."""
        input_hw = x.shape[-2:]
        saved: Dict[int, torch.Tensor] = {}
        keep = set(self._saved) if every is None else set(range(len(self.module_list)))
        for i, module in enumerate(self.module_list):
            sources = self._sources[i]
            if isinstance(module, Route):
                x = module([saved[j] for j in sources])
            elif self._is_head[i]:
                head_outputs.append(module(x, input_hw))
            elif sources:  # a layer that reads earlier outputs: module(previous output, *those outputs)
                x = module(x, *[saved[j] for j in sources])
            else:
                x = module(x)
            if i in keep:
                saved[i] = x
            if every is not None:
                every.append(x)
        return x

    def layer_outputs(self, x: torch.Tensor) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
        """Every layer's output (for comparisons with Darknet, layer by layer) and the head outputs.

        Returns ``(outputs, heads)``: ``outputs[i]`` is layer i's output Float[N, C, H, W] (for a head, its
        input), ``heads`` what :meth:`forward` would collect from the heads in the current mode.
        """
        outputs: List[torch.Tensor] = []
        heads: List[torch.Tensor] = []
        self._run_layers(x, heads, outputs)
        return outputs, heads

    # ------------------------------------------------------------------ utilities
    def fuse(self) -> "Darknet":
        """Fold every BatchNorm into its conv (inference only); returns self."""
        for module in self.module_list:
            if isinstance(module, ConvBNAct):
                module.fuse()
        return self

    def load_darknet_weights(self, path: Union[str, Path], cutoff: Optional[int] = None) -> "Darknet":
        """Load a Darknet ``.weights`` file (see :func:`yolo.models.weights.load_darknet_weights`); returns self."""
        load_darknet_weights(self, path, cutoff)
        return self

    def save_darknet_weights(self, path: Union[str, Path], cutoff: Optional[int] = None) -> None:
        """Write a Darknet ``.weights`` file (see :func:`yolo.models.weights.save_darknet_weights`)."""
        save_darknet_weights(self, path, cutoff)

    def summary(self, img_size: Optional[Tuple[int, int]] = None) -> str:
        """A Darknet-style per-layer table with shapes and BFLOPs (see :mod:`yolo.models.summary`)."""
        return model_summary(self, img_size)


def _warn_if_partial(cutoff, num_layers: int, weights) -> None:
    """A checkpoint converted from the first ``cutoff`` layers of a Darknet file (``convert --cutoff``) holds the
    cfg's initialization in the others: a start for training, not a detector."""
    if isinstance(cutoff, int) and 0 <= cutoff < num_layers:
        logger.warning("%s: only layers 0..%d were read from Darknet weights (convert --cutoff %d); layers %d..%d "
                       "hold untrained initial values, so its detections mean nothing until it is trained "
                       "(train --weights %s)", weights, cutoff - 1, cutoff, cutoff, num_layers - 1, weights)


def _check_load_arguments(cfg, weights, cutoff) -> None:
    """:func:`load_model`'s arguments of the wrong type, refused before any file is read (the sections a cfg
    may also be are checked by :class:`Darknet`)."""
    if isinstance(cfg, bytes):
        check_path("cfg", cfg)  # refused there, with the same words as a wrong weights path
    check_path("weights", weights)
    if cutoff is not None and (isinstance(cutoff, bool) or not isinstance(cutoff, numbers.Integral)):
        raise TypeError(f"cutoff must be an integer (the number of layers to read), got "
                        f"{type(cutoff).__name__} {cutoff!r}")


def load_model(cfg: Union[str, Path, None] = None, weights: Union[str, Path, None] = None,
               device: Union[str, int, torch.device, None] = None, cutoff: Optional[int] = None) -> Darknet:
    """Build a model from a cfg and/or weights, moved to ``device``.

    ``weights`` is a Darknet ``.weights`` file or a ``.pt`` checkpoint (``{"model", "cfg", ...}``, read with
    ``weights_only=True``). ``cfg`` may be omitted for a ``.pt`` that carries its cfg text.
    """
    _check_load_arguments(cfg, weights, cutoff)
    model: Optional[Darknet] = None
    if weights is not None and Path(weights).suffix in (".pt", ".pth"):
        ckpt = load_checkpoint_file(weights)
        if cfg is not None:
            model = Darknet(cfg)
        elif ckpt.get("cfg"):
            model = Darknet(parse_cfg_text(ckpt["cfg"], source=f"{weights}:cfg"))
            model.cfg_text = ckpt["cfg"]
        else:
            raise WeightsError(f"{weights}: the checkpoint carries no cfg text; pass the cfg")
        state = ckpt["model"]
        check_float_weights(state, model.state_dict(), weights)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()
            raise WeightsError(f"{weights}: does not match cfg {model.cfg_path}: {' '.join(first[:3])}") from None
        check_finite_state(state, weights)
        _warn_if_partial(ckpt.get("cutoff"), len(model.module_list), weights)
        model.class_names = ckpt.get("names")
        if model.class_names is not None and len(model.class_names) != model.num_classes:
            raise WeightsError(f"{weights}: damaged or foreign checkpoint: its names list {len(model.class_names)} "
                               f"classes but the model has {model.num_classes}")
        header = ckpt.get("darknet_header")
        if header:
            model.darknet_header = tuple(int(v) for v in header)
        try:  # how a trained model's inputs were made: detect and eval use it (yolo.models.preprocessing)
            model.preprocessing = checked_record(ckpt.get("preprocessing"), str(weights))
        except ValueError as exc:
            raise WeightsError(str(exc)) from None
    else:
        if cfg is None:
            raise ValueError("a cfg is needed to build the model (only .pt checkpoints carry their own)")
        model = Darknet(cfg)
        if weights is not None:
            model.load_darknet_weights(weights, cutoff=cutoff)
    if device is not None:  # a name is read as everywhere else ("gpu" and 1.5 refused); a torch.device as it is
        model.to(device if isinstance(device, torch.device) else parse_device(device))
    return model
