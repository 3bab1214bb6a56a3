"""Each setting declared once (yolo.settings): the flags of train, detect and eval are generated from the
dataclass fields, the parsed flags come back as the dataclass in one call, and the Detector's keywords are the
fields of DetectorOptions. Detect reads --device and a .pt once."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from helpers import tool_parser
from cfg_snippets import SMALL_BACKBONE, net_section
from training_helpers import HYP
from yolo.cli.args import DefaultsHelpFormatter, ToolParser, positive_int
from yolo.cli import detect
from yolo.cli.flags.common import add_setting_flags, settings_from
from yolo.inference import detector as detector_module
from yolo.inference.detector import Detector
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.models.model import Darknet
from yolo.settings.declare import declared, setting
from yolo.settings.detect import DetectorOptions, DetectRunOptions
from yolo.settings.evaluate import EvalOptions
from yolo.settings.tiling import TileOptions
from yolo.settings.train import TrainOptions
from yolo.settings.video import VideoOptions

# Each tool's settings dataclass, the flags it must have, and its flags that are the tool's own (no setting).
TOOLS = {
    "train": (TrainOptions, [], {"--verbose"}),
    "detect": (DetectorOptions, ["--weights", "w.pt", "--source", "a.jpg"],
               {"--cfg", "--weights", "--source", "--project", "--name", "--save-txt", "--save-conf",
                "--save-json", "--nosave", "--no-progress", "--verbose"}),
    "eval": (EvalOptions, ["--weights", "w.pt", "--data", "d.yaml"], {"--verbose"}),
}
# The settings a tool declares besides its main dataclass's: detect's batches and threads, tiling and tracking.
MORE_SETTINGS = {"detect": (DetectRunOptions, TileOptions, VideoOptions), "eval": (TileOptions,)}
# The Detector's settings for the Python API only (no flag): the detect tool keeps their defaults.
API_ONLY = {DetectorOptions: {"multi_label", "fast", "compile", "max_batch", "device_preprocess", "cuda_graph"}}


def option_strings(flag_name, flag):
    """The option strings argparse makes for one declared flag (--X and --no-X for an on/off flag)."""
    if flag.options.get("action") is argparse.BooleanOptionalAction:
        return [flag_name, "--no-" + flag_name[2:]]
    return [flag_name]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_setting_has_one_flag_and_every_flag_a_setting(tool):
    cls, _, tool_only = TOOLS[tool]
    classes = (cls, *MORE_SETTINGS.get(tool, ()))
    actions = [a for a in tool_parser(tool)._actions if a.option_strings and a.dest != "help"]
    shown = [a for a in actions if a.help != argparse.SUPPRESS]
    names = {f.name for c in classes for f in dataclasses.fields(c)}
    for field, flag in (pair for c in classes for pair in declared(c)):
        mine = [a for a in shown if a.dest == field.name]
        if flag.name is None:
            assert field.name in API_ONLY.get(cls, ()) and not mine, field.name
            continue
        assert len(mine) == 1, (field.name, [a.option_strings for a in mine])
        assert mine[0].option_strings == option_strings(flag.name, flag)
        assert mine[0].help == flag.help and mine[0].default == field.default
    for action in shown:
        if action.dest not in names:
            assert set(action.option_strings) <= tool_only, f"{action.option_strings} is not a setting of {cls}"
    assert {f.name for f, flag in declared(cls) if flag.name is None} == API_ONLY.get(cls, set())


def test_help_text_and_parsing_come_from_the_declaration(capsys):
    def made_up(help_text):
        cls = dataclasses.make_dataclass("Made", [
            ("steps", int, setting(3, "--steps", type=positive_int, help=help_text)),
            ("quiet", bool, setting(True, "--loud", action="store_false", help="say more")),
            ("api_only", int, setting(7, help="not on the command line"))])
        p = ToolParser(prog="made.py", formatter_class=DefaultsHelpFormatter)
        add_setting_flags(p, cls)
        return cls, p

    cls, p = made_up("optimizer steps to take")
    text = p.format_help()
    assert "--steps STEPS  optimizer steps to take (default: 3)" in text
    assert "--loud" in text and "--api-only" not in text and "api_only" not in text
    _, other = made_up("a different text")
    assert "a different text" in other.format_help() and "optimizer steps" not in other.format_help()
    assert settings_from(p.parse_args([]), cls) == cls()
    assert settings_from(p.parse_args(["--steps", "5", "--loud"]), cls, api_only=1) == cls(5, False, 1)
    with pytest.raises(SystemExit):
        p.parse_args(["--steps", "0"])
    assert "argument --steps: 0 is out of range" in capsys.readouterr().err
    with pytest.raises(ValueError, match="help"):
        setting(1, "--x", help=" ")


def argv_for(options, required):
    """The command line that asks for ``options``: each setting that differs from its default, as a user
    would type it."""
    argv = list(required)
    for field, flag in declared(type(options)):
        value = getattr(options, field.name)
        if flag.name is None or value == field.default or flag.options.get("required"):
            continue
        action = flag.options.get("action")
        if action in ("store_true", "store_false"):
            argv.append(flag.name)
        elif action is argparse.BooleanOptionalAction:
            argv.append(flag.name if value else "--no-" + flag.name[2:])
        elif flag.options.get("nargs") == "+":
            argv += [flag.name, *(str(v) for v in value)]
        else:
            argv += [flag.name, str(value)]
    return argv


CHANGED = {
    "train": TrainOptions(cfg="a.cfg", data="d.yaml", weights="w.pt", cutoff=3, hyp="h.yaml", epochs=2, batch_size=4,
                          img_size=(320, 416), device="cpu", project="p", name="n", resume="last.pt", freeze=2,
                          workers=0, seed=5, sync_bn=True, adapt_classes=True, tf32=False, compile=True,
                          cache_images=False, darknet_map=True, scale_burn_in=True, decode="stb",
                          progress=False),
    "detect": DetectorOptions(names=Path("c.names"), img_size=(256, 320), conf_thres=0.5, iou_thres=0.3,
                              resize="stretch", resample="opencv", decode="stb", device="cuda:1", half=True, classes=[1, 2], agnostic=True,
                              nms_kind="diounms", beta_nms=0.8, max_det=10),
    "eval": EvalOptions(cfg="a.cfg", weights="w.pt", data="d.yaml", split="train", img_size=(320, 320),
                        conf_thres=0.25, iou_thres=0.5, max_det=100, multi_label=False, resize="letterbox",
                        resample="opencv", decode="stb", batch_size=2, workers=0, device="cpu", amp=True, fast=True,
                        darknet_map=True, points=11,
                        darknet_iou_thresh=0.3, darknet_thresh=0.1, plots=False, progress=False,
                        save_dir="out", project="p", name="n"),
}


@pytest.mark.parametrize("tool", TOOLS)
def test_parsed_flags_round_trip_to_the_settings(tool):
    cls, required, _ = TOOLS[tool]
    module = importlib.import_module(f"yolo.cli.flags.{tool}")
    changed = CHANGED[tool]
    api = {name: getattr(changed, name) for name in API_ONLY.get(cls, ())}
    changed_fields = [f.name for f in dataclasses.fields(cls)
                      if f.name not in api and getattr(changed, f.name) != f.default]
    assert len(changed_fields) == len([f for f, flag in declared(cls) if flag.name]), "change every setting"
    assert settings_from(module.parse_args(argv_for(changed, required)), cls, **api) == changed
    defaults = settings_from(module.parse_args(required), cls)
    assert defaults == cls(**{f.name: getattr(defaults, f.name) for f, flag in declared(cls)
                              if flag.options.get("required")})


def test_flag_values_become_the_settings_types():
    detect = importlib.import_module("yolo.cli.flags.detect")
    args = detect.parse_args(["--weights", "w.pt", "--source", "a.jpg", "--img-size", "320", "--agnostic-nms",
                              "--classes", "0", "3", "--names", "c.names"])
    options = settings_from(args, DetectorOptions, device=torch.device("cpu"))
    assert options.img_size == (320, 320) and options.agnostic and options.classes == [0, 3]
    assert options.names == Path("c.names") and options.device == torch.device("cpu")
    train = importlib.import_module("yolo.cli.flags.train")
    options = settings_from(train.parse_args(["--img-size", "256", "320", "--no-progress", "--no-tf32"]),
                            TrainOptions)
    assert (options.img_size, options.progress, options.tf32, options.compile) == ((256, 320), False, False, None)
    evaluate = importlib.import_module("yolo.cli.flags.eval")
    options = settings_from(evaluate.parse_args(TOOLS["eval"][1] + ["--single-label", "--no-plots"]), EvalOptions)
    assert (options.multi_label, options.plots, options.progress) == (False, False, True)


def test_a_refused_flag_value_is_the_tools_one_line_error(capsys):
    train = importlib.import_module("yolo.cli.flags.train")
    with pytest.raises(SystemExit) as stop:
        settings_from(train.parse_args(["--img-size", "64", "64", "64"]), TrainOptions)
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == "error: --img-size takes one value or two (height width), got 3"


# ------------------------------------------------------------------------------------------ the Detector
HEAD = ("\n[convolutional]\nsize=1\nstride=1\npad=1\nfilters=24\nactivation=linear\n\n"
        "[yolo]\nmask=0,1,2\nanchors=10,14, 23,27, 37,58\nclasses=3\nnum=3\n")


@pytest.fixture
def tiny_pt(tmp_path):
    """A .pt checkpoint of a small one-head detector (3 classes, stride 8) with random weights and names."""
    torch.manual_seed(0)
    cfg = tmp_path / "small.cfg"
    cfg.write_text(net_section(64, 64) + "\n" + SMALL_BACKBONE + HEAD)
    path = tmp_path / "small.pt"
    save_checkpoint(model_checkpoint(Darknet(cfg), names=["a", "b", "c"]), path)
    return path


def test_the_detectors_keywords_are_the_declared_settings(tiny_pt):
    params = list(inspect.signature(Detector).parameters.values())
    assert [p.name for p in params[:3]] == ["cfg", "weights", "options"]
    fields = dataclasses.fields(DetectorOptions)
    assert [(p.name, p.default) for p in params[3:]] == [(f.name, f.default) for f in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:])

    detector = Detector(None, tiny_pt, device="cpu", conf_thres=0.3, classes=[1], fast=False)
    assert detector.options == DetectorOptions(device="cpu", conf_thres=0.3, classes=[1], fast=False)
    assert (detector.conf_thres, detector.postprocess_options.classes, detector.names) == (0.3, (1,), ["a", "b", "c"])
    given = DetectorOptions(iou_thres=0.2, max_det=5, device="cpu")
    detector = Detector(None, tiny_pt, options=given, max_det=7)
    assert (detector.iou_thres, detector.postprocess_options.max_det, given.max_det) == (0.2, 7, 5)
    with pytest.raises(TypeError, match="conf_thresh"):
        Detector(None, tiny_pt, conf_thresh=0.3)
    with pytest.raises(ValueError, match="unknown resize mode 'fit'"):
        Detector(None, tiny_pt, resize="fit")


def test_the_names_before_one_word_per_concept_still_work_and_say_so(tiny_pt):
    """``Detector.settings`` and ``PostprocessConfig`` were renamed (``postprocess_options``, ``PostprocessOptions``:
    what a caller chooses is "options"); the old names still work, with a DeprecationWarning."""
    from yolo.inference import postprocess as postprocess_module
    detector = Detector(None, tiny_pt, device="cpu", conf_thres=0.3, fast=False)
    with pytest.warns(DeprecationWarning, match="postprocess_options"):
        assert detector.settings is detector.postprocess_options
    with pytest.warns(DeprecationWarning, match="PostprocessOptions"):
        assert postprocess_module.PostprocessConfig is postprocess_module.PostprocessOptions
    with pytest.warns(DeprecationWarning, match="PostprocessOptions"):
        from yolo.inference.postprocess import PostprocessConfig  # noqa: F401
    with pytest.raises(AttributeError):
        postprocess_module.NoSuchName


def test_detect_reads_the_device_and_the_checkpoint_once(tiny_pt, tmp_path, monkeypatch):
    calls = {"parse_device": 0, "torch.load": 0}

    def counted(name, function):
        def run(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return run

    monkeypatch.setattr(detect, "parse_device", counted("parse_device", detect.parse_device))
    monkeypatch.setattr(detector_module, "parse_device", counted("parse_device", detector_module.parse_device))
    monkeypatch.setattr(torch, "load", counted("torch.load", torch.load))
    image = tmp_path / "a.jpg"
    cv2.imwrite(str(image), np.full((48, 64, 3), 127, np.uint8))
    detect.main(detect.parse_args(["--weights", str(tiny_pt), "--source", str(image), "--device", "cpu",
                                   "--nosave", "--save-txt", "--project", str(tmp_path / "runs")]))
    assert calls == {"parse_device": 1, "torch.load": 1}


def test_the_training_settings_that_override_hyperparameters_are_declared_with_them():
    from yolo.engine.config import Hyperparameters

    overrides = TrainOptions().hyp_overrides()
    assert set(overrides) == {"epochs", "batch", "img_size", "workers", "tf32", "compile", "cache_images",
                              "darknet_map", "scale_burn_in"}
    assert set(overrides) <= {f.name for f in dataclasses.fields(Hyperparameters)}  # each names a hyperparameter
    assert set(overrides.values()) == {None}  # not given: the cfg's / --hyp's value stands
    given = TrainOptions(epochs=3, batch_size=16, img_size=(64, 96), workers=0, tf32=True, compile=False,
                         cache_images=True, darknet_map=True, scale_burn_in=True).hyp_overrides()
    assert given == {"epochs": 3, "batch": 16, "img_size": (64, 96), "workers": 0, "tf32": True, "compile": False,
                     "cache_images": True, "darknet_map": True, "scale_burn_in": True}


# ------------------------------------------------------------------------------------ training options
@pytest.mark.parametrize("settings, error, message", [
    (dict(hyp=5), TypeError, "hyp must be a YAML path (str or pathlib.Path) or a dict of hyperparameters, got int 5"),
    (dict(cfg=5), TypeError, "cfg must be a path (str or pathlib.Path), got int 5"),
    (dict(data={"train": "x"}), TypeError, "data must be a path (str or pathlib.Path), got dict {'train': 'x'}"),
    (dict(project=5), TypeError, "project must be a path (str or pathlib.Path), got int 5"),
    (dict(weights=5), TypeError, "weights must be a path (str or pathlib.Path), got int 5"),
    (dict(name=None), TypeError, "name must be a str (the run folder's name), got NoneType None"),
    (dict(seed="a"), TypeError, "seed must be an integer, got str 'a'"),
    (dict(seed=-1), ValueError, "seed: -1 is out of range: a seed must be between 0 and 4294967295"),
    (dict(freeze="1"), TypeError, "freeze must be an integer, got str '1'"),
    (dict(epochs=0), ValueError, "epochs: 0 is out of range: the value must be at least 1"),
    (dict(workers=65), ValueError,
     "workers: 65 is out of range: the number of loading processes must be between 0 and 64"),
    (dict(device=1.5), TypeError,
     "device must be a name (cpu, cuda, cuda:N), a GPU index or a torch.device, got float 1.5"),
])
def test_training_options_from_python_are_checked_as_the_flags_are(settings, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        TrainOptions(**settings)


def test_valid_training_options_are_kept_as_given(tmp_path):
    for size in (64, (64, 96), [64, 96]):
        assert TrainOptions(img_size=size).img_size == size
    options = TrainOptions(cfg=tmp_path / "a.cfg", data="d.yaml", hyp=tmp_path / "h.yaml", project=tmp_path,
                           device=torch.device("cpu"), seed=np.int64(3), freeze=2, resume="")
    assert (options.cfg, options.seed, options.device) == (tmp_path / "a.cfg", 3, torch.device("cpu"))
    assert TrainOptions(hyp=dict(HYP), device=0).hyp == HYP
