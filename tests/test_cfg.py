"""The cfg parser and model builder: every real cfg parses; bad cfgs fail with file, line and reason."""
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cfg_snippets import ONE_HEAD_CFG
from conftest import CLASSIFIER_CFGS, DETECTION_CFGS, asset
from yolo import CfgError, Darknet, parse_cfg, parse_cfg_text

TINY = """[net]
width=64
height=64
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
filters=21
size=1
stride=1
pad=1
activation=linear

[yolo]
mask=0,1,2
anchors=10,14, 23,27, 37,58
classes=2
num=3
"""


def build(text, tmp_path, name="net.cfg"):
    path = tmp_path / name
    path.write_text(text)
    return Darknet(path)


@pytest.mark.parametrize("name", DETECTION_CFGS + CLASSIFIER_CFGS)
def test_real_cfgs_parse_with_line_numbers(name):
    path = asset(f"cfg/{name}")
    sections = parse_cfg(path)
    lines = path.read_text().splitlines()
    assert sections[0].type == "net"
    for section in sections:
        assert lines[section.line - 1].strip().lower() == f"[{section.type}]"
        for key, line in section.option_lines.items():
            assert lines[line - 1].replace(" ", "").startswith(f"{key}=")


def test_parser_strips_whitespace_and_comments():
    sections = parse_cfg_text("# c\n[net]\n width = 32 \n; other\n\n[convolutional]\nfilters = 4 # four\n")
    assert sections[0].options == {"width": "32"}
    assert sections[1].options == {"filters": "4"} and sections[1].option_lines == {"filters": 7}
    assert sections[1].index == 0


def test_tiny_cfg_builds(tmp_path):
    model = build(TINY, tmp_path)
    assert len(model.module_list) == 4 and model.num_classes == 2 and model.stride == 2


@pytest.mark.parametrize("edit,at,message", [
    (("[maxpool]", "[maxpooling]"), "[maxpooling]", "unknown section type [maxpooling]"),
    (("filters=21", "filters=20"), "[yolo]", "filters=20, but this head needs (classes+5)*len(mask)"),
    (("size=3", "size=three"), "size=three", "'size=three' is not an integer"),
    (("[yolo]\n", "[yolo]\nmask=0,1,7\n"), "mask=0,1,7", "mask [7] refers to anchors outside"),
    (("stride=2\n", "stride=2\n[route]\nlayers=-5\n"), "layers=-5", "outside layers 0..1"),
    (("stride=2\n", "stride=2\n[shortcut]\nfrom=4\n"), "from=4", "outside layers 0..1"),
    (("stride=2\n", "stride=2\n[route]\nlayers=-1,-2\n"), "layers=-1,-2", "different sizes"),
    (("filters=8\n", "filters=8\ngroups=3\n"), "groups=3", "groups=3 must divide input channels (3)"),
    (("activation=leaky", "activation=leakyy"), "activation=leakyy", "unknown activation 'leakyy'"),
    (("width=64", "width=64\nheight"), "height\n", "expected 'key=value' or '[section]'"),
    (("[net]", "width=1\n[net]"), "width=1", "comes before any [section]"),
    (("[maxpool]", "[max pool"), "[max pool", "malformed section header"),
    (("filters=8\n", "filters=8\nantialiasing=1\n"), "antialiasing=1", "'antialiasing=1' changes the computation"),
    # a window no input can fill (before: accepted, then 10 TB asked for its padding in train and benchmark)
    (("size=2\n", "size=100000\n"), "size=100000", "'size'=100000 is larger than any input can be (8192"),
    (("[maxpool]\nsize=2\n", "[local_avgpool]\nsize=100000\n"), "size=100000", "'size'=100000 is larger"),
    (("size=2\n", "size=2\npadding=9000\n"), "padding=9000", "'padding'=9000 is larger"),
])
def test_bad_cfg_errors_name_file_line_and_problem(tmp_path, edit, at, message):
    old, new = edit
    assert old in TINY
    text = TINY.replace(old, new, 1)
    line = next(i for i, row in enumerate(text.splitlines(keepends=True), 1) if row.startswith(at))
    with pytest.raises(CfgError) as info:
        build(text, tmp_path)
    err = info.value
    assert err.line == line, str(err)
    assert message in str(err), str(err)
    assert str(err).startswith(f"{tmp_path / 'net.cfg'}:{line}:")


def test_missing_required_option_and_missing_file(tmp_path):
    with pytest.raises(CfgError, match=r"net.cfg:\d+: \[route\] \(layer 2\): missing required option 'layers'"):
        build(TINY.replace("stride=2\n", "stride=2\n[route]\n", 1), tmp_path)
    with pytest.raises(CfgError, match="cfg file not found"):
        Darknet(tmp_path / "nope.cfg")
    with pytest.raises(CfgError, match="first section must be \\[net\\]"):
        build(TINY.replace("[net]", "[convolutional]", 1), tmp_path)


def test_unknown_options_are_accepted_with_one_warning(tmp_path, caplog):
    text = TINY.replace("activation=leaky", "activation=leaky\nfancy_new_key=3").replace("num=3", "num=3\nshiny=1")
    with caplog.at_level(logging.WARNING):
        model = build(text, tmp_path)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "fancy_new_key" in warnings[0].getMessage() and "shiny" in warnings[0].getMessage()
    assert len(model.module_list) == 4


@pytest.mark.slow
def test_real_cfgs_build_without_warnings(caplog):
    with caplog.at_level(logging.WARNING):
        for name in DETECTION_CFGS + CLASSIFIER_CFGS:
            Darknet(asset(f"cfg/{name}"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


cfg_alphabet = st.sampled_from(list("[]=,#;-. \n\t0123456789abcdefghijklmnopqrstuvwxyz_"))
cfg_words = st.sampled_from(["[net]", "[convolutional]", "[route]", "[shortcut]", "[yolo]", "[maxpool]",
                             "[upsample]", "[region]", "[reorg]", "[dropout]", "[avgpool]", "[softmax]",
                             "filters=", "size=", "stride=", "pad=1", "layers=", "from=", "mask=", "anchors=",
                             "classes=", "groups=", "group_id=", "width=", "height=", "channels=",
                             "activation=", "batch_normalize=1", "num=", "-1", "3", "0", "\n"])


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(cfg_alphabet, max_size=200), st.lists(cfg_words, max_size=60).map("".join)))
def test_fuzz_parser_and_builder_raise_only_cfg_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.cfg"
    path.write_text(text)
    try:
        sections = parse_cfg(path)
        # Keep built networks small: the fuzz is about errors, not big tensors.
        for s in sections:
            for key in ("filters", "width", "height", "channels", "size", "stride", "classes", "num"):
                if key in s.options and s.options[key].lstrip("-").isdigit() and int(s.options[key]) > 64:
                    s.options[key] = "64"
        Darknet(sections)
    except CfgError:
        pass


def test_a_cfg_that_is_a_fifo_is_one_line(tmp_path):
    """A FIFO read whole blocks until a writer comes (here one comes, so the old read returned its text)."""
    from helpers import fifo_with_a_late_writer

    fifo = tmp_path / "net.cfg"
    end = fifo_with_a_late_writer(fifo, "[net]\nwidth=32\nheight=32\n")
    try:
        with pytest.raises(CfgError) as error:
            parse_cfg(fifo)
    finally:
        end()
    assert str(error.value) == f"{fifo}: cannot read cfg file (it is a FIFO (named pipe), not a regular file)"


# ------------------------------------------------------------------------------- absurd counts
# Written out here, not from tests/cfg_snippets.py: the cases below name its line numbers.
HEAD_CFG = "[net]\nwidth=64\nheight=64\nchannels=3\n[convolutional]\nfilters={filters}\nsize=1\nstride=1\n" \
           "activation=linear\n{head}"


@pytest.mark.parametrize("head, filters, line, key", [
    ("[yolo]\nmask=0,1,2\nanchors=10,10, 20,20, 40,40\nclasses=5\nnum=100000000\n", 30, 14, "num"),
    ("[yolo]\nmask=0\nanchors=10,10\nclasses=100000000\nnum=1\n", 30, 13, "classes"),
    ("[region]\nanchors=1,1\nclasses=5\nnum=100000000\n", 50, 13, "num"),
    ("[Gaussian_yolo]\nmask=0\nanchors=10,10\nclasses=5\nnum=100000000\n", 14, 14, "num"),
    ("[detection]\nclasses=5\nnum=2\nside=1000000\ncoords=4\n", 30, 13, "side"),
])
def test_absurd_head_counts_are_refused_with_their_line_before_allocation(head, filters, line, key):
    from yolo.errors import CfgError
    from yolo.models.cfg import parse_cfg_text

    text = HEAD_CFG.format(filters=filters, head=head)
    with pytest.raises(CfgError) as info:
        Darknet(parse_cfg_text(text, "big.cfg"))
    message = str(info.value)
    assert message.startswith(f"big.cfg:{line}: ") and f"'{key}=" in message and "out of range" in message, message


# ------------------------------------------------------------------------------- silent nonsense
@pytest.mark.parametrize("head, filters, anchors_line", [
    ("[yolo]\nmask=0,1,2\nanchors=10,10, 0,20, 40,40\nclasses=5\nnum=3\n", 30, 12),
    ("[yolo]\nmask=0,1,2\nanchors=10,10, 20,-20, 40,40\nclasses=5\nnum=3\n", 30, 12),
    ("[region]\nanchors=1,1, -1,2\nclasses=5\nnum=2\n", 20, 11),
    ("[Gaussian_yolo]\nmask=0\nanchors=0,10\nclasses=5\nnum=1\n", 14, 12),
])
def test_anchors_of_no_or_negative_size_are_refused_with_their_line(head, filters, anchors_line):
    from yolo.errors import CfgError
    from yolo.models.cfg import parse_cfg_text

    with pytest.raises(CfgError, match=rf"^bad.cfg:{anchors_line}: .*anchor sizes must be positive"):
        Darknet(parse_cfg_text(HEAD_CFG.format(filters=filters, head=head), "bad.cfg"))


@pytest.mark.parametrize("hyp, words", [
    ("momentum: .nan", "hyp.yaml: momentum=nan is not a finite number"),
    ("momentum: 1.5", "hyp.yaml: momentum=1.5 is out of range: it must be at least 0 and below 1"),
    ("decay: -0.1", "hyp.yaml: decay=-0.1 is out of range"),
    ("learning_rate: .inf", "hyp.yaml: learning_rate=inf is not a finite number"),
    ("batch: 100000000", "hyp.yaml: batch=100000000 is out of range: it must be between 1 and 65,536"),
    ("iou_thres: 2", "hyp.yaml: iou_thres=2.0 is out of range"),
    ("img_size: [100000, 64]", "hyp.yaml: img_size=[100000, 64] is out of range"),
])
def test_hyperparameters_out_of_range_are_refused_naming_the_key(tmp_path, hyp, words):
    from yolo.engine.config import resolve_hyp
    from yolo.errors import ConfigError
    from yolo.models.cfg import parse_cfg_text

    sections = parse_cfg_text(ONE_HEAD_CFG, "tiny.cfg")
    (tmp_path / "hyp.yaml").write_text(hyp + "\n")
    with pytest.raises(ConfigError) as info:
        resolve_hyp(sections[0], sections[-1:], tmp_path / "hyp.yaml", {})
    assert str(info.value).startswith(str(tmp_path / words.split(":")[0])) and words.split(": ", 1)[1] in \
        str(info.value), str(info.value)


def test_a_cfg_momentum_out_of_range_names_the_cfg_line(tmp_path):
    from yolo.engine.config import resolve_hyp
    from yolo.errors import ConfigError
    from yolo.models.cfg import parse_cfg_text

    sections = parse_cfg_text(ONE_HEAD_CFG.replace("policy=constant", "policy=constant\nmomentum=1"), "tiny.cfg")
    with pytest.raises(ConfigError, match=r"^tiny.cfg:10: momentum=1.0 is out of range"):
        resolve_hyp(sections[0], sections[-1:], None, {})


# ------------------------------------------------------------------------------------------ cfg values
@pytest.mark.parametrize("line, value, key", [
    (7, "filters=160000000", "filters"),   # would allocate 16 GiB of weights
    (8, "size=100001", "size"),           # 1.8 TiB of weights, with pad=1 the output shape looks fine
    (13, "filters=2550000", "filters"),   # 2.4 GiB on 256 channels: a typo for 255
])
def test_absurd_layer_sizes_are_refused_with_their_line_before_allocation(line, value, key):
    # Written out here, not from tests/cfg_snippets.py: the cases name its line numbers.
    text = ("[net]\nwidth=416\nheight=416\nchannels=3\n"
            "[convolutional]\nbatch_normalize=1\nfilters=256\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
            "[convolutional]\nfilters=255\nsize=1\nstride=1\npad=1\nactivation=linear\n")
    lines = text.splitlines()
    lines[line - 1] = value
    with pytest.raises(CfgError) as info:
        Darknet(parse_cfg_text("\n".join(lines), "typo.cfg"))
    message = str(info.value)
    assert message.startswith(f"typo.cfg:{line}: [convolutional]") and f"'{key}'" in message, message
    assert "\n" not in message


def test_absurd_upsample_and_input_sizes_are_refused():
    # Written out here: the expected messages name its line numbers.
    text = ("[net]\nwidth={w}\nheight={w}\nchannels=3\n"
            "[convolutional]\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
            "[upsample]\nstride={s}\n")
    with pytest.raises(CfgError, match=r"^big.cfg:12: \[upsample\] .*'stride'"):
        Darknet(parse_cfg_text(text.format(w=416, s=10000), "big.cfg"))
    with pytest.raises(CfgError, match=r"^big.cfg:6: \[convolutional\] .*input size"):
        Darknet(parse_cfg_text(text.format(w=100001, s=2), "big.cfg"))
    Darknet(parse_cfg_text(text.format(w=416, s=2), "big.cfg"))  # the normal case builds


@pytest.mark.slow
def test_cfg_with_byte_order_mark_reads_like_without(assets, tmp_path):
    original = assets("cfg/yolov3-tiny.cfg")
    with_bom = tmp_path / "bom.cfg"
    with_bom.write_bytes(b"\xef\xbb\xbf" + original.read_bytes())
    plain, marked = parse_cfg(original), parse_cfg(with_bom)
    assert [(s.type, s.line, s.options) for s in marked] == [(s.type, s.line, s.options) for s in plain]
    assert Darknet(with_bom).summary() == Darknet(original).summary()


def test_invisible_characters_are_shown_in_cfg_errors():
    with pytest.raises(CfgError) as info:
        parse_cfg_text("[net]\nwidth=32\nheight=32\n\u200bbatch\n[maxpool]\n", "zw.cfg")
    assert str(info.value) == "zw.cfg:4: expected 'key=value' or '[section]', got '\\u200bbatch'"
