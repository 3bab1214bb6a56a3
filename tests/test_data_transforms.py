"""Augmentation keeps images and boxes together, is deterministic under a seed; collate and multi-scale."""

import cv2
import numpy as np
import pytest
import torch

from conftest import asset
from yolo.models.cfg import parse_cfg
from yolo.data import (MultiScale, YoloDataset, augment_config, augment_from_cfg, collate_fn, create_dataloader,
                       resize_batch, set_epoch)
from yolo.data.transforms import item_rng, train_transform
from yolo.ops.boxes import cxcywh_to_xyxy
from yolo.ops.letterbox import fit_image_darknet, letterbox

STRONG = {"hue": 0.1, "saturation": 1.5, "exposure": 1.5, "jitter": 0.3, "scale": 0.5, "translate": 0.2,
          "flip": 0.5, "fill": 0, "min_visible": 0.0, "min_side": 1.0}


pytestmark = pytest.mark.usefixtures("private_cache")


def _rect_sample(seed: int):
    """A black image with one white filled rectangle and its exact xyxy box."""
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(120, 300, size=2))
    bw, bh = int(rng.integers(20, w // 2)), int(rng.integers(20, h // 2))
    x1, y1 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
    image = np.zeros((h, w, 3), np.uint8)
    image[y1:y1 + bh, x1:x1 + bw] = 255
    return image, np.array([[x1, y1, x1 + bw, y1 + bh]], np.float32), np.array([0], np.int64)


def _mask_box(mask: np.ndarray):
    ys, xs = np.nonzero(mask)
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float32)


@pytest.mark.parametrize("degrees", [0.0, 20.0])
@pytest.mark.parametrize("seed", range(6))
def test_single_image_augmentation_keeps_box_on_drawn_pixels(seed, degrees):
    sample = _rect_sample(seed)
    hyp = augment_config(STRONG, degrees=degrees)
    image, boxes, labels, matrix = train_transform(lambda i: sample, 0, 1, item_rng(seed, 0, 0), (160, 224), hyp)
    assert image.shape == (160, 224, 3) and image.dtype == np.uint8
    mask = image.max(axis=2) > 100
    if len(boxes) == 0:  # pushed out of the picture: then (almost) nothing of it may remain
        assert mask.sum() < 25
        return
    assert labels.tolist() == [0]
    np.testing.assert_allclose(boxes[0], _mask_box(mask), atol=1.5)
    if degrees == 0:
        # The recorded matrix maps the original box onto the output box (flip included).
        corners = np.array([[sample[1][0, 0], sample[1][0, 1], 1], [sample[1][0, 2], sample[1][0, 3], 1]]) @ matrix.T
        mapped = np.array([corners[:, 0].min(), corners[:, 1].min(), corners[:, 0].max(), corners[:, 1].max()])
        mapped = mapped.clip([0, 0, 0, 0], [224, 160, 224, 160])
        np.testing.assert_allclose(boxes[0], mapped, atol=1e-3)


@pytest.mark.parametrize("seed", range(4))
def test_mosaic_boxes_cover_drawn_pixels(seed):
    samples = [_rect_sample(100 * seed + k) for k in range(5)]
    hyp = augment_config(STRONG, mosaic=1.0)
    image, boxes, labels, matrix = train_transform(lambda i: samples[i], 0, 5, item_rng(seed, 0, 0), (192, 192), hyp)
    assert matrix is None and image.shape == (192, 192, 3)
    mask = (image.max(axis=2) > 100).astype(np.uint8)
    for box in boxes:  # every box sits on white pixels
        x1, y1, x2, y2 = np.round(box).astype(int)
        inside = mask[y1:y2, x1:x2]
        assert inside.size and inside.mean() > 0.9
    covered = np.zeros_like(mask)
    for x1, y1, x2, y2 in boxes:
        covered[max(int(y1) - 1, 0):int(np.ceil(y2)) + 1, max(int(x1) - 1, 0):int(np.ceil(x2)) + 1] = 1
    count, components, stats, _ = cv2.connectedComponentsWithStats(mask)
    for c in range(1, count):  # every visible white patch (not a sliver) has its box
        if stats[c, cv2.CC_STAT_AREA] >= 20 and min(stats[c, cv2.CC_STAT_WIDTH], stats[c, cv2.CC_STAT_HEIGHT]) >= 2:
            assert covered[components == c].all()


def test_hsv_only_changes_colors_not_geometry():
    sample = _rect_sample(3)
    hyp = augment_config(fill=0, scale=0, translate=0, flip=0, hue=0.5, saturation=3, exposure=1.2)
    plain = augment_config(fill=0, scale=0, translate=0, flip=0, hue=0, saturation=1, exposure=1)
    out1, boxes1, _, _ = train_transform(lambda i: sample, 0, 1, item_rng(0, 0, 0), (256, 256), hyp)
    out2, boxes2, _, _ = train_transform(lambda i: sample, 0, 1, item_rng(0, 0, 0), (256, 256), plain)
    np.testing.assert_array_equal(boxes1, boxes2)
    expected, _ = letterbox(sample[0], (256, 256), fill=0)  # no geometry randomness: Darknet letterbox
    # warpAffine weights are quantized to 1/32 (up to 8 gray levels on a 0-255 edge)
    assert np.abs(out2.astype(int) - expected.astype(int)).max() <= 8


def test_augment_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown augmentation key 'mosiac'"):
        augment_config({"mosiac": 0.5})
    with pytest.raises(ValueError, match="probability"):
        augment_config(flip=2)
    assert augment_config(saturation=None)["saturation"] == 1.5


def test_augment_from_cfg_reads_darknet_keys():
    path = asset("cfg/yolov3-tiny.cfg")
    # Reference: the values straight from the cfg text.
    text = {}
    for line in path.read_text().splitlines():
        key, _, value = line.replace(" ", "").partition("=")
        text.setdefault(key, value)  # the [net] keys come first; jitter from the first [yolo]
    sections = parse_cfg(path)
    hyp = augment_from_cfg(sections[0], [s for s in sections if s.type == "yolo"],
                           overrides={"pipeline": "affine", "mosaic": 0.25})
    for key in ("saturation", "exposure", "hue", "jitter"):
        assert hyp[key] == pytest.approx(float(text[key]))
    assert hyp["mosaic"] == 0.25 and hyp["flip"] == 0.5 and hyp["scale"] == 0 and hyp["translate"] == 0


# ----------------------------------------------------------------------------- dataset level
@pytest.fixture
def rect_dataset_dir(tmp_path):
    images, labels = tmp_path / "images" / "train", tmp_path / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    for i in range(6):
        image, boxes, _ = _rect_sample(50 + i)
        h, w = image.shape[:2]
        image[..., 0] = 40  # a bit of color so HSV has something to do
        cv2.imwrite(str(images / f"{i}.png"), image)
        x1, y1, x2, y2 = boxes[0]
        (labels / f"{i}.txt").write_text(f"{i % 2} {(x1 + x2) / 2 / w} {(y1 + y2) / 2 / h} {(x2 - x1) / w} {(y2 - y1) / h}\n")
    return images


def test_same_seed_same_samples_other_epoch_other_samples(rect_dataset_dir):
    hyp = {**STRONG, "mosaic": 0.5}
    a = YoloDataset(rect_dataset_dir, ["x", "y"], img_size=128, augment=True, hyp=hyp, seed=7)
    b = YoloDataset(rect_dataset_dir, ["x", "y"], img_size=128, augment=True, hyp=hyp, seed=7)
    for i in range(len(a)):
        (ia, ta, _), (ib, tb, _) = a[i], b[i]
        assert torch.equal(ia, ib) and torch.equal(ta, tb)
    b.set_epoch(1)
    assert any(not torch.equal(a[i][0], b[i][0]) for i in range(len(a)))
    c = YoloDataset(rect_dataset_dir, ["x", "y"], img_size=128, augment=True, hyp=hyp, seed=8)
    assert any(not torch.equal(a[i][0], c[i][0]) for i in range(len(a)))


def test_loader_batches_do_not_depend_on_workers(rect_dataset_dir):
    ds = YoloDataset(rect_dataset_dir, ["x", "y"], img_size=96, augment=True, hyp=STRONG, seed=3)

    def epoch_batches(workers, epoch):
        loader = create_dataloader(ds, batch_size=4, shuffle=True, num_workers=workers, seed=3)
        set_epoch(loader, epoch)
        return [(im, t, [i["index"] for i in info]) for im, t, info in loader]

    serial, parallel = epoch_batches(0, 2), epoch_batches(2, 2)
    for (i0, t0, n0), (i1, t1, n1) in zip(serial, parallel):
        assert n0 == n1 and torch.equal(i0, i1) and torch.equal(t0, t1)
    assert [n for _, _, n in epoch_batches(0, 3)] != [n for _, _, n in serial]


def test_eval_items_are_darknet_letterbox_and_map_back(rect_dataset_dir):
    ds = YoloDataset(rect_dataset_dir, ["x", "y"], img_size=(96, 160), augment=False)
    gt = ds.ground_truth()
    for i in range(len(ds)):
        image, targets, info = ds[i]
        original = cv2.cvtColor(cv2.imread(info["path"]), cv2.COLOR_BGR2RGB)
        expected, lb = fit_image_darknet(original, (96, 160), bgr=False)  # Darknet's letterbox_image, float
        assert torch.equal(image, torch.from_numpy(expected).permute(2, 0, 1))
        ds.resample = "opencv"  # cv2.resize on uint8 instead
        uint8, _, _ = ds[i]
        ds.resample = "darknet"
        assert torch.equal(uint8, torch.from_numpy(letterbox(original, (96, 160))[0]).permute(2, 0, 1))
        assert info["letterbox"] == lb and info["orig_shape"] == original.shape[:2]
        back = info["letterbox"].to_original(cxcywh_to_xyxy(targets[:, 2:]), info["orig_shape"])
        torch.testing.assert_close(back, gt[i]["boxes"], atol=1e-3, rtol=0)
        assert targets[:, 1].long().tolist() == gt[i]["labels"].tolist()
        assert gt[i]["image_id"] == i and gt[i]["file_name"] == info["path"]


def test_collate_format(rect_dataset_dir):
    ds = YoloDataset(rect_dataset_dir, ["x", "y"], img_size=64, augment=True, hyp=STRONG, seed=0)
    items = [ds[i] for i in range(4)]
    images, targets, infos = collate_fn(items)
    assert images.shape == (4, 3, 64, 64) and images.dtype == torch.float32
    assert 0.0 <= images.min() and images.max() <= 1.0
    torch.testing.assert_close(images[2], items[2][0].float() / 255)
    assert targets.shape == (sum(len(t) for _, t, _ in items), 6) and targets.dtype == torch.float32
    expected_index = torch.cat([torch.full((len(t),), i, dtype=torch.float32) for i, (_, t, _) in enumerate(items)])
    assert torch.equal(targets[:, 0], expected_index)
    torch.testing.assert_close(targets[:, 1:], torch.cat([t[:, 1:] for _, t, _ in items]))
    assert [info["index"] for info in infos] == [0, 1, 2, 3]


def test_resize_batch_moves_boxes_with_pixels():
    image, _, _ = _rect_sample(11)
    fitted, _ = letterbox(image, (128, 128), fill=0)
    lb_boxes = _mask_box(fitted.max(axis=2) > 100)  # the rectangle, measured from its pixels
    cx, cy = (lb_boxes[0] + lb_boxes[2]) / 2, (lb_boxes[1] + lb_boxes[3]) / 2
    targets = torch.tensor([[0, 0, cx, cy, lb_boxes[2] - lb_boxes[0], lb_boxes[3] - lb_boxes[1]]], dtype=torch.float32)
    images = torch.from_numpy(fitted).permute(2, 0, 1)[None].float() / 255
    resized, new_targets, _ = resize_batch(images, targets, (96, 160))
    assert resized.shape == (1, 3, 96, 160)
    measured = _mask_box(resized[0].amax(0).numpy() > 0.4)
    np.testing.assert_allclose(cxcywh_to_xyxy(new_targets[0, 2:]).numpy(), measured, atol=1.5)


def test_multiscale_is_deterministic_and_darknet_like():
    schedule = MultiScale((416, 416), stride=32, every=10, seed=5)
    sizes = [schedule(b) for b in range(1000)]
    assert sizes == [MultiScale((416, 416), stride=32, every=10, seed=5)(b) for b in range(1000)]
    assert all(sizes[b] == sizes[b - b % 10] for b in range(1000))  # changes only every 10 batches
    assert all(h == w and h % 32 == 0 and 0.7 * 416 <= h <= 1.3 * 416 for h, w in sizes)
    assert len(set(sizes)) >= 5 and set(sizes) <= set(schedule.sizes())
    assert sizes != [MultiScale((416, 416), every=10, seed=6)(b) for b in range(1000)]
    wide = MultiScale((320, 640), every=1, seed=0)
    assert all(h % 32 == 0 and w % 32 == 0 and w >= h for h, w in (wide(b) for b in range(50)))
    with pytest.raises(ValueError, match="multiple of the network stride"):
        MultiScale((400, 416))


# ------------------------------------------------------------------ crop values the pipeline cannot draw from
def _head_cfg(tmp_path, head_lines: str):
    from yolo.models.cfg import parse_cfg_text
    text = ("[net]\nwidth=64\nheight=64\n\n[convolutional]\nfilters=30\nsize=1\nactivation=linear\n\n"
            "[yolo]\nmask=0,1,2\nanchors=10,10, 20,20, 40,40\nclasses=5\nnum=3\n" + head_lines)
    sections = parse_cfg_text(text, source=str(tmp_path / "net.cfg"))
    return sections[0], [s for s in sections if s.type == "yolo"], text


@pytest.mark.parametrize("jitter", ["1", "0.99", "0.5"])
def test_a_cfg_jitter_darknets_plain_build_cannot_crop_with_is_refused_at_its_line(tmp_path, jitter):
    # before: accepted, then an IndexError in a loader worker (a crop of no pixels)
    from yolo.errors import CfgError
    net, heads, text = _head_cfg(tmp_path, f"jitter={jitter}\n")
    line = text.splitlines().index(f"jitter={jitter}") + 1
    with pytest.raises(CfgError, match=f"net.cfg:{line}: .*jitter={jitter} .*crop of no pixels.*below 0.5"):
        augment_from_cfg(net, heads)
    # Darknet's OpenCV build resets such a crop to the whole image: that pipeline takes it
    assert augment_from_cfg(net, heads, overrides={"pipeline": "darknet_opencv"})["jitter"] == float(jitter)


@pytest.mark.parametrize("values, key", [({"jitter": 1}, "jitter"), ({"jitter": 100}, "jitter"),
                                         ({"jitter": 0.3, "resize": 2}, "jitter"), ({"resize": 1e-300}, "resize"),
                                         ({"resize": 1e-7}, "resize"), ({"resize": 1e9}, "resize")])
def test_augment_values_that_cannot_work_are_refused(values, key):
    with pytest.raises(ValueError, match=f"augmentation {key}="):
        augment_config({"pipeline": "darknet", **values})


@pytest.mark.parametrize("values", [{"jitter": 0.49}, {"jitter": 0.3, "resize": 1.5}, {"resize": 1e-5},
                                    {"resize": 100}, {"pipeline": "darknet_opencv", "jitter": 2}])
def test_augment_values_darknet_can_draw_from_are_accepted(values):
    augment_config({"pipeline": "darknet", **values})
