"""The table of Darknet training options (yolo.models.cfg_options): complete against Darknet's parser, enforced at
training start with the cfg's file and line, and never in the way of inference."""
import logging
import re

import pytest

from yolo.models.cfg import parse_cfg, parse_cfg_text
from yolo.errors import CfgError
from yolo.models.cfg_options import (DETECTION_OPTIONS, INERT, NET_OPTIONS, REFUSED, REGION_OPTIONS, TRAINED, YOLO_OPTIONS,
                              check_training_options, refusals)
from yolo.engine.config import resolve_hyp
from yolo.models.model import TRAINING_OPTIONS, Darknet


def _darknet_parser_keys(function: str):
    """Keys a function of Darknet's src/parser.c reads with option_find*, straight from the C source."""
    from darknet_ref import darknet_source

    path = darknet_source() / "src" / "parser.c"
    if not path.is_file():
        pytest.skip(f"Darknet source not found at {path.parent.parent} (set YOLO_DARKNET_SRC)")
    text = path.read_text(errors="replace")
    start = text.index(function)
    body = text[start:text.index("\n}\n", start)]
    return set(re.findall(r'option_find\w*\(options,\s*"([^"]+)"', body))


@pytest.mark.parametrize("function,table", [("void parse_net_options(", NET_OPTIONS),
                                            ("layer parse_yolo(", YOLO_OPTIONS),
                                            ("layer parse_region(", REGION_OPTIONS),
                                            ("detection_layer parse_detection(", DETECTION_OPTIONS)])
def test_table_covers_exactly_what_darknet_reads(function, table):
    keys = _darknet_parser_keys(function)
    assert keys, function
    assert sorted(keys - set(table)) == []  # every Darknet key has a decision
    assert sorted(set(table) - keys) == []  # and no key is invented
    for key, option in table.items():
        assert option.fate in (TRAINED, INERT, REFUSED) and option.why, key
        if option.fate == REFUSED:
            assert option.advice, key


def test_model_option_lists_derive_from_the_table():
    assert TRAINING_OPTIONS["net"] == set(NET_OPTIONS)
    assert TRAINING_OPTIONS["yolo"] == set(YOLO_OPTIONS)
    assert TRAINING_OPTIONS["region"] == set(REGION_OPTIONS)
    assert TRAINING_OPTIONS["detection"] == set(DETECTION_OPTIONS)


HEAD = """
[convolutional]
filters=18
size=1
activation=linear

[yolo]
mask=0,1,2
anchors=10,14, 23,27, 37,58
classes=1
num=3
"""


def _sections(net_extra="", head_extra=""):
    text = "[net]\nbatch=2\nsubdivisions=1\nwidth=64\nheight=64\nmax_batches=10\n" + net_extra + HEAD + head_extra
    return parse_cfg_text(text, source="train.cfg")


@pytest.mark.parametrize("net_extra,key,line", [("seq_scales=1\n", "seq_scales=1", 7),
                                                ("ema_alpha=0.9998\n", "ema_alpha=0.9998", 7),
                                                ("track=1\n", "track=1", 7), ("contrastive=1\n", "contrastive=1", 7)])
def test_refused_net_options_stop_training_with_file_and_line(net_extra, key, line):
    sections = _sections(net_extra)
    with pytest.raises(CfgError) as info:
        resolve_hyp(sections[0], [s for s in sections if s.type == "yolo"], None, {})
    message = str(info.value)
    assert message.startswith(f"train.cfg:{line}: [net] option '{key}' is not implemented for training: ")
    assert "\n" not in message


def test_neutral_values_pass():
    sections = _sections("mixup=0\nblur=0\nmosaic=0\nema_alpha=0\ntime_steps=1\nresize_step=32\n", "random=0\n")
    hyp = resolve_hyp(sections[0], [s for s in sections if s.type == "yolo"], None, {})
    assert hyp["augment"]["pipeline"] == "darknet" and hyp["multi_scale"] is False


def test_head_options_and_opt_in():
    sections = _sections(head_extra="random=1\n")
    heads = [s for s in sections if s.type == "yolo"]
    # random=1 trains with Darknet's size rule (yolo.data.darknet_multiscale); --hyp may choose ours or none.
    assert resolve_hyp(sections[0], heads, None, {})["multi_scale"] == {"random": 1.0, "resize_step": 32}
    assert resolve_hyp(sections[0], heads, {"multi_scale": True}, {})["multi_scale"] is True
    assert resolve_hyp(sections[0], heads, {"multi_scale": False}, {})["multi_scale"] is False
    mosaic = _sections("mosaic=1\n")
    with pytest.raises(ValueError, match="must be 0 or 1"):  # a probability is our mosaic's, in our pipeline
        resolve_hyp(mosaic[0], mosaic[2:], {"augment": {"mosaic": 0.5}}, {})
    hyp = resolve_hyp(mosaic[0], mosaic[2:], {"augment": {"pipeline": "affine", "mosaic": 0.5}}, {})
    assert hyp["augment"]["mosaic"] == 0.5


def test_darknet_pipeline_settings_come_from_the_cfg():
    sections = _sections("letter_box=1\nflip=0\nhue=.05\nmixup=1\n", "jitter=.3\nresize=1.5\nmax=90\n")
    hyp = resolve_hyp(sections[0], [s for s in sections if s.type == "yolo"], None, {})["augment"]
    assert (hyp["letter_box"], hyp["flip"], hyp["hue"], hyp["jitter"], hyp["resize"], hyp["max_boxes"],
            hyp["mixup"]) == (1.0, 0.0, pytest.approx(0.05), pytest.approx(0.3), 1.5, 90.0, 1.0)


@pytest.mark.slow
def test_shipped_cfgs_detect_but_refuse_training(assets, tmp_path):
    """A cfg with a refused key still builds for inference; training names its first refused key."""
    cfg = tmp_path / "yolov4.cfg"
    cfg.write_text(assets("cfg/yolov4.cfg").read_text().replace("mosaic=1", "mosaic=1\ntrack=1", 1))
    Darknet(cfg)  # no error: inference never consults the table
    errors = refusals(parse_cfg(cfg))
    assert [e.problem.split("'")[1] for e in errors] == ["track=1"]  # random=1 (last [yolo]) is trained
    assert str(errors[0]).startswith(f"{cfg}:26: [net] option 'track=1'")
    check_training_options(parse_cfg(assets("cfg/yolov4.cfg")))  # mosaic=1: Darknet's OpenCV pipeline
    check_training_options(parse_cfg(assets("cfg/yolov4-tiny.cfg")))  # nothing refused there
    check_training_options(parse_cfg(assets("cfg/yolov2.cfg")))  # [region] with random=1: trained too


def test_keys_outside_darknet_still_warn(caplog):
    with caplog.at_level(logging.WARNING):
        Darknet(_sections("rank=3\n"))
    assert "rank" in caplog.text


@pytest.mark.parametrize("case", ["track", "affine_key"])
def test_train_tool_stops_with_one_line(assets, tmp_path, capsys, case):
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo))
    from yolo.cli.train import main, parse_args

    cfg = tmp_path / "net.cfg"
    text = assets("cfg/yolov3-tiny.cfg").read_text().replace("random=1", "random=0")
    argv = ["--cfg", str(cfg), "--data", str(repo / "configs" / "coco128.yaml"), "--epochs", "1", "--device", "cpu",
            "--project", str(tmp_path / "runs"), "--workers", "0"]
    if case == "track":
        text = text.replace("[net]", "[net]\ntrack=1", 1)
        expected = f"error: {cfg}:2: [net] option 'track=1' is not implemented for training: remove it"
    else:  # a setting of our own pipeline with Darknet's: refused, not ignored
        hyp = tmp_path / "hyp.yaml"
        hyp.write_text("augment: {min_visible: 0.5}\n")
        argv += ["--hyp", str(hyp)]
        expected = f"error: {hyp}: augment ['min_visible'] belong to this framework's own pipeline"
    cfg.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        main(parse_args(argv))
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith(expected) and len(err.splitlines()) == 1


@pytest.mark.parametrize("net_extra,mixup,mosaic", [("mosaic=1\n", 0, 1), ("blur=1\n", 0, 0),
                                                    ("gaussian_noise=20\n", 0, 0), ("cutmix=1\nmixup=1\n", 0, 0),
                                                    ("mosaic=1\nmixup=1\n", 0, 1), ("mosaic=1\ncutmix=1\n", 0, 1)])
def test_opencv_only_options_select_darknets_opencv_pipeline(caplog, net_extra, mixup, mosaic):
    """mosaic, blur, gaussian_noise (and cutmix, which the build without OpenCV refuses) are trained by Darknet's
    OpenCV pipeline, said in one log line; parser.c's mapping: mosaic overrides mixup, cutmix cancels it."""
    sections = _sections(net_extra + "mosaic_bound=1\n")
    with caplog.at_level(logging.INFO, logger="yolo.data"):
        hyp = resolve_hyp(sections[0], [s for s in sections if s.type == "yolo"], None, {})["augment"]
    assert hyp["pipeline"] == "darknet_opencv" and (hyp["mixup"], hyp["mosaic"]) == (mixup, mosaic)
    assert hyp["mosaic_bound"] == 1 and hyp["blur"] == (1 if "blur" in net_extra else 0)
    assert len([r for r in caplog.records if "OpenCV" in r.getMessage()]) == 1
    with pytest.raises(ValueError, match="only Darknet's OpenCV build trains"):
        resolve_hyp(sections[0], [s for s in sections if s.type == "yolo"], {"augment": {"pipeline": "darknet"}}, {})
    plain = _sections("mixup=1\n")
    forced = resolve_hyp(plain[0], plain[2:], {"augment": {"pipeline": "darknet_opencv"}}, {})["augment"]
    assert forced["pipeline"] == "darknet_opencv" and forced["mixup"] == 1


def test_letter_box_with_mosaic_stops_training_with_file_and_line():
    sections = _sections("letter_box=1\nmosaic=1\n")
    with pytest.raises(CfgError) as info:
        resolve_hyp(sections[0], [s for s in sections if s.type == "yolo"], None, {})
    assert str(info.value).startswith("train.cfg:8: [net] options 'letter_box' and 'mosaic' together are not "
                                      "supported for training")
