"""Darknet's detector augmentation (yolo.data.darknet_augment) against Darknet's own C functions.

Each case draws one image's augmentation with our :func:`draw_darknet`, then runs the same draw through
Darknet's ``crop_image`` / ``resize_image`` / ``flip_image`` / ``distort_image`` and ``fill_truth_detection``
(harness mode ``augment``; Darknet here is built without OpenCV, whose load_data_detection calls exactly
these). The draw itself is checked against hand-computed values of load_data_detection's integer formulas.
"""
import numpy as np
import pytest

from darknet_parity import AUGMENT_HYP
from yolo.data.darknet_augment import (DarknetDraw, augment_image, augment_truths, darknet_item, darknet_sample,
                                       draw_darknet, input_matrix, mixup_images, mixup_truths)
from yolo.data.transforms import augment_config, augment_from_cfg, train_transform, transform_boxes


def _truths(rng, n):
    """Float32[n, 4] normalized centre boxes well inside the image."""
    x, y = rng.uniform(0.15, 0.85, n), rng.uniform(0.15, 0.85, n)
    w, h = rng.uniform(0.02, 0.3, n), rng.uniform(0.02, 0.3, n)
    return np.stack([x, y, w, h], 1).astype(np.float32)


def _sorted(rows):
    rows = np.asarray(rows, np.float32).reshape(-1, 4)
    return rows[np.lexsort(rows.T[::-1])]


@pytest.mark.parametrize("seed", range(6))
def test_image_and_truths_match_darknet(darknet, seed):
    rng = np.random.default_rng(seed)
    oh, ow = int(rng.integers(20, 60)), int(rng.integers(20, 60))
    net_hw = (32, 48) if seed % 2 else (40, 40)
    hyp = {**AUGMENT_HYP, "letter_box": seed % 3 == 0, "resize": (1.0, 1.5, 0.7)[seed % 3]}
    draw = draw_darknet(rng, (oh, ow), net_hw, hyp)
    image = rng.random((oh, ow, 3), dtype=np.float32)
    truths = _truths(rng, 12)

    expected_image, expected_truths = darknet.augment(image.transpose(2, 0, 1), net_hw,
                                                      (draw.pleft, draw.pright, draw.ptop, draw.pbot),
                                                      draw.flip, draw.dhue, draw.dsat, draw.dexp, truths)
    ours = augment_image(image, draw, net_hw)
    np.testing.assert_allclose(ours.transpose(2, 0, 1), expected_image, atol=2e-6)
    kept, keep = augment_truths(truths, draw, (oh, ow), net_hw)
    assert len(kept) == len(expected_truths)
    np.testing.assert_allclose(_sorted(kept), _sorted(expected_truths), atol=1e-6)


def test_flip_and_distortion_alone_match_darknet(darknet):
    rng = np.random.default_rng(7)
    image = rng.random((24, 30, 3), dtype=np.float32)
    image[:4] = 0.5  # gray rows: Darknet's hue is 0/0 there, harmless because saturation is 0
    draw = DarknetDraw(0, 0, 0, 0, True, dhue=-0.07, dsat=0.6, dexp=1.4)
    expected, _ = darknet.augment(image.transpose(2, 0, 1), (24, 30), (0, 0, 0, 0), True, -0.07, 0.6, 1.4,
                                  _truths(rng, 1))
    np.testing.assert_allclose(augment_image(image, draw, (24, 30)).transpose(2, 0, 1), expected, atol=2e-6)


class _Fixed:
    """A generator stand-in returning given uniforms and coin flips, in the order draw_darknet asks."""

    def __init__(self, uniforms, coins):
        self.uniforms, self.coins = list(uniforms), list(coins)

    def random(self, n=None):
        if n is None:
            return self.uniforms.pop(0)
        return np.array([self.uniforms.pop(0) for _ in range(n)])

    def integers(self, n):
        return self.coins.pop(0)


def test_draw_follows_load_data_detection_formulas():
    # ow=100, oh=80, jitter=0.2: dw=20, dh=16. resize=1.5: min_rdw = (int)(100*(1-1.5)/2) = -25,
    # max_rdw = (int)(100*(1-1/1.5)/2) = 16; min_rdh = -20, max_rdh = 13.
    # uniforms: resize_r1, resize_r2, r1..r4, hue, sat, exp
    rng = _Fixed([0.5, 0.25, 0.25, 0.75, 0.0, 1.0, 0.5, 0.5, 0.5], coins=[1, 1, 0])
    hyp = {"jitter": 0.2, "resize": 1.5, "letter_box": 0, "flip": 0.5, "hue": 0.1, "saturation": 1.5, "exposure": 2}
    d = draw_darknet(rng, (80, 100), (416, 416), hyp)
    # pleft = (int)(0.25*40-20) = -10, then (int)(-10 + (0.5*41-25)) = (int)(-14.5) = -14
    # pright = (int)(0.75*40-20) = 10, then (int)(10 + (0.25*41-25)) = (int)(-4.75) = -4
    # ptop = (int)(0*32-16) = -16, then (int)(-16 + (0.5*33-20)) = (int)(-19.5) = -19
    # pbot = (int)(1*32-16) = 16, then (int)(16 + (0.25*33-20)) = (int)(4.25) = 4
    assert (d.pleft, d.pright, d.ptop, d.pbot) == (-14, -4, -19, 4)
    assert d.flip is True
    assert d.dhue == pytest.approx(0.0)
    assert d.dsat == pytest.approx(1.25)          # rand_scale: 1 + 0.5*(1.5-1), kept (coin 1)
    assert d.dexp == pytest.approx(1 / 1.5)       # 1 + 0.5*(2-1) = 1.5, inverted (coin 0)


def test_letter_box_widens_the_crop_to_the_network_aspect():
    # 100x50 image into a square network: result_ar = 2 > 1, so the crop grows in height by
    # delta_h = (100/1 - 50)/2 = 25 on each side (no jitter, no zoom).
    rng = _Fixed([0.5] * 9, coins=[0, 1, 1])
    hyp = {"jitter": 0.0, "resize": 1.0, "letter_box": 1, "flip": 0, "hue": 0, "saturation": 1, "exposure": 1}
    d = draw_darknet(rng, (50, 100), (416, 416), hyp)
    assert (d.pleft, d.pright, d.ptop, d.pbot) == (0, 0, -25, -25)
    assert d.crop_size((50, 100)) == (100, 100)


def test_sample_boxes_follow_the_image_matrix(assets):
    """The truths land where the pixel mapping sends the original boxes (away from the borders)."""
    rng = np.random.default_rng(3)
    image = (rng.random((60, 90, 3)) * 255).astype(np.uint8)
    boxes = np.array([[30, 20, 50, 40], [10, 10, 25, 30]], np.float32)
    labels = np.array([1, 2])
    hyp = augment_config(pipeline="darknet", jitter=0.1, hue=0.05, saturation=1.2, exposure=1.2, flip=0.5)
    out, got, got_labels, matrix = darknet_sample(image, boxes, labels, np.random.default_rng(11), (64, 96), hyp)
    assert out.shape == (64, 96, 3) and out.dtype == np.uint8
    order = np.argsort(got_labels)
    np.testing.assert_allclose(got[order], transform_boxes(boxes, matrix)[np.argsort(labels)], atol=1e-3)


def test_max_boxes_keeps_a_random_subset():
    image = np.zeros((40, 40, 3), np.uint8)
    boxes = np.array([[4 * i, 4 * i, 4 * i + 8, 4 * i + 8] for i in range(8)], np.float32)
    hyp = augment_config(pipeline="darknet", jitter=0, hue=0, saturation=1, exposure=1, flip=0, max_boxes=3)
    _, got, labels, _ = darknet_sample(image, boxes, np.arange(8), np.random.default_rng(0), (40, 40), hyp)
    assert len(labels) == 3 and len(set(labels.tolist())) == 3


def test_cfg_selects_the_darknet_pipeline(assets):
    from yolo.models.cfg import parse_cfg

    sections = parse_cfg(assets("cfg/yolov4-tiny.cfg"))
    heads = [s for s in sections if s.type == "yolo"]
    hyp = augment_from_cfg(sections[0], heads)
    assert hyp["pipeline"] == "darknet" and hyp["mosaic"] == 0 and hyp["scale"] == 0
    assert hyp["jitter"] == pytest.approx(heads[-1].get_float("jitter"))
    assert hyp["resize"] == heads[-1].get_float("resize", 1.0)
    with pytest.raises(ValueError, match="pipeline: affine"):
        augment_from_cfg(sections[0], heads, overrides={"min_visible": 0.5})
    # A saved hyp (every key, the other pipeline's at their no-op values) is accepted again as it is.
    assert augment_from_cfg(sections[0], heads, overrides=dict(hyp)) == hyp
    # yolov4-tiny's resize=1.5 exists only in Darknet's pipeline: our own one refuses it rather than drop it.
    with pytest.raises(ValueError, match="resize=1.5"):
        augment_from_cfg(sections[0], heads, overrides={"pipeline": "affine"})
    v3 = parse_cfg(assets("cfg/yolov3-tiny.cfg"))
    affine = augment_from_cfg(v3[0], [s for s in v3 if s.type == "yolo"],
                              overrides={"pipeline": "affine", "mosaic": 0.5})
    assert affine["pipeline"] == "affine" and affine["mosaic"] == 0.5
    with pytest.raises(ValueError, match="belong to Darknet's pipeline"):
        augment_from_cfg(v3[0], [s for s in v3 if s.type == "yolo"], overrides={"pipeline": "affine", "mixup": 1})


def test_train_transform_runs_the_darknet_pipeline():
    image = np.full((30, 40, 3), 90, np.uint8)
    sample = (image, np.array([[5, 5, 20, 20]], np.float32), np.array([0]))
    hyp = augment_config(pipeline="darknet", jitter=0.2, flip=0.5)
    out, boxes, labels, matrix = train_transform(lambda i: sample, 0, 1, np.random.default_rng(1), (32, 32), hyp)
    ref = darknet_sample(*sample, np.random.default_rng(1), (32, 32), hyp)
    np.testing.assert_array_equal(out, ref[0])
    np.testing.assert_allclose(boxes, ref[1])
    np.testing.assert_allclose(matrix, input_matrix(draw_darknet(np.random.default_rng(1), (30, 40), (32, 32), hyp),
                                                    (30, 40), (32, 32)))


@pytest.mark.parametrize("seed", range(3))
def test_mixup_blend_matches_darknet(darknet, seed):
    rng = np.random.default_rng(seed)
    new, old = rng.random((3, 8, 10), dtype=np.float32), rng.random((3, 8, 10), dtype=np.float32)
    new_truths, old_truths = _truths(rng, int(rng.integers(0, 6))), _truths(rng, int(rng.integers(1, 6)))
    max_boxes = int(rng.integers(3, 9))
    expected_image, expected_truths = darknet.mixup(new, old, new_truths, old_truths, max_boxes)
    np.testing.assert_array_equal(mixup_images(new, old), expected_image)
    np.testing.assert_array_equal(mixup_truths(new_truths, old_truths, max_boxes), expected_truths)


def test_mixup_item_averages_two_augmented_images():
    images = [np.full((20, 20, 3), 40, np.uint8), np.full((20, 20, 3), 200, np.uint8)]
    boxes = [np.array([[2, 2, 10, 10]], np.float32), np.array([[8, 8, 18, 18]], np.float32)]
    load = lambda i: (images[i], boxes[i], np.array([i]))  # noqa: E731
    hyp = augment_config(pipeline="darknet", jitter=0, hue=0, saturation=1, exposure=1, flip=0, mixup=1)
    mixed = 0
    for seed in range(20):
        image, got, labels, matrix = darknet_item(load, 0, 2, np.random.default_rng(seed), (20, 20), hyp)
        if matrix is None:  # mixed: the partner's truths first, then the image's own
            mixed += 1
            partner = int(labels[0])
            assert labels.tolist() == [partner, 0]
            assert int(image[0, 0, 0]) == round((images[partner][0, 0, 0] / 255 * 0.5 + 40 / 255 * 0.5) * 255)
        else:
            assert labels.tolist() == [0] and int(image[0, 0, 0]) == 40
    assert 4 <= mixed <= 16  # a fair coin per image


def test_uint8_input_is_the_same_as_float():
    rng = np.random.default_rng(5)
    image = (rng.random((30, 45, 3)) * 255).astype(np.uint8)
    draw = draw_darknet(rng, (30, 45), (32, 32), AUGMENT_HYP)
    np.testing.assert_array_equal(augment_image(image, draw, (32, 32)),
                                  augment_image(image.astype(np.float32) / np.float32(255), draw, (32, 32)))
