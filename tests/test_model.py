"""Every cfg builds and runs: forward at two sizes (one non-square) without NaN, backward reaches every
parameter; eval decode against a hand-written formula; BFLOPs against Darknet's published totals."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from cfg_snippets import ONE_HEAD_CFG
from conftest import CLASSIFIER_CFGS, DETECTION_CFGS, asset
from helpers import randomize_model
from yolo import Darknet
from yolo.models.cfg import parse_cfg
from yolo.models.heads import HeadOptions
from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.maxpool import MaxPool
from yolo.models.layer_types.reorg import Reorg
from yolo.models.layer_types.yolo_head import YOLOLayer
from yolo.models.model import load_model
from yolo.models.summary import total_bflops


@pytest.mark.slow
@pytest.mark.parametrize("name", DETECTION_CFGS + CLASSIFIER_CFGS)
def test_sweep_forward_two_sizes_and_backward_reaches_every_parameter(name):
    torch.manual_seed(0)
    model = Darknet(asset(f"cfg/{name}"))
    s = model.stride
    randomize_model(model, seed=1, calibrate_hw=(4 * s, 4 * s))
    for hw in [(2 * s, 2 * s), (2 * s, 3 * s)]:
        model.eval()
        with torch.no_grad():
            out = model(torch.rand(2, model.input_channels, *hw))
        assert torch.isfinite(out).all()
        if model.yolo_layers:
            cells = sum(h.num_anchors * round(hw[0] / h.stride[0]) * round(hw[1] / h.stride[1])
                        for h in model.yolo_layers)
            assert out.shape == (2, cells, 5 + model.num_classes)
    model.train()
    outputs = model(torch.rand(2, model.input_channels, 2 * s, 2 * s))
    loss = sum(o.float().square().mean() for o in (outputs if isinstance(outputs, list) else [outputs]))
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, missing
    zero = [n for n, p in model.named_parameters() if p.grad.abs().sum() == 0]
    assert len(zero) == 0, zero


def test_yolo_decode_matches_darknet_formula():
    """Hand-written Darknet decode for one cell, with scale_x_y and new_coords."""
    anchors = torch.tensor([[10.0, 14.0], [23.0, 27.0], [37.0, 58.0]])
    raw = torch.randn(1, 2 * 7, 4, 6)  # A=2 anchors (mask 1,2), 2 classes, 4x6 grid
    for scale, new_coords in [(1.0, 0), (1.2, 0), (2.0, 1)]:
        head = YOLOLayer(anchors, [1, 2], 2, HeadOptions(scale_x_y=scale, new_coords=new_coords)).eval()
        x = raw.sigmoid() if new_coords else raw
        out = head(x, (128, 192)).reshape(1, 2, 4, 6, 7)
        a, j, i = 1, 2, 5
        t = x[0, a * 7:(a + 1) * 7, j, i].tolist()
        sig = (lambda v: v) if new_coords else (lambda v: 1 / (1 + math.exp(-v)))
        bx = (i + sig(t[0]) * scale - (scale - 1) / 2) / 6 * 192
        by = (j + sig(t[1]) * scale - (scale - 1) / 2) / 4 * 128
        if new_coords:
            bw, bh = 4 * t[2] ** 2 * 37.0, 4 * t[3] ** 2 * 58.0
        else:
            bw, bh = math.exp(t[2]) * 37.0, math.exp(t[3]) * 58.0
        expected = [bx, by, bw, bh, sig(t[4]), sig(t[5]), sig(t[6])]
        assert out[0, a, j, i].tolist() == pytest.approx(expected, rel=1e-5, abs=1e-5)


def test_maxpool_stride1_repeats_edge_not_zero():
    """Darknet's size=2 stride=1 maxpool ignores out-of-range cells: on all-negative input the last
    column equals the input's last column (zero padding would give 0)."""
    pool = MaxPool(size=2, stride=1, padding=1)
    x = -torch.arange(1, 17, dtype=torch.float32).reshape(1, 1, 4, 4)
    y = pool(x)
    assert y.shape == x.shape
    assert torch.equal(y[0, 0, :, -1], torch.maximum(x[0, 0, :, -1], torch.cat([x[0, 0, 1:, -1], x[0, 0, -1:, -1]])))
    assert (y < 0).all()


def test_reorg_matches_darknet_index_formula():
    """Darknet's reorg_cpu (forward=0) written as a plain loop over indices."""
    n, c, h, w, s = 1, 8, 4, 6, 2
    x = torch.randn(n, c, h, w)
    flat = x.flatten().tolist()
    out = [0.0] * len(flat)
    out_c = c // (s * s)
    for k in range(c):
        for j in range(h):
            for i in range(w):
                in_index = i + w * (j + h * k)
                c2, offset = k % out_c, k // out_c
                w2, h2 = i * s + offset % s, j * s + offset // s
                out[in_index] = flat[w2 + w * s * (h2 + h * s * c2)]
    expected = torch.tensor(out).reshape(n, c * s * s, h // s, w // s)
    assert torch.equal(Reorg(s)(x), expected)


def test_fuse_keeps_outputs():
    model = Darknet(asset("cfg/yolov3-tiny.cfg")).load_darknet_weights(asset("weights/yolov3-tiny.weights")).eval()
    x = torch.rand(1, 3, 320, 416)
    with torch.no_grad():
        before = model(x)
        after = model.fuse()(x)
    assert not any(m.bn is not None for m in model.module_list if isinstance(m, ConvBNAct))
    assert torch.allclose(before, after, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name,size,published", [
    ("yolov3.cfg", 416, 65.9), ("yolov3-tiny.cfg", 416, 5.6), ("yolov3-spp.cfg", 608, 141.5),
])
def test_bflops_match_darknet_published_totals(name, size, published):
    model = Darknet(asset(f"cfg/{name}"))
    assert total_bflops(model, (size, size)) == pytest.approx(published, abs=0.06)


def test_summary_table():
    model = Darknet(asset("cfg/yolov3-tiny.cfg"))
    text = model.summary((416, 416))
    lines = text.splitlines()
    assert len(lines) == 1 + len(model.module_list) + 1
    assert "416 x 416 x 3 ->" in lines[1] and "0.150" in lines[1]  # Darknet prints 0.150 BFLOPs for layer 0
    assert "8,858,734 weights-file floats" in lines[-1] and "5.571" in lines[-1]  # Darknet: Total BFLOPS 5.571


@pytest.fixture(scope="module")
def one_cfg(tmp_path_factory) -> Path:
    cfg = tmp_path_factory.mktemp("api") / "one.cfg"
    cfg.write_text(ONE_HEAD_CFG)
    return cfg


# ------------------------------------------------------------------------------------ model
CFG_TYPE = "cfg must be a .cfg path (str or pathlib.Path) or a sequence of sections from yolo.models.cfg.parse_cfg"


@pytest.mark.parametrize("cfg, error, message", [
    (5, TypeError, f"{CFG_TYPE}, got int 5"),
    (None, TypeError, f"{CFG_TYPE}, got NoneType None"),
    (b"one.cfg", TypeError, f"{CFG_TYPE}, got bytes b'one.cfg'"),
    ([], ValueError, "cfg: no sections given (a network starts with its [net] section)"),
    (["a"], TypeError, "cfg must be a sequence of sections from yolo.models.cfg.parse_cfg, got str 'a' in it"),
])
def test_a_darknet_cfg_of_the_wrong_kind_is_refused(cfg, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        Darknet(cfg)


@pytest.mark.parametrize("bn_eps, error, message", [
    ("x", TypeError, "bn_eps must be a number, got str 'x'"),
    (float("nan"), ValueError, "bn_eps: nan is out of range: BatchNorm's epsilon must be a finite number above 0"),
    (0, ValueError, "bn_eps: 0 is out of range: BatchNorm's epsilon must be a finite number above 0"),
    (-1e-5, ValueError, "bn_eps: -1e-05 is out of range: BatchNorm's epsilon must be a finite number above 0"),
])
def test_a_batchnorm_epsilon_that_cannot_work_is_refused_at_construction(one_cfg, bn_eps, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        Darknet(str(one_cfg), bn_eps=bn_eps)


def test_darknet_still_takes_a_path_or_parsed_sections(one_cfg):
    from_sections = Darknet(parse_cfg(one_cfg), bn_eps=1e-6)
    assert len(from_sections.module_list) == len(Darknet(one_cfg).module_list)
    assert {m.eps for m in from_sections.modules() if isinstance(m, torch.nn.BatchNorm2d)} == {1e-6}


@pytest.mark.parametrize("arguments, message", [
    (dict(cfg=b"one.cfg"), "cfg must be a path (str or pathlib.Path), got bytes b'one.cfg'"),
    (dict(weights=5), "weights must be a path (str or pathlib.Path), got int 5"),
    (dict(weights="w.weights", cutoff="3"), "cutoff must be an integer (the number of layers to read), got str '3'"),
])
def test_load_model_refuses_arguments_of_the_wrong_type(one_cfg, arguments, message):
    arguments = {"cfg": str(one_cfg), **arguments}
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        load_model(**arguments)
