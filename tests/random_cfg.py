"""Random valid Darknet cfgs that mix every layer type we build, for layer-by-layer checks against Darknet.

``random_cfg(seed)`` returns a :class:`RandomCfg`: the cfg text plus what a comparison needs to know (how many
images per Darknet run, time steps, which layers are heads). Every cfg is valid for Darknet as well as for us:
each maker below only emits a section whose inputs keep Darknet's own rules (equal sizes for route/shortcut,
channels divisible by groups, outputs at least 1x1, ...).

To add a layer type, write a maker ``(Net, random.Random) -> Optional[str]`` that returns the section text (or
``None`` when the type does not fit the current shapes) and add one line to :data:`MAKERS`. Makers of types the
model does not build (yet) are left out, so the cfgs of a seed change when a type lands.

Known Darknet behaviours the makers steer around (not semantics we copy):
* [softmax] leaves its out_h/out_w at 0 (src/softmax_layer.c), so nothing can follow it: it only ends a cfg.
* A [yolo] layer's output is its logistic-activated input; no maker reads a [yolo] layer or follows one
  directly, so heads are compared on their own (see :func:`yolo_output`).
* Darknet's parser divides by the number of layers wider and taller than 1 (src/parser.c ``avg_counter``):
  the first layer is always a convolution on the (at least 2x2) input.
* [gru] leaves its out_c/out_h/out_w at 0 (src/gru_layer.c), so Darknet refuses any image layer after it: only
  the fully connected sequence layers or a [route] to earlier layers follow a [gru], and nothing reads it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch

Shape = Tuple[int, int, int]  # (channels, height, width)

# Activations that Darknet computes in every layer type, then those of its other names that the model knows
# (swish, mish, hard_mish and normalize_channels* only exist in [convolutional]: elsewhere Darknet outputs 0).
BASIC_ACTIVATIONS = ["linear", "leaky", "logistic", "relu", "tanh"]
MORE_ACTIVATIONS = ["ramp", "relie", "loggy", "plse", "hardtan", "lhtan", "stair", "revleaky", "elu", "selu", "gelu"]
CONV_ONLY_ACTIVATIONS = ["mish", "swish", "hard_mish", "normalize_channels", "normalize_channels_softmax",
                         "normalize_channels_softmax_maxval"]


def activations(conv: bool = False) -> List[str]:
    """Activation names for a layer; ``conv=True`` for [convolutional] and the convolutions inside a layer."""
    from yolo.models.activations import ACTIVATIONS
    extra = MORE_ACTIVATIONS + (CONV_ONLY_ACTIVATIONS if conv else [])
    return BASIC_ACTIVATIONS + [name for name in extra if name in ACTIVATIONS]
MAX_SIDE = 24


@dataclass
class Net:
    """The cfg built so far: one shape per layer and what later makers must know about each layer."""

    input_shape: Shape
    shapes: List[Shape] = field(default_factory=list)
    types: List[str] = field(default_factory=list)
    sections: List[str] = field(default_factory=list)
    mixed_shortcut: bool = False  # a [shortcut] adds layers with different channel counts

    @property
    def shape(self) -> Shape:
        return self.shapes[-1] if self.shapes else self.input_shape

    def readable(self) -> List[int]:
        """Indices a [route]/[shortcut] may read: not heads (Darknet reads their activated output), not [gru]."""
        return [i for i, t in enumerate(self.types) if t not in NOT_READABLE]


def _divisors(n: int, limit: int = 4) -> List[int]:
    return [d for d in range(1, limit + 1) if n % d == 0]


# ----------------------------------------------------------------------------- makers, one per layer type


def make_convolutional(net: Net, rng: random.Random, filters: Optional[int] = None, size: Optional[int] = None,
                       activation: Optional[str] = None) -> Optional[str]:
    c, h, w = net.shape
    size = size or rng.choice([1, 1, 3, 3, 5])
    stride = rng.choice([1, 1, 1, 2]) if min(h, w) >= 4 else 1
    lines = []
    if rng.random() < 0.7:
        pad = size // 2
        lines.append("pad=1")
    else:
        pad = rng.randint(0, size // 2)
        lines.append(f"padding={pad}")
    out_h, out_w = (h + 2 * pad - size) // stride + 1, (w + 2 * pad - size) // stride + 1
    if out_h < 1 or out_w < 1:
        return None
    filters = filters or rng.choice([2, 3, 4, 6, 8, 12])
    groups = rng.choice([g for g in _divisors(c) if filters % g == 0]) if rng.random() < 0.3 else 1
    bn = rng.random() < 0.6
    act = activation or rng.choice(activations(conv=True))
    net.shapes.append((filters, out_h, out_w))
    return "\n".join(["[convolutional]", f"filters={filters}", f"size={size}", f"stride={stride}", *lines,
                      f"groups={groups}", f"batch_normalize={int(bn)}", f"activation={act}"])


def make_maxpool(net: Net, rng: random.Random) -> Optional[str]:
    c, h, w = net.shape
    size = rng.choice([1, 2, 2, 3])
    stride = rng.choice([1, 2]) if min(h, w) >= 4 else 1
    # Any padding below the size, odd ones included (never a window wholly outside the input).
    padding = rng.randint(0, size - 1) if rng.random() < 0.7 else None
    pad = size - 1 if padding is None else padding
    out_h, out_w = (h + pad - size) // stride + 1, (w + pad - size) // stride + 1
    if out_h < 1 or out_w < 1:
        return None
    net.shapes.append((c, out_h, out_w))
    return "\n".join(["[maxpool]", f"size={size}", f"stride={stride}"] +
                     ([] if padding is None else [f"padding={padding}"]))


def make_avgpool(net: Net, rng: random.Random) -> Optional[str]:
    c, h, w = net.shape
    if len(net.shapes) < 3 or rng.random() < 0.5:  # rare, and not early: it ends all spatial structure
        return None
    net.shapes.append((c, 1, 1))
    return "[avgpool]"


def make_upsample(net: Net, rng: random.Random) -> Optional[str]:
    c, h, w = net.shape
    if 2 * max(h, w) > MAX_SIDE:
        return None
    net.shapes.append((c, 2 * h, 2 * w))
    return "[upsample]\nstride=2" + (f"\nscale={rng.choice([0.5, 2.0])}" if rng.random() < 0.3 else "")


def make_route(net: Net, rng: random.Random) -> Optional[str]:
    candidates = net.readable()
    if not candidates:
        return None
    first = rng.choice(candidates)
    hw = net.shapes[first][1:]
    same = [i for i in candidates if net.shapes[i][1:] == hw and i != first]
    layers = [first] + rng.sample(same, k=min(len(same), rng.choice([0, 1, 1, 2])))
    channels = [net.shapes[i][0] for i in layers]
    groups = rng.choice([g for g in (1, 2) if all(ch % g == 0 for ch in channels)])
    group_id = rng.randrange(groups)
    here = len(net.shapes)
    refs = ",".join(str(i - here) if rng.random() < 0.5 else str(i) for i in layers)
    net.shapes.append((sum(channels) // groups, *hw))
    return "\n".join(["[route]", f"layers={refs}"] +
                     ([f"groups={groups}", f"group_id={group_id}"] if groups > 1 else []))


def make_shortcut(net: Net, rng: random.Random) -> Optional[str]:
    c, h, w = net.shape
    here = len(net.shapes)
    candidates = [i for i in net.readable() if net.shapes[i][1:] == (h, w) and i < here - 1]
    if not candidates:
        return None
    source = rng.choice(candidates)
    if net.shapes[source][0] != c:
        net.mixed_shortcut = True
    net.shapes.append((c, h, w))
    return "\n".join(["[shortcut]", f"from={source - here}", f"activation={rng.choice(activations())}"])


def make_reorg(net: Net, rng: random.Random) -> Optional[str]:
    c, h, w = net.shape
    if h % 2 or w % 2 or c % 4:
        return None
    net.shapes.append((c * 4, h // 2, w // 2))
    return "[reorg]\nstride=2"


def make_dropout(net: Net, rng: random.Random) -> Optional[str]:
    net.shapes.append(net.shape)
    return f"[dropout]\nprobability={rng.choice([0.1, 0.25, 0.5])}"


def make_yolo(net: Net, rng: random.Random) -> Optional[str]:
    """A 1x1 conv with the head's filters, then the [yolo] head itself (two layers)."""
    classes, masks = rng.randint(1, 3), rng.randint(1, 3)
    anchors = [rng.randint(4, 60) for _ in range(2 * 4)]
    mask = sorted(rng.sample(range(4), masks))
    new_coords = rng.random() < 0.3  # the conv then applies the logistic, the head none
    conv = make_convolutional(net, rng, filters=(classes + 5) * masks, size=1,
                              activation="logistic" if new_coords else "linear")
    net.types.append("convolutional")
    net.sections.append(conv)
    net.shapes.append(net.shape)
    scale = rng.choice([1.0, 1.05, 1.2])
    return "\n".join(["[yolo]", f"mask={','.join(map(str, mask))}", f"anchors={','.join(map(str, anchors))}",
                      f"classes={classes}", "num=4", f"scale_x_y={scale}", f"new_coords={int(new_coords)}"])


def make_rnn(net: Net, rng: random.Random) -> Optional[str]:
    out = rng.choice([3, 4, 6])
    net.shapes.append((out, 1, 1))
    return "\n".join(["[rnn]", f"output={out}", f"hidden={rng.choice([3, 5])}", f"activation={rng.choice(activations())}",
                      f"batch_normalize={rng.randint(0, 1)}", f"shortcut={rng.randint(0, 1)}",
                      f"logistic={rng.randint(0, 1)}"])


def make_gru(net: Net, rng: random.Random) -> Optional[str]:
    out = rng.choice([3, 4, 6])
    net.shapes.append((out, 1, 1))
    return "\n".join(["[gru]", f"output={out}", f"batch_normalize={rng.randint(0, 1)}"])


def make_lstm(net: Net, rng: random.Random) -> Optional[str]:
    out = rng.choice([3, 4, 6])
    net.shapes.append((out, 1, 1))
    return "\n".join(["[lstm]", f"output={out}", f"batch_normalize={rng.randint(0, 1)}"])


def make_crnn(net: Net, rng: random.Random) -> Optional[str]:
    c, h, w = net.shape
    size = rng.choice([1, 3])
    hidden, out = rng.choice([2, 4]), rng.choice([2, 4, 6])
    groups = rng.choice([g for g in _divisors(c) if hidden % g == 0 and out % g == 0]) if rng.random() < 0.3 else 1
    net.shapes.append((out, h, w))
    return "\n".join(["[crnn]", f"output={out}", f"hidden={hidden}", f"size={size}", "pad=1", f"groups={groups}",
                      f"activation={rng.choice(activations(conv=True))}", f"batch_normalize={rng.randint(0, 1)}",
                      f"shortcut={rng.randint(0, 1)}"])


def make_conv_lstm(net: Net, rng: random.Random) -> Optional[str]:
    c, h, w = net.shape
    size, out = rng.choice([1, 3]), rng.choice([2, 4])
    net.shapes.append((out, h, w))
    lines = ["[conv_lstm]", f"output={out}", f"size={size}", "pad=1", f"activation={rng.choice(activations(conv=True))}",
             f"batch_normalize={rng.randint(0, 1)}", f"peephole={rng.randint(0, 1)}"]
    if rng.random() < 0.3:
        lines.append(f"state_constrain={rng.choice([0, 1, 2])}")
    return "\n".join(lines)


def make_shortcut_weighted(net: Net, rng: random.Random) -> Optional[str]:
    """[shortcut] over one or two earlier layers of the same shape, with learned weights."""
    here = len(net.shapes)
    candidates = [i for i in net.readable() if net.shapes[i] == net.shape and i < here - 1]
    if not candidates:
        return None
    sources = rng.sample(candidates, k=min(len(candidates), rng.choice([1, 2])))
    weights_type = rng.choice(["none", "per_feature", "per_channel"])
    # Darknet refuses weights_normalization=none with weights (src/parser.c parse_shortcut tests the wrong string).
    normalization = "none" if weights_type == "none" else rng.choice(["relu", "softmax"])
    net.shapes.append(net.shape)
    return "\n".join(["[shortcut]", f"from={','.join(str(i - here) for i in sources)}",
                      f"weights_type={weights_type}", f"weights_normalization={normalization}",
                      f"activation={rng.choice(activations())}"])


def make_connected(net: Net, rng: random.Random) -> Optional[str]:
    out = rng.choice([3, 4, 8])
    net.shapes.append((out, 1, 1))
    return "\n".join(["[connected]", f"output={out}", f"activation={rng.choice(activations())}",
                      f"batch_normalize={rng.randint(0, 1)}"])


def make_batchnorm(net: Net, rng: random.Random) -> Optional[str]:
    net.shapes.append(net.shape)
    return "[batchnorm]"


def make_activation(net: Net, rng: random.Random) -> Optional[str]:
    net.shapes.append(net.shape)
    return f"[activation]\nactivation={rng.choice(activations())}"


def make_local_avgpool(net: Net, rng: random.Random) -> Optional[str]:
    section = make_maxpool(net, rng)
    return None if section is None else section.replace("[maxpool]", "[local_avgpool]")


def make_scale_channels(net: Net, rng: random.Random) -> Optional[str]:
    """A squeeze-excitation block: [avgpool], a logistic 1x1 conv back to c channels, [scale_channels]."""
    c, h, w = net.shape
    if h * w == 1 or net.types[-1] in NOT_READABLE:
        return None
    target = len(net.shapes) - 1
    for kind, section in (("avgpool", "[avgpool]"), ("convolutional", None)):
        if section is None:
            section = make_convolutional(net, rng, filters=c, size=1, activation="logistic")
        else:
            net.shapes.append((c, 1, 1))
        net.types.append(kind)
        net.sections.append(section)
    net.shapes.append((c, h, w))
    return f"[scale_channels]\nfrom={target - len(net.shapes) + 1}\nactivation={rng.choice(activations())}"


def make_sam(net: Net, rng: random.Random) -> Optional[str]:
    here = len(net.shapes)
    candidates = [i for i in net.readable() if net.shapes[i] == net.shape and i < here - 1]
    if not candidates:
        return None
    net.shapes.append(net.shape)
    return f"[sam]\nfrom={rng.choice(candidates) - here}\nactivation={rng.choice(activations())}"


def make_reorg3d(net: Net, rng: random.Random) -> Optional[str]:
    """Forward only: Darknet's reverse=1 divides by c / stride^4 (src/blas.c reorg_cpu), SIGFPE below 16 channels."""
    c, h, w = net.shape
    if h % 2 or w % 2:
        return None
    net.shapes.append((4 * c, h // 2, w // 2))
    return "[reorg3d]\nstride=2"


Maker = Callable[[Net, random.Random], Optional[str]]
# (section type, relative weight, maker): adding a layer type is one line here.
MAKERS: List[Tuple[str, float, Maker]] = [
    ("convolutional", 4, make_convolutional),
    ("maxpool", 2, make_maxpool),
    ("avgpool", 0.3, make_avgpool),
    ("upsample", 1, make_upsample),
    ("route", 1.5, make_route),
    ("shortcut", 1.5, make_shortcut),
    ("reorg", 1.5, make_reorg),
    ("dropout", 0.5, make_dropout),
    ("yolo", 0.7, make_yolo),
    ("rnn", 0.3, make_rnn),
    ("gru", 0.3, make_gru),
    ("lstm", 0.3, make_lstm),
    ("crnn", 0.6, make_crnn),
    ("conv_lstm", 0.6, make_conv_lstm),
    ("shortcut", 0.7, make_shortcut_weighted),
    ("connected", 0.3, make_connected),
    ("batchnorm", 0.5, make_batchnorm),
    ("activation", 0.5, make_activation),
    ("local_avgpool", 0.7, make_local_avgpool),
    ("scale_channels", 0.5, make_scale_channels),
    ("sam", 0.5, make_sam),
    ("reorg3d", 0.7, make_reorg3d),
]
RECURRENT = {"rnn", "gru", "lstm", "crnn", "conv_lstm"}


def available_makers() -> List[Tuple[str, float, Maker]]:
    """The makers whose section type the model builds today (types land one module at a time)."""
    from yolo.models.layer_types.registry import BUILDERS
    import yolo.models.model  # noqa: F401  (registers every builder)
    return [m for m in MAKERS if m[0] in BUILDERS]
NOT_READABLE = {"yolo", "gru"}
AFTER_NON_IMAGE = {"route", "rnn", "gru", "lstm"}  # what Darknet accepts after a layer with no image shape


@dataclass
class RandomCfg:
    seed: int
    text: str
    input_shape: Shape
    types: List[str]
    mixed_shortcut: bool

    @property
    def recurrent(self) -> bool:
        return any(t in RECURRENT for t in self.types)


def random_cfg(seed: int, min_layers: int = 5, max_layers: int = 11) -> RandomCfg:
    """A random cfg valid for Darknet and for us; the same seed always gives the same cfg."""
    rng = random.Random(seed)
    c, h, w = rng.choice([1, 3, 4]), rng.randint(4, 16), rng.randint(4, 16)
    net = Net((c, h, w))
    net.sections.append(make_convolutional(net, rng))  # a first layer wider and taller than 1 (see above)
    net.types.append("convolutional")
    target = rng.randint(min_layers, max_layers)
    names, weights, makers = zip(*available_makers())
    while len(net.shapes) < target:
        index = rng.choices(range(len(names)), weights=weights)[0]
        if names[index] in ("yolo", "scale_channels") and len(net.shapes) + 3 > target:
            continue
        if net.types[-1] == "gru" and names[index] not in AFTER_NON_IMAGE:
            continue
        section = makers[index](net, rng)
        if section is None:
            continue
        net.types.append(names[index])
        net.sections.append(section)
        if names[index] == "yolo":  # nothing may read a head's output: continue from a route
            route = make_route(net, rng)
            net.types.append("route")
            net.sections.append(route)
    if rng.random() < 0.3 and net.types[-1] not in NOT_READABLE:
        groups = rng.choice(_divisors(net.shape[0]))
        net.shapes.append(net.shape)
        net.types.append("softmax")
        net.sections.append(f"[softmax]\ngroups={groups}")
    header = f"[net]\nbatch=1\nchannels={c}\nheight={h}\nwidth={w}\n"
    return RandomCfg(seed, header + "\n\n".join(net.sections) + "\n", (c, h, w), net.types, net.mixed_shortcut)


# ----------------------------------------------------------------------------- helpers shared by the tests


def randomize_weights(model: torch.nn.Module, seed: int) -> None:
    """Random, well-scaled values for every weight, bias, BN affine term and BN running statistic."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / m.weight[0].numel() ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.2)
            elif isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                m.weight.copy_(0.5 + torch.rand(n, generator=g))
                m.bias.copy_((torch.rand(n, generator=g) - 0.5) * 0.4)
                m.running_mean.copy_((torch.rand(n, generator=g) - 0.5) * 0.4)
                m.running_var.copy_(0.5 + torch.rand(n, generator=g))


def yolo_output(head_input: np.ndarray, head) -> np.ndarray:
    """Darknet's [yolo] layer output for its input Float[N, A*(5+C), H, W]: logistic on x, y, objectness and
    classes (none with new_coords=1), x and y then scaled by scale_x_y around 0.5 (src/yolo_layer.c
    ``forward_yolo_layer``)."""
    n, _, h, w = head_input.shape
    x = head_input.reshape(n, -1, 5 + head.num_classes, h, w).copy()
    s = head.opts.scale_x_y
    if not head.opts.new_coords:
        logistic = 1 / (1 + np.exp(-x))
        x[:, :, 0:2] = logistic[:, :, 0:2]
        x[:, :, 4:] = logistic[:, :, 4:]
    x[:, :, 0:2] = x[:, :, 0:2] * s - 0.5 * (s - 1)
    return x.reshape(head_input.shape)


def relative_error(ref: np.ndarray, ours: np.ndarray) -> float:
    """max |ref - ours| over max |ref| (at least 1e-6)."""
    return float(np.abs(ref - ours).max() / max(1e-6, float(np.abs(ref).max())))
