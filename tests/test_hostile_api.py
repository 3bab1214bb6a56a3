"""Bad arguments given to the Python API: each is refused with one ``TypeError``/``ValueError`` (or a
:mod:`yolo.errors` type) naming the argument or setting, never a raw OpenCV/torch error or a silent default."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from cfg_snippets import ONE_HEAD_CFG
from training_helpers import HYP
from yolo.device import parse_device
from yolo.engine import TrainOptions, Trainer
from yolo.engine import resume
from yolo.errors import ConfigError, WeightsError
from yolo.inference.detector import Detector
from yolo.models.cfg import parse_cfg
from yolo.models.model import Darknet, load_model
from yolo.settings.detect import DetectorOptions


@pytest.fixture(scope="module")
def one_cfg(tmp_path_factory) -> Path:
    cfg = tmp_path_factory.mktemp("api") / "one.cfg"
    cfg.write_text(ONE_HEAD_CFG)
    return cfg


@pytest.fixture(scope="module")
def detector(one_cfg) -> Detector:
    return Detector(str(one_cfg), None, img_size=64, device="cpu")


# ------------------------------------------------------------------------------------ images
@pytest.mark.parametrize("image, message", [
    (np.random.rand(20, 20), "image 0: expected uint8 pixels, got float64"),
    (np.zeros((20, 20), np.int64), "image 0: expected uint8 pixels, got int64"),
    (np.ones((5, 5), bool), "image 0: expected uint8 pixels, got bool"),
    (np.random.rand(20, 20, 4), "image 0: expected uint8 pixels, got float64"),
    (np.zeros((0, 5), np.uint8), "image 0: expected an H x W x 3 BGR image, got shape (0, 5)"),
    (np.zeros((0, 0, 4), np.uint8), "image 0: expected an H x W x 3 BGR image, got shape (0, 0, 4)"),
])
def test_a_gray_or_bgra_image_is_checked_before_it_is_converted(detector, image, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        detector(image)


@pytest.mark.parametrize("images, message", [
    (None, "Detector() takes an image path (str or pathlib.Path) or a uint8 H x W x 3 BGR numpy array, or a list "
           "of them, got NoneType"),
    (b"/path.jpg", "Detector() takes an image path (str or pathlib.Path) or a uint8 H x W x 3 BGR numpy array, or a "
                   "list of them, got bytes (a bytes path: pass os.fsdecode(path))"),
    (42, "got int"),
    ([None], "Detector(): image 0: expected an image path (str or pathlib.Path) or a uint8 H x W x 3 BGR numpy "
             "array, got NoneType"),
    ([np.zeros((8, 8, 3), np.uint8), b"/a.jpg"], "image 1: expected an image path (str or pathlib.Path) or a uint8 "
                                                "H x W x 3 BGR numpy array, got bytes (a bytes path"),
])
def test_images_of_the_wrong_type_are_a_type_error_saying_what_is_taken(detector, images, message):
    # before: None was a traceback from iterating it, b"/path.jpg" "got int" (bytes iterate as numbers)
    with pytest.raises(TypeError, match=re.escape(message)):
        detector(images)


def test_a_trainer_of_anything_but_built_parts_is_a_type_error():
    # before: Trainer({}) failed with AttributeError: 'dict' object has no attribute 'options'
    with pytest.raises(TypeError, match=r"Trainer takes the built parts of a run \(TrainingParts\), got dict; to "
                                        r"train from settings: Trainer.from_options"):
        Trainer({})


def test_gray_and_bgra_uint8_images_are_still_converted(detector):
    gray = np.full((20, 20), 7, np.uint8)
    bgra = np.dstack([gray, gray, gray, np.full((20, 20), 255, np.uint8)])
    assert len(detector([gray, bgra])) == 2


# ------------------------------------------------------------------------------------ detector settings
@pytest.mark.parametrize("settings, error, message", [
    (dict(conf_thres=float("nan")), ValueError, "conf_thres: 'nan' is not a finite number"),
    (dict(conf_thres=1.5), ValueError, "conf_thres: 1.5 is out of range: a threshold must be between 0 and 1"),
    (dict(conf_thres=-1), ValueError, "conf_thres: -1 is out of range: a threshold must be between 0 and 1"),
    (dict(iou_thres=float("nan")), ValueError, "iou_thres: 'nan' is not a finite number"),
    (dict(beta_nms=-5, nms_kind="diounms"), ValueError,
     "beta_nms: -5 is out of range: the DIoU-NMS exponent must be above 0 and at most 3.40282e+38"),
    (dict(max_det=-1), ValueError, "max_det: -1 is out of range: the value must be at least 1"),
    (dict(max_det=0), ValueError, "max_det: 0 is out of range: the value must be at least 1"),
    (dict(classes=[]), ValueError, "classes: an empty list keeps nothing; give at least one value, or None for all"),
    (dict(max_batch="2"), TypeError, "max_batch must be an integer, got str '2'"),
    (dict(max_batch=0.5), TypeError, "max_batch must be an integer, got float 0.5"),
    (dict(max_batch=-1), ValueError, "max_batch: -1 is out of range: the value must be at least 1"),
    (dict(names=5), TypeError, "names must be a sequence of class names (or a .names file), got int 5"),
    (dict(classes=1), TypeError, "classes must be a sequence of integers, got int 1"),
    (dict(classes="1"), TypeError, "classes must be a sequence of integers, got str '1'"),
    (dict(classes=[0.5]), TypeError, "classes must be a sequence of integers, got float 0.5 in it"),
])
def test_detector_settings_from_python_are_checked_as_the_flags_are(one_cfg, settings, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        Detector(str(one_cfg), None, img_size=64, device="cpu", **settings)
    with pytest.raises(error, match=f"^{re.escape(message)}$"):  # the options object alone checks them too
        DetectorOptions(**settings)


def test_valid_detector_settings_are_kept_as_given(one_cfg):
    detector = Detector(str(one_cfg), None, img_size=64, device="cpu", conf_thres=np.float32(0.5), iou_thres=1,
                        max_det=np.int64(3), classes=(0,), names=list("abcde"), max_batch=2, beta_nms=0.6)
    assert (detector.settings.conf_thres, detector.settings.iou_thres, detector.settings.max_det) == (0.5, 1.0, 3)
    assert detector.settings.classes == (0,) and detector.names == list("abcde") and detector.max_batch == 2


def test_the_detector_options_must_be_detector_options(one_cfg):
    with pytest.raises(TypeError, match=r"^options must be a DetectorOptions, got str 'x'$"):
        Detector(str(one_cfg), None, options="x")


# ------------------------------------------------------------------------------------ device
def test_a_gpu_index_is_read_as_its_text_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for index in (0, "0"):  # 0 is cuda:0, not "no device given" (which would silently pick the CPU here)
        with pytest.raises(ConfigError, match=r"^device 'cuda:0': CUDA is not available on this machine$"):
            parse_device(index)
    with pytest.raises(ConfigError, match=r"^device 'cuda:7': CUDA is not available on this machine$"):
        parse_device(np.int64(7))
    with pytest.raises(ConfigError, match=r"^device '-1' is not one of cpu, cuda, cuda:N or N$"):
        parse_device(-1)
    assert parse_device(None) == parse_device("") == torch.device("cpu")


def test_a_cuda_index_is_kept_where_cuda_is(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert parse_device(0) == parse_device("0") == torch.device("cuda", 0)
    assert parse_device(3) == torch.device("cuda", 3)


@pytest.mark.parametrize("device, shown", [(3.5, "float 3.5"), ([0], "list [0]"), (True, "bool True")])
def test_a_device_of_another_type_is_refused(one_cfg, device, shown):
    message = f"device must be a name (cpu, cuda, cuda:N), a GPU index or a torch.device, got {shown}"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        Detector(str(one_cfg), None, img_size=64, device=device)
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        load_model(str(one_cfg), device=device)


def test_load_model_reads_its_device_as_every_tool_does(one_cfg):
    with pytest.raises(ConfigError, match=r"^device 'gpu' is not one of cpu, cuda, cuda:N or N$"):
        load_model(str(one_cfg), device="gpu")
    assert next(load_model(str(one_cfg), device="cpu").parameters()).device == torch.device("cpu")


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


def test_a_checkpoint_with_damaged_training_options_is_one_line():
    with pytest.raises(WeightsError, match=r"^last\.pt: its saved training options are not valid: seed must be an "
                                           r"integer, got str 'a'$"):
        resume.saved_options({"train": {"options": {"seed": "a"}}}, Path("last.pt"))


def test_the_trainer_takes_training_options():
    with pytest.raises(TypeError, match=r"^Trainer\.from_options takes a TrainOptions, got NoneType None$"):
        Trainer.from_options(None)
