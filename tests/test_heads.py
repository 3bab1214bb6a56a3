"""The head interface (yolo.models.heads): every head type is recognized as one, and the shared [yolo] decode
equals Darknet's formula written out cell by cell, also when traced at one size and run at another."""
from __future__ import annotations

import logging
import math

import pytest
import torch
import torch.nn as nn

from cfg_snippets import ONE_HEAD_CFG
from yolo.errors import CfgError
from yolo.models.heads import HeadOptions, is_head
from yolo.models.layer_types.convolutional import ConvBNAct
from yolo.models.layer_types.detection import DetectionLayer
from yolo.models.layer_types.gaussian_yolo import GaussianYOLOLayer, GaussianYoloOptions
from yolo.models.layer_types.maxpool import MaxPool
from yolo.models.layer_types.region import RegionLayer
from yolo.models.layer_types.yolo_head import YOLOLayer
from yolo.models.model import load_model

ANCHORS = torch.tensor([10.0, 14, 23, 27, 37, 58, 81, 82, 135, 169, 344, 319])


def test_every_head_type_is_a_head_and_no_other_layer_is():
    heads = [YOLOLayer(ANCHORS, [3, 4, 5], 2, HeadOptions()),
             RegionLayer(torch.ones(4), 2, True, HeadOptions()),
             GaussianYOLOLayer(ANCHORS, [0, 1], 3, GaussianYoloOptions()),
             DetectionLayer(7, 2, 3, 4, False, True)]
    assert all(is_head(h) for h in heads)
    assert [h.num_outputs for h in heads] == [7, 7, 12, 8]
    assert not any(is_head(m) for m in (ConvBNAct(3, 8, 3, 1, 1, 1, True, "leaky"), MaxPool(2, 2, 1), nn.Identity()))


def reference_decode(raw, anchors, input_hw, scale_x_y):
    """Darknet's get_yolo_box and logistic activations, one value at a time (float64)."""
    n, a, h, w, k = raw.shape
    out = torch.zeros(n, a, h, w, k, dtype=torch.float64)
    sig = lambda v: 1.0 / (1.0 + math.exp(-v))  # noqa: E731
    for b in range(n):
        for i in range(a):
            for row in range(h):
                for col in range(w):
                    t = raw[b, i, row, col].double().tolist()
                    x = sig(t[0]) * scale_x_y - (scale_x_y - 1) / 2
                    y = sig(t[1]) * scale_x_y - (scale_x_y - 1) / 2
                    out[b, i, row, col, 0] = (col + x) / w * input_hw[1]
                    out[b, i, row, col, 1] = (row + y) / h * input_hw[0]
                    out[b, i, row, col, 2] = math.exp(t[2]) * float(anchors[i, 0])
                    out[b, i, row, col, 3] = math.exp(t[3]) * float(anchors[i, 1])
                    out[b, i, row, col, 4:] = torch.tensor([sig(v) for v in t[4:]], dtype=torch.float64)
    return out


def test_yolo_decode_matches_darknet_formula_and_follows_the_traced_size():
    head = YOLOLayer(ANCHORS, [0, 1, 2], 2, HeadOptions(scale_x_y=1.1)).eval()
    gen = torch.Generator().manual_seed(0)
    for hw, input_hw in (((3, 4), (96, 128)), ((5, 2), (160, 64))):
        x = torch.randn(2, 3 * 7, *hw, generator=gen)
        expected = reference_decode(x.reshape(2, 3, 7, *hw).permute(0, 1, 3, 4, 2), head.anchors, input_hw, 1.1)
        got = head(x, input_hw)
        torch.testing.assert_close(got.double(), expected.reshape(2, -1, 7), rtol=1e-5, atol=1e-4)

    class Net(nn.Module):  # the head reads the input size from the traced input, as Darknet.forward does
        def __init__(self):
            super().__init__()
            self.head = head

        def forward(self, x):
            return self.head(x[:, :21, ::32, ::32], x.shape[-2:])

    traced = torch.jit.trace(Net(), torch.randn(1, 21, 96, 128), check_trace=False)
    x = torch.randn(1, 21, 160, 64, generator=gen)
    torch.testing.assert_close(traced(x), Net()(x))


# -------------------------------------------------------------------------------------- [yolo] cfg options
def one_head_cfg_with(tmp_path, *head_lines: str):
    """ONE_HEAD_CFG with ``head_lines`` added at the end of its [yolo] section (the last one on line 45 + k)."""
    path = tmp_path / "head.cfg"
    path.write_text(ONE_HEAD_CFG + "".join(line + "\n" for line in head_lines))
    assert len(ONE_HEAD_CFG.splitlines()) == 44  # the lines below are numbered from here
    return path


@pytest.mark.parametrize("lines, expected", [
    (["nms_kind=diounms", "beta_nms=-5"],
     "46: [yolo] (layer 4): beta_nms=-5 must be above 0 with nms_kind=diounms (Darknet's DIoU-NMS subtracts "
     "(d/c)^beta_nms: at 0 or below it suppresses nothing)"),
    (["beta_nms=0", "nms_kind=diounms"],
     "45: [yolo] (layer 4): beta_nms=0 must be above 0 with nms_kind=diounms (Darknet's DIoU-NMS subtracts "
     "(d/c)^beta_nms: at 0 or below it suppresses nothing)"),
    (["scale_x_y=-1"], "45: [yolo] (layer 4): scale_x_y=-1 must be positive"),
    (["scale_x_y=0"], "45: [yolo] (layer 4): scale_x_y=0 must be positive"),
])
def test_yolo_head_refuses_options_that_break_its_nms_or_decode(tmp_path, lines, expected):
    path = one_head_cfg_with(tmp_path, *lines)
    with pytest.raises(CfgError) as error:
        load_model(path)
    assert str(error.value) == f"{path}:{expected}"


def test_yolo_head_takes_positive_beta_and_scale_and_an_unused_beta(tmp_path, caplog):
    for lines in (["nms_kind=diounms", "beta_nms=0.3", "scale_x_y=1.05"], ["nms_kind=greedynms", "beta_nms=0"]):
        with caplog.at_level(logging.WARNING):
            load_model(one_head_cfg_with(tmp_path, *lines))
    assert not caplog.records


def test_yolo_head_warns_of_an_unknown_nms_kind(tmp_path, caplog):
    path = one_head_cfg_with(tmp_path, "nms_kind=unknown")
    with caplog.at_level(logging.WARNING):
        load_model(path)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}:45: [yolo] nms_kind=unknown is not one of default, greedynms, diounms: using default NMS, as "
        "Darknet does"]
