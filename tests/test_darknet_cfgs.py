"""Every cfg Darknet ships, against Darknet itself: each one Darknet builds must build here and give the same
output at every layer; each one Darknet refuses must be refused here with a one-line cfg error.

Per cfg (random weights written by our writer, read by Darknet):
* parity: one image at a time (Darknet's batched [shortcut] reads the wrong image when channel counts differ,
  see ../shared/darknet/README.md), every layer within 1e-4 of the layer's largest value;
* the ``.weights`` round trip (read back, written again) is byte-identical;
* backward from the outputs reaches every parameter.

Sizes: the smallest multiple of 32 (from 32 up) at which the cfg builds (every layer valid), so that the
whole folder runs in CI time; Darknet runs at the same size. Cfgs whose layers equal an already compared
cfg's are skipped, and so are those above MAX_CI_PARAMETERS unless YOLO_FULL_CFGS=1.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from darknet_ref import darknet_source, set_net_options
from helpers import randomize_model, without_default_init
from yolo.errors import CfgError
from yolo.models.layer_types.crop import Crop
from yolo.models.layer_types.convolutional import BinaryConvBNAct
from yolo.models.model import Darknet

CFG_DIR = darknet_source() / "cfg"
ALL_CFGS = sorted(str(p.relative_to(CFG_DIR)) for p in CFG_DIR.rglob("*.cfg")) if CFG_DIR.is_dir() else []

# Cfgs Darknet itself refuses, and why (checked below: Darknet fails on them, and so do we, with a cfg error).
DARKNET_REFUSES = {
    "resnet50.cfg": "[shortcut] from a layer of another size (parser.c asserts equal sizes)",
    "resnet101.cfg": "[shortcut] from a layer of another size (parser.c asserts equal sizes)",
    "resnet152.cfg": "[shortcut] from a layer of another size (parser.c asserts equal sizes)",
    "resnext152-32x4d.cfg": "[shortcut] from a layer of another size (parser.c asserts equal sizes)",
    "yolo9000.cfg": "[region] tree=data/9k.tree: the file is not shipped (hierarchical softmax)",
}
# Cfgs Darknet builds that this framework does not build yet, with the reason (expected failures).
NOT_YET: dict = {}
# Cfgs that crash Darknet's CPU path, which the harness runs: built, round-tripped and backpropagated here,
# not compared. xnor=1: binarize_weights is given the layer's weight count as the filter size and writes
# past its buffer (tests/test_layer_types.py checks our binary convolution against the CUDA path's formula).
DARKNET_CPU_CRASHES = {
    "darknet53_448_xnor.cfg": "xnor", "tiny-yolo_xnor.cfg": "xnor", "yolov3-tiny_xnor.cfg": "xnor",
    "yolov1/xyolo.test.cfg": "xnor",
    # Vector networks ([net] inputs=256): parse_network_cfg divides by the count of layers wider and taller
    # than 1, which is 0 here (SIGFPE). tests/test_recurrent_layers.py compares them with a 1x1 conv in front.
    **{cfg: "vector network" for cfg in ("rnn.cfg", "rnn.train.cfg", "gru.cfg", "lstm.train.cfg", "crnn.train.cfg")},
}

# Darknet leaves these layers' outputs unwritten in inference (losses, or heads whose output is their input).
NOT_COMPARED = {"cost", "contrastive", "yolo", "region", "gaussian_yolo", "detection"}

# Each test runs Darknet's harness on a cfg: the slow tier (pytest -m "not slow" leaves them out).
pytestmark = pytest.mark.slow

TOLERANCE = 1e-4
# CI time: writing, reading and comparing random weights is what costs (about 1 s per 10M parameters on a
# loaded 2-core machine). Cfgs above this size run with YOLO_FULL_CFGS=1; their layer types all occur in
# smaller cfgs (and in tests/test_layer_types.py).
MAX_CI_PARAMETERS = 70_000_000
FULL = os.environ.get("YOLO_FULL_CFGS") == "1"
# Layer structure -> the cfg first compared with it: a cfg whose sections equal an earlier one's except in its
# heads (yolov4-custom.cfg and yolov4.cfg differ only in [yolo] options) is not compared twice.
_COMPARED: dict = {}
SIZES = [32 * k for k in range(1, 21)]


def _smallest_model(cfg: str, tmp_path: Path):
    """(model, cfg path, size) at the smallest square size in SIZES where the cfg builds.

    The model's weights are left as allocated: :func:`randomize` sets every one (for each cfg compared here it
    gives the same tensors as after torch's default initialisation), and Darknet reads what we write."""
    text = (CFG_DIR / cfg).read_text(errors="replace")
    last = None
    for size in SIZES:
        path = tmp_path / f"{Path(cfg).stem}_{size}.cfg"
        path.write_text(set_net_options(text, width=size, height=size))
        try:
            with without_default_init():
                return Darknet(path), path, size
        except CfgError as exc:
            last = exc
    raise AssertionError(f"{cfg} builds at no size in {SIZES[0]}..{SIZES[-1]}: {last}")


def randomize(model: Darknet, size: int, seed: int = 0) -> None:
    """randomize_model's conv/BN weights, then random weights and non-trivial statistics for the other types."""
    # The calibration passes run in training mode, where [crop] refuses its CUDA-only colour augmentation:
    # lift that refusal for them (only BatchNorm statistics are wanted from these passes).
    crops = [(m, m.training_refusal) for m in model.modules() if isinstance(m, Crop)]
    for m, _ in crops:
        m.training_refusal = ""
    randomize_model(model, seed=seed, calibrate_hw=(size, size))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / m.in_features ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            elif isinstance(m, torch.nn.BatchNorm1d):
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                m.bias.copy_((torch.rand(m.bias.shape, generator=g) - 0.5) * 0.4)
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
        for module in model.module_list:
            for name, p in module.named_parameters(recurse=False):  # [local] weights, shortcut weights
                if name == "weight" and p.dim() == 3:
                    p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
                elif name == "weight":
                    p.copy_(0.5 + torch.rand(p.shape, generator=g))
                else:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.1)
        # Binary convolutions: every filter gets the same mean |w|, where Darknet's CPU path (one mean over the
        # layer) and its CUDA path (one mean per filter, which we follow) agree.
        for m in model.modules():
            if isinstance(m, BinaryConvBNAct):
                w = m.conv.weight
                w.mul_(w.abs().mean() / w.abs().mean(dim=(1, 2, 3), keepdim=True))
        # Recalibrate BatchNorm on 8 images: deep layers are 1x1 at these sizes, where randomize_model's
        # 2-image statistics are degenerate and activations blow up.
        bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        for bn in bns:
            bn.reset_running_stats()
            bn.momentum = None
        model.train()
        model(torch.rand(8, model.input_channels, size, size, generator=g))
        for m, refusal in crops:
            m.training_refusal = refusal
        for bn in bns:
            bn.momentum = 0.01
            # A wider variance than the 8-image estimate: the test image then stays in range through hundreds
            # of layers whose deepest maps are 1x1, instead of drifting to values where float32 rounding
            # (Darknet's and ours, summed in different orders) exceeds the tolerance.
            bn.running_var.mul_(4.0)
    model.eval()


def _built_cfgs():
    params = []
    for cfg in ALL_CFGS:
        if cfg in DARKNET_REFUSES:
            continue
        marks = []
        if cfg in NOT_YET:
            marks.append(pytest.mark.xfail(reason=NOT_YET[cfg], raises=CfgError, strict=True))
        params.append(pytest.param(cfg, marks=marks, id=cfg))
    return params


@pytest.mark.parametrize("cfg", _built_cfgs())
def test_cfg_matches_darknet_layer_by_layer(cfg, darknet, tmp_path, caplog):
    caplog.set_level(logging.ERROR)
    model, path, size = _smallest_model(cfg, tmp_path)
    # Every non-head section with all its options: equal only when the compared computation is the same.
    structure = (size, tuple((sec.type, () if sec.type in NOT_COMPARED else tuple(sorted(sec.options.items())))
                             for sec in model.sections[1:]))
    if structure in _COMPARED:
        pytest.skip(f"same layers as {_COMPARED[structure]}, compared there")
    parameters = sum(p.numel() for p in model.parameters())
    if parameters > MAX_CI_PARAMETERS and not FULL:
        pytest.skip(f"{parameters / 1e6:.0f}M parameters: set YOLO_FULL_CFGS=1 to compare it")
    randomize(model, size)
    weights = tmp_path / "random.weights"
    model.save_darknet_weights(weights)

    # The .weights round trip is byte-identical.
    with without_default_init():  # every weight is read from the file
        again = Darknet(path)
    again.load_darknet_weights(weights)
    again.save_darknet_weights(tmp_path / "again.weights")
    assert weights.read_bytes() == (tmp_path / "again.weights").read_bytes()

    x = np.random.RandomState(0).rand(1, model.input_channels, size, size).astype(np.float32)
    if cfg not in DARKNET_CPU_CRASHES:
        _compare_layers(cfg, darknet, path, weights, again, x, size)

    # Backward from every output (the heads' and the last layer's, which a loss-only layer such as [contrastive]
    # passes on) reaches every parameter. Eval mode: [crop] refuses its CUDA-only training augmentation.
    model.eval()
    outputs, heads = model.layer_outputs(torch.from_numpy(np.concatenate([x, x[:, :, ::-1].copy()])))
    sum(p.float().mean() for p in [*heads, outputs[-1]]).backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, f"no finite gradient for {missing[:5]}"
    _COMPARED[structure] = cfg


def _compare_layers(cfg, darknet, path, weights, model, x, size):
    dump = darknet.forward(path, weights, x)
    again = model
    with torch.no_grad():
        outputs, _ = again.eval().layer_outputs(torch.from_numpy(x))
    assert len(dump.layers) == len(outputs), f"Darknet has {len(dump.layers)} layers, we have {len(outputs)}"
    for i, (meta, ours) in enumerate(zip(dump.layers, outputs)):
        if model.sections[i + 1].type in NOT_COMPARED:  # our section names: Darknet prints "none" for some
            continue
        ref = dump.out(i)
        ours = ours.numpy().reshape(ref.shape) if ours.numel() == ref.size else ours.numpy()
        assert ref.shape == ours.shape, f"layer {i} ({meta.type}): Darknet {ref.shape}, ours {ours.shape}"
        scale = max(1e-6, float(np.abs(ref).max()))
        err = float(np.abs(ref - ours).max()) / scale
        assert err < TOLERANCE, f"{cfg} layer {i} ({meta.type}) at {size}x{size}: relative error {err:.2e}"


@pytest.mark.parametrize("cfg", sorted(DARKNET_REFUSES))
def test_cfgs_darknet_refuses_are_refused(cfg, darknet):
    with pytest.raises(RuntimeError):
        darknet.layers(CFG_DIR / cfg)
    with pytest.raises(CfgError) as info:
        Darknet(CFG_DIR / cfg)
    message = str(info.value)
    assert "\n" not in message and f"{cfg}:" in message, message


@pytest.mark.parametrize("cfg", ["yolov4-tiny.cfg", "yolov3-tiny-prn.cfg", "efficientnet_b0.cfg", "alexnet.cfg",
                                 "yolov1/tiny-yolo.cfg", "cspx-p7-mish.cfg", "yolov4-tiny_contrastive.cfg",
                                 "yolov4-sam-mish-csp-reorg-bfm.cfg"])
def test_bflops_per_layer_equal_darknets(cfg, darknet, tmp_path):
    """Each layer's BFLOPs in our summary equal Darknet's ``l.bflops`` (as it prints them when parsing)."""
    from yolo.models.summary import layer_rows

    model, path, size = _smallest_model(cfg, tmp_path)
    metas = darknet.layers(path)
    rows = layer_rows(model)
    assert len(rows) == len(metas)
    for row, meta in zip(rows, metas):
        assert row.bflops == pytest.approx(meta.bflops, rel=1e-5, abs=1e-9), f"layer {row.index} ({meta.type})"
