"""The device pre-processing (torch ops, :mod:`yolo.inference.device_preprocess`) against the CPU path
(:func:`yolo.inference.preprocess.preprocess`), run here on the CPU: the same torch ops run on CUDA
(``tests/test_cuda_inference.py``). Darknet's resampler: the same floats (both are checked against Darknet itself
in ``tests/test_darknet_resize.py``); OpenCV's: within one level of ``cv2.resize`` (the CPU path, itself checked
against ``cv2.dnn.blobFromImage``)."""
import cv2
import numpy as np
import pytest
import torch

from conftest import asset
from yolo.files.images import load_image
from yolo.inference.device_preprocess import preprocess_on_device, resize_bilinear_levels
from yolo.inference.preprocess import preprocess

IMAGES = ["dog.jpg", "horses.jpg", "person.jpg", "eagle.jpg", "giraffe.jpg", "kite.jpg", "scream.jpg"]
LEVEL = 1 / 255


@pytest.fixture(scope="module")
def images():
    return [load_image(asset(f"images/{name}")) for name in IMAGES]


# Down- and up-scaling, square and not, and one size equal to dog.jpg's own (no resize for that image).
SIZES = [(416, 416), (320, 608), (608, 320), (256, 256), (832, 832), (576, 768)]


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
@pytest.mark.parametrize("size", SIZES)
def test_device_preprocess_within_one_level_of_opencv(images, mode, size):
    expected, expected_infos = preprocess(images, size, mode, resample="opencv")
    got, infos = preprocess_on_device(images, size, mode, device="cpu", resample="opencv")
    assert got.shape == expected.shape == (len(images), 3, *size)
    assert got.is_contiguous(memory_format=torch.channels_last)
    assert infos == expected_infos
    assert (got - expected).abs().max().item() <= LEVEL + 1e-6
    # Most pixels are the same level: the two differ by rounding only, not by a shifted sampling grid.
    assert (got != expected).float().mean().item() < 0.2


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
@pytest.mark.parametrize("size", [(416, 416), (320, 608), (576, 768)])
def test_device_preprocess_equals_the_cpu_path_with_darknets_resampler(images, mode, size):
    expected, expected_infos = preprocess(images, size, mode)
    got, infos = preprocess_on_device(images, size, mode, device="cpu")
    assert infos == expected_infos and got.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("size", [(416, 416), (1000, 300), (97, 131)])
def test_resize_bilinear_levels_matches_cv2_resize(images, size):
    image = images[4]  # kite.jpg, 1352x900: shrinks or grows per axis
    expected = cv2.resize(image, (size[1], size[0]), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    pixels = torch.from_numpy(image).permute(2, 0, 1)[None]
    got = resize_bilinear_levels(pixels, size)[0].permute(1, 2, 0).numpy()
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1
    assert np.array_equal(got, np.round(got))


def test_mixed_sizes_keep_their_order_and_fill(images):
    # Images of several sizes in one call (grouped by size inside) come back in the order given.
    order = [images[1], images[0], images[3], images[2]]
    expected, _ = preprocess(order, (416, 416), "letterbox")
    got, _ = preprocess_on_device(order, (416, 416), "letterbox", device="cpu")
    assert torch.equal(got, expected)
    assert torch.all(got[0, :, 0, 0] == 0.5) and torch.all(got[1, :, 0, 0] == 0.5)


def test_half_dtype(images):
    got, _ = preprocess_on_device(images[:2], (320, 320), "letterbox", device="cpu", dtype=torch.float16)
    expected, _ = preprocess(images[:2], (320, 320), "letterbox")
    assert got.dtype == torch.float16
    assert torch.equal(got, expected.half())
