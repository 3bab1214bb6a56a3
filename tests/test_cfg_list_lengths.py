"""Cfg lists whose length must match another key, against Darknet's parser (src/parser.c).

For each case: what Darknet does with it (run through tests/darknet_ref where it accepts the cfg), and ours:
the same values where Darknet's are defined (with a warning naming the file and line when the list is
probably a typo), a one-line :class:`yolo.errors.CfgError` naming the file and line where Darknet reads or
writes past a buffer, reads garbage or stops.

* head ``anchors`` vs ``num`` ([yolo], [Gaussian_yolo], [region]): Darknet fills ``2 * num`` values with 0.5
  and copies the list over them (yolo.models.layer_types.head_anchors);
* ``mask`` values vs ``num``; an empty item in any list (``layers=-1,``: Darknet reads a 0, layer 0);
* [yolo] ``counters_per_class`` vs ``classes``; [net] ``scales`` vs ``steps``; [route] ``group_id`` vs ``groups``.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

from cfg_snippets import CONV8, RATE_CFG, net_section
from darknet_parity import darknet_heads, ours_from_cfg
from darknet_ref import set_net_options
from yolo.errors import CfgError
from yolo.models.model import Darknet

CLASSES = 2


def head_cfg(head: str, options: str, anchors_per_head: int) -> str:
    """Two convs and one head; the conv before the head sized for ``anchors_per_head`` boxes per cell."""
    entries = {"yolo": 5, "Gaussian_yolo": 9, "region": 5}[head]
    return net_section(64, 64) + "\n" + CONV8 + f"""
[convolutional]
filters={(CLASSES + entries) * anchors_per_head}
size=1
stride=1
pad=1
activation=linear

[{head}]
classes={CLASSES}
{options}
"""


def build(tmp_path, text: str, name: str = "lists.cfg"):
    path = tmp_path / name
    path.write_text(text)
    return path, Darknet(path)


def line_of(text: str, start: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(start))


# ---------------------------------------------------------------------------- anchors vs num: Darknet's values
ACCEPTED = [  # head, options, boxes per cell, what the warning says (None: no warning)
    ("yolo", "num=6\nmask=0,1,2\nanchors=10,14,  23,27,  37", 3, "'anchors' has 5 values, num=6 takes 12"),
    ("yolo", "num=6\nmask=3,4,5\nanchors=10,14,  23,27,  37", 3, "anchors 2, 3, 4, 5 get Darknet's 0.5"),
    ("yolo", "num=3\nmask=0,1,2\nanchors=10,14, 23,27, 37,58, 81,82, 135,169", 3, "the last 4 are unused"),
    ("yolo", "anchors=10,14, 23,27, 37,58", 1, "the last 4 are unused"),  # num defaults to 1, so does the mask
    ("yolo", "num=3\nmask=0,1,2\nanchors=10,14, 23,27, 37,58", 3, None),
    ("Gaussian_yolo", "num=3\nmask=0,1,2\nanchors=10,14, 23,27, 37", 3, "'anchors' has 5 values, num=3 takes 6"),
    ("Gaussian_yolo", "num=4\nmask=1,2\nanchors=10,14, 23,27, 37,58", 2, "anchor 3 gets Darknet's 0.5"),
    ("region", "num=3\nanchors=1.08,1.19, 3.42,4.41, 6.63", 3, "'anchors' has 5 values, num=3 takes 6"),
    ("region", "num=2\nanchors=1.08,1.19, 3.42,4.41, 6.63,11.38", 2, "the last 2 are unused"),
    ("region", "num=2", 2, None),  # no anchors: Darknet's 0.5 cells, as Darknet (no warning: its default)
]


@pytest.mark.parametrize("head,options,boxes,warning", ACCEPTED, ids=[f"{c[0]}-{i}" for i, c in enumerate(ACCEPTED)])
def test_head_anchors_equal_darknets(darknet, tmp_path, caplog, head, options, boxes, warning):
    text = head_cfg(head, options, boxes)
    with caplog.at_level(logging.WARNING):
        path, model = build(tmp_path, text)
    (ref,) = darknet_heads(darknet, path)[0]
    ours = model.yolo_layers[0]
    values = (ours.anchors_cells if head == "region" else ours.all_anchors).flatten().tolist()
    assert values == pytest.approx(ref["anchors"], rel=1e-6)
    if head != "region":
        assert ours.mask == ref["mask"]
    messages = [r.getMessage() for r in caplog.records if "anchors" in r.getMessage()]
    if warning is None:
        assert not messages
    else:
        assert len(messages) == 1 and warning in messages[0], messages
        assert messages[0].startswith(f"{path}:{line_of(text, 'anchors')}: [{head.lower()}]"), messages[0]


def test_yolo_mask_beyond_num_takes_the_listed_anchors(darknet, tmp_path, caplog):
    """cspx-p7-mish.cfg's case: num=2 but 3 anchors listed and mask=2. Darknet reads anchor 2 past its 4 values
    (undefined); ours takes the listed one, with a warning. Anchors 0..1 equal Darknet's."""
    text = head_cfg("yolo", "num=2\nmask=2\nanchors=10,14, 23,27, 37,58", 1)
    with caplog.at_level(logging.WARNING):
        path, model = build(tmp_path, text)
    (ref,) = darknet_heads(darknet, path)[0]
    assert ref["total"] == 2 and ref["mask"] == [2]
    assert model.yolo_layers[0].all_anchors.flatten().tolist()[:4] == ref["anchors"]
    assert model.yolo_layers[0].anchors.tolist() == [[37.0, 58.0]]
    assert any("mask [2] is beyond num=2" in r.getMessage() for r in caplog.records)


REFUSED = [  # head, options, boxes per cell, key whose line is named, message
    ("yolo", "num=2\nmask=1,2\nanchors=10,14, 23,27", 2, "mask", r"mask \[2\] refers to anchors outside 0\.\.1"),
    ("yolo", "num=3\nmask=-1,0\nanchors=10,14, 23,27, 37,58", 2, "mask", r"mask -1,0 must list anchor indices"),
    ("yolo", "num=3\nmask=0,1,\nanchors=10,14, 23,27, 37,58", 2, "mask", r"empty value"),
    ("yolo", "num=3\nmask=0,1,2\nanchors=10,14, 23,27, 37,58,", 3, "anchors", r"empty value"),
    ("yolo", "num=3\nmask=0,1,2", 3, "[yolo]", r"'anchors' is missing"),
    ("Gaussian_yolo", "num=2\nmask=0,1\nanchors=10,14, 23,27, 37,58", 2, "anchors",
     r"'anchors' has 6 values but num=2 takes 4 .*past its anchors"),
    ("Gaussian_yolo", "num=2\nmask=1,2\nanchors=10,14, 23,27", 2, "mask", r"mask \[1, 2\] refers to anchors"),
    ("yolo", "num=3\nmask=0,1,2\nanchors=10,14, 23,27, 37,58\ncounters_per_class=5,6,7", 3, "counters_per_class",
     r"counters_per_class has 3 values for classes=2"),
]


@pytest.mark.parametrize("head,options,boxes,key,message", REFUSED, ids=[f"{c[0]}-{i}" for i, c in enumerate(REFUSED)])
def test_lists_darknet_misreads_are_refused_with_the_line(tmp_path, head, options, boxes, key, message):
    text = head_cfg(head, options, boxes)
    path = tmp_path / "bad.cfg"
    path.write_text(text)
    with pytest.raises(CfgError, match=rf"bad\.cfg:{line_of(text, key)}: .*{message}") as info:
        Darknet(path)
    assert "\n" not in str(info.value)


def test_counters_per_class_of_another_length_darknet_refuses_too(darknet, tmp_path):
    text = head_cfg("yolo", "num=3\nmask=0,1,2\nanchors=10,14, 23,27, 37,58\ncounters_per_class=5,6,7", 3)
    with pytest.raises(RuntimeError, match="counters_per_class = 3 doesn't match with classes = 2"):
        darknet.layers(text)


# --------------------------------------------------------------------------------- empty items, route groups
ROUTE_CFG = """[net]
width=32
height=32
channels=3

[convolutional]
filters=4
size=3
stride=1
pad=1
activation=leaky

[convolutional]
filters=6
size=3
stride=1
pad=1
activation=leaky

[route]
{route}
"""


def test_darknet_reads_an_empty_list_item_as_zero_and_we_refuse_it(darknet, tmp_path):
    """``layers=-1,`` routes layer 0 too in Darknet (atoi of an empty string): 6 + 4 channels."""
    text = ROUTE_CFG.format(route="layers=-1,")
    assert darknet.layers(text)[2].out_c == 6 + 4
    path = tmp_path / "route.cfg"
    path.write_text(text)
    with pytest.raises(CfgError, match=rf"route\.cfg:{line_of(text, 'layers')}: .*empty value"):
        Darknet(path)
    path.write_text(ROUTE_CFG.format(route="layers=-1,0"))  # what Darknet reads, written out
    assert Darknet(path).layer_infos[2].out_shape[0] == 10


@pytest.mark.parametrize("route,key,message", [
    ("layers=-1\ngroups=2\ngroup_id=2", "group_id", "group_id=2 must be in 0..1"),
    ("layers=-1\ngroups=4", "groups", "groups=4 does not divide the 6 channels"),
])
def test_route_groups_darknet_reads_past_are_refused(darknet, tmp_path, route, key, message):
    """Darknet builds these (it copies channel slices from input + group_id * size / groups, past the input when
    group_id >= groups; with groups not dividing the channels it drops the remainder): refused here."""
    text = ROUTE_CFG.format(route=route)
    darknet.layers(text)  # Darknet builds it
    path = tmp_path / "route.cfg"
    path.write_text(text)
    with pytest.raises(CfgError, match=rf"route\.cfg:{line_of(text, key)}: .*{message}"):
        Darknet(path)


# ------------------------------------------------------------------------------------------- steps, scales
def test_scales_longer_than_steps_are_cut_as_darknet_does(darknet):
    """Darknet reads one scale per step and ignores the rest (shorter scales: test_schedule.py)."""
    case = dict(policy="steps", learning_rate=0.1, steps="3,6", scales=".5,.2,.1", burn_in=0, max_batches=10)
    expected = darknet.rates(RATE_CFG, 10, **case)
    schedule = ours_from_cfg(set_net_options(RATE_CFG, **case))
    np.testing.assert_allclose([schedule(n) for n in range(11)], expected, rtol=2e-7)
