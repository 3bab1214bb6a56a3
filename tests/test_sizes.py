"""Network input sizes (yolo.ops.sizes): every accepted spelling gives (height, width), everything else is one
ConfigError line naming where the value came from; the stride check and the places that use it."""
import subprocess
import sys

import numpy as np
import pytest

from yolo.errors import ConfigError
from yolo.ops.sizes import check_stride, checked_image_size, image_size, size_text


# ------------------------------------------------------------------------------------ the normaliser
@pytest.mark.parametrize("value, expected", [
    (416, (416, 416)),
    ([416], (416, 416)),
    ((416,), (416, 416)),
    ([320, 416], (320, 416)),  # height, width
    ((320, 416), (320, 416)),
    ([416, 320], (416, 320)),
    (np.int64(96), (96, 96)),
    ([np.int32(64), np.int64(128)], (64, 128)),
    (1, (1, 1)),
])
def test_every_accepted_form_is_height_width(value, expected):
    size = image_size(value, "--img-size")
    assert size == expected
    assert type(size) is tuple and all(type(side) is int for side in size)


def test_none_gives_the_default_in_any_form():
    assert image_size(None, "x", (320, 416)) == (320, 416)
    assert image_size(None, "x", [608]) == (608, 608)
    assert image_size(None, "x", 256) == (256, 256)
    assert image_size(288, "x", 416) == (288, 288)  # a given value wins over the default


@pytest.mark.parametrize("value", [
    True, False, [True, 416], 416.0, [416.0], [320, 416.5], "416", ["416"], [], [320, 416, 3], (1, 2, 3),
    {"h": 1, "w": 2}, [[416]],
])
def test_other_types_and_counts_are_refused(value):
    with pytest.raises(ConfigError) as exc:
        image_size(value, "hyp.yaml: img_size")
    message = str(exc.value)
    assert message.startswith("hyp.yaml: img_size: an image size is one integer or two (height width), got ")
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize("value, shown", [(0, "0x0"), (-416, "-416x-416"), ([320, 0], "320x0"), ([-32, 64], "-32x64")])
def test_sides_must_be_positive(value, shown):
    with pytest.raises(ConfigError, match=f"^--img-size: image sides must be positive, got {shown}$"):
        image_size(value, "--img-size")


def test_a_size_is_printed_width_first():
    assert size_text((320, 416)) == "416x320" and size_text(image_size(608, "x")) == "608x608"


def test_no_value_and_no_default_is_refused():
    with pytest.raises(ConfigError, match="^img_size: no image size given$"):
        image_size(None, "img_size")


def test_a_bad_default_is_refused_too():
    with pytest.raises(ConfigError, match="^preprocessing: img_size: image sides must be positive"):
        image_size(None, "preprocessing: img_size", (0, 416))


def test_config_errors_are_value_errors():
    """The Python API (Detector, export) documents ValueError for a bad size."""
    assert issubclass(ConfigError, ValueError)


# ------------------------------------------------------------------------------------ the stride check
@pytest.mark.parametrize("size, stride", [((416, 416), 32), ((320, 608), 32), ((32, 32), 32), ((96, 64), 16),
                                          ((7, 13), 1)])
def test_multiples_of_the_stride_pass_unchanged(size, stride):
    assert check_stride(size, stride, "--img-size") == size


@pytest.mark.parametrize("size, stride, words", [
    ((400, 400), 32, "400x400 must be a multiple of the network stride 32 (e.g. 416x416)"),
    ((416, 420), 32, "416x420 must be a multiple of the network stride 32 (e.g. 416x416)"),
    ((100, 416), 32, "100x416 must be a multiple of the network stride 32 (e.g. 96x416)"),
    ((10, 10), 32, "10x10 must be a multiple of the network stride 32 (e.g. 32x32)"),  # never below one stride
    ((70, 64), 8, "70x64 must be a multiple of the network stride 8 (e.g. 72x64)"),
])
def test_other_sizes_are_refused_naming_the_source(size, stride, words):
    with pytest.raises(ConfigError) as exc:
        check_stride(size, stride, "runs/exp/hyp.yaml: img_size")
    assert str(exc.value) == f"runs/exp/hyp.yaml: img_size: {words}"


def test_a_stride_below_one_is_refused():
    with pytest.raises(ConfigError, match="^x: the network stride must be positive, got 0$"):
        check_stride((32, 32), 0, "x")


def test_checked_image_size_normalises_then_checks():
    assert checked_image_size([320, 416], 32, "--img-size") == (320, 416)
    assert checked_image_size(None, 32, "--img-size", [608]) == (608, 608)
    with pytest.raises(ConfigError, match=r"^--img-size: 100x100 must be a multiple of the network stride 32"):
        checked_image_size(100, 32, "--img-size")
    with pytest.raises(ConfigError, match="^--img-size: an image size is one integer or two"):
        checked_image_size([416, 416, 416], 32, "--img-size")


@pytest.mark.slow
def test_the_module_does_not_load_torch():
    """Command-line parsers use it before anything heavy is imported."""
    code = "import sys, yolo.ops.sizes; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ------------------------------------------------------------------------------------ where sizes enter
NET = "[net]\nbatch=16\nsubdivisions=2\nmax_batches=100\nwidth={w}\nheight={h}\n[convolutional]\nfilters=3\n"


def resolve(hyp=None, flags=None, stride=32, h=96, w=64):
    from yolo.engine.config import resolve_hyp
    from yolo.models.cfg import parse_cfg_text

    return resolve_hyp(parse_cfg_text(NET.format(h=h, w=w), "n.cfg")[0], [], hyp, flags or {}, stride=stride)


@pytest.mark.parametrize("flag, expected", [(None, (96, 64)), (128, (128, 128)), ([160], (160, 160)),
                                            ((64, 128), (64, 128)), ([320, 416], (320, 416))])
def test_training_takes_the_flag_else_the_cfg_as_height_width(flag, expected):
    hyp = resolve(flags={"img_size": flag})
    assert hyp.img_size == expected  # an ImageSize from where it enters
    assert hyp.to_dict()["img_size"] == list(expected)  # hyp.yaml's list form


def test_training_takes_a_hyp_file_size(tmp_path):
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text("img_size: [128, 96]\n")
    assert resolve(hyp_file).img_size == (128, 96)
    assert resolve(hyp_file, {"img_size": 64}).img_size == (64, 64)  # the flag wins


def test_training_size_errors_name_the_flag_the_file_or_the_cfg_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^--img-size: 100x100 must be a multiple of the network stride 32 "
                                          r"\(e\.g\. 96x96\)$"):
        resolve(flags={"img_size": 100})
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text("img_size: [96, 100]\n")
    with pytest.raises(ConfigError, match=rf"^{hyp_file}: img_size: 96x100 must be a multiple of the network "
                                          "stride 32"):
        resolve(hyp_file)
    with pytest.raises(ConfigError, match=r"^n.cfg:6: \[net\] height, width: 100x64 must be a multiple of the "
                                          "network stride 32"):
        resolve(h=100)
    hyp_file.write_text("img_size: [96, 64, 3]\n")
    with pytest.raises(ConfigError, match=rf"^{hyp_file}: img_size: an image size is one integer or two"):
        resolve(hyp_file)
    with pytest.raises(ConfigError, match="^--img-size: image sides must be positive, got 0x0$"):
        resolve(flags={"img_size": 0})
    assert resolve(flags={"img_size": 100}, stride=None).img_size == (100, 100)  # no network: no stride check


def test_the_dataset_holds_height_width():
    from yolo.data.dataset import DetectionDataset

    assert DetectionDataset([], ["a"], img_size=[96, 64]).img_size == (96, 64)
    assert DetectionDataset([], ["a"], img_size=128).img_size == (128, 128)
    with pytest.raises(ConfigError, match="^img_size: an image size is one integer or two"):
        DetectionDataset([], ["a"], img_size=128.0)


def test_multi_scale_base_size_is_checked_against_its_stride():
    from yolo.data.collate import MultiScale

    assert MultiScale((320, 416)).base_hw == (320, 416)
    with pytest.raises(ConfigError, match=r"^multi-scale base size: 400x416 must be a multiple of the network stride 32"):
        MultiScale((400, 416))


def test_a_saved_hyp_size_is_read_back_as_height_width():
    from yolo.engine.config import Hyperparameters

    assert Hyperparameters.from_dict({"img_size": [96, 64]}).img_size == (96, 64)  # hyp.yaml's / a checkpoint's
    assert Hyperparameters.from_dict({"img_size": 64}).img_size == (64, 64)
    with pytest.raises(ConfigError, match=r"^last.pt's hyp: img_size: an image size is one integer or two"):
        Hyperparameters.from_dict({"img_size": [1, 2, 3]}, "last.pt's hyp")
