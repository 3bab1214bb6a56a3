"""The letterbox border is Darknet's gray: exactly 0.5 on float inputs (Darknet's own ``letterbox_image``,
built from its source, is the reference), 128 on ``uint8`` (0.5 * 255 = 127.5 rounded up), and the data
pipeline letterboxes with the same function as the Detector."""
import numpy as np
import pytest
import torch

from yolo.data.transforms import resize_sample
from yolo.inference.preprocess import preprocess
from yolo.ops.letterbox import LETTERBOX_FILL, LETTERBOX_FILL_UINT8, letterbox, letterbox_params

SHAPES = [((48, 96), (64, 64)), ((96, 40), (64, 96)), ((30, 30), (64, 32)), ((64, 64), (64, 64))]


def test_uint8_gray_is_half_rounded_up():
    assert LETTERBOX_FILL == 0.5
    assert LETTERBOX_FILL_UINT8 == 128 == int(np.floor(0.5 * 255 + 0.5))
    assert abs(LETTERBOX_FILL_UINT8 / 255 - 0.5) <= 1 / 510


@pytest.mark.parametrize("image_hw, net_hw", SHAPES)
def test_border_and_placement_equal_darknets_letterbox_image(darknet, image_hw, net_hw):
    (h, w), (net_h, net_w) = image_hw, net_hw
    value = 0.2  # a constant image: the content is the same whatever the interpolation
    ref = darknet.letterbox(np.full((3, h, w), value, np.float32), net_w, net_h).transpose(1, 2, 0)
    ref_border = np.abs(ref - 0.5) < 0.1
    assert (ref[ref_border] == 0.5).all()  # Darknet's fill, exactly
    assert np.allclose(ref[~ref_border], value, atol=1e-6)

    ours, _ = letterbox(np.full((h, w, 3), value, np.float32), (net_h, net_w))  # float image: default fill
    assert np.array_equal(np.abs(ours - 0.5) < 0.1, ref_border)  # the same placement
    assert (ours[ref_border] == 0.5).all()

    batch, _ = preprocess([np.full((h, w, 3), 51, np.uint8)], (net_h, net_w))  # 51 / 255 = 0.2
    net_input = batch[0].permute(1, 2, 0).numpy()
    assert np.array_equal(net_input == 0.5, ref_border) and np.allclose(net_input[~ref_border], 0.2)

    gray, _ = letterbox(np.full((h, w, 3), 51, np.uint8), (net_h, net_w))  # uint8 image: 128
    assert np.array_equal(gray == LETTERBOX_FILL_UINT8, ref_border)


@pytest.mark.parametrize("image_hw, net_hw", SHAPES)
def test_border_against_numpy_written_independently(image_hw, net_hw):
    """Darknet's image.c letterbox_image written out in numpy: a float canvas of 0.5, the image embedded at
    ((net_w - new_w) // 2, (net_h - new_h) // 2) with image.c's integer sizes."""
    (h, w), (net_h, net_w) = image_hw, net_hw
    if net_w / w < net_h / h:
        new_w, new_h = net_w, (h * net_w) // w
    else:
        new_w, new_h = (w * net_h) // h, net_h
    expected = np.full((net_h, net_w, 3), 0.5, np.float32)
    x0, y0 = (net_w - new_w) // 2, (net_h - new_h) // 2
    expected[y0:y0 + new_h, x0:x0 + new_w] = 0.2
    assert letterbox_params((h, w), (net_h, net_w)) == ((new_h, new_w), (x0, y0))
    ours, _ = letterbox(np.full((h, w, 3), 0.2, np.float32), (net_h, net_w))
    np.testing.assert_array_equal(ours, expected)
    batch, _ = preprocess([np.full((h, w, 3), 51, np.uint8)], (net_h, net_w))
    np.testing.assert_allclose(batch[0].permute(1, 2, 0).numpy(), expected, atol=1e-7)


def test_data_pipeline_letterboxes_like_the_detector():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (45, 80, 3), dtype=np.uint8)
    out, boxes, info = resize_sample(image, np.zeros((0, 4), np.float32), (64, 64))
    expected, expected_info = letterbox(image, (64, 64))
    assert np.array_equal(out, expected) and info == expected_info
    assert info.pad_y == 14 and (out[:14] == LETTERBOX_FILL_UINT8).all() and (out[50:] == LETTERBOX_FILL_UINT8).all()
    # the float network input differs from the uint8 one only in the border: 0.5 against 128 / 255
    batch, infos = preprocess([image[:, :, ::-1].copy()], (64, 64), resample="opencv")  # preprocess takes BGR
    assert infos[0] == info
    from_uint8 = torch.from_numpy(out).float() / 255
    diff = (batch[0].permute(1, 2, 0) - from_uint8).abs()
    inside = from_uint8.new_zeros(diff.shape[:2], dtype=torch.bool)
    inside[14:50, :] = True
    assert diff[inside].max() < 1e-6 and torch.allclose(diff[~inside], torch.tensor(0.5 / 255), atol=1e-6)


def test_darknet_resampled_data_pipeline_equals_the_detector():
    """With Darknet's resampler (evaluation's default) the data pipeline's float item is the Detector's input:
    the same floats inside, exactly 0.5 around."""
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (45, 80, 3), dtype=np.uint8)  # RGB, as the dataset reads
    out, _, info = resize_sample(image, np.zeros((0, 4), np.float32), (64, 64), resample="darknet")
    assert out.dtype == np.float32 and (out[:14] == 0.5).all() and (out[50:] == 0.5).all()
    batch, infos = preprocess([image[:, :, ::-1].copy()], (64, 64))  # BGR in; Darknet's resampler by default
    assert infos[0] == info
    assert torch.equal(batch[0].permute(1, 2, 0), torch.from_numpy(out))
