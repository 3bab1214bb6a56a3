"""The [yolo] training loss against Darknet itself: our gradient is Darknet's ``delta``.

For each case Darknet runs ``train_network_datum`` on real coco128 images and their labels (tests/darknet_ref)
and dumps every [yolo] layer's input (``out(i - 1)``), its ``delta`` and its ``cost``. Our loss gets the very
same head input, so the comparison isolates the loss from the rest of the network.

Conversion (stated once, used everywhere): Darknet's ``delta`` is the *negative* gradient of a loss summed
over the batch, w.r.t. the [yolo] layer's input; our loss is per image (divided by the batch size ``N``).
The harness runs Darknet's CPU path, whose backward adds ``delta`` as it is; Darknet's CUDA path, which users
train with, adds ``loss_scale * delta_normalizer * delta`` (src/yolo_layer.c ``backward_yolo_layer_gpu``),
and ``loss_scale`` is undone in the update (it only guards half-precision gradients). We follow CUDA:

    -N * d(our loss) / d(head input) == delta_normalizer * delta (Darknet CPU dump)

within 1e-5 of the largest |delta| of the head. The values: the head's ``cost`` is Darknet's (show_details=1):
``sum(delta^2)`` for iou_loss=mse, else ``iou_normalizer * sum(1 - IoU) / count + obj_normalizer * sum of the
squared non-box deltas``; ``yolo_head_loss`` returns those terms summed over the batch.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest
import torch

from conftest import darknet_file
from darknet_parity import COCO_PAIRS, coco_images_area_resized, crowded_truths, targets_px
from helpers import randomize_model
from yolo.losses.targets import usable_targets
from yolo.losses.yolo_head_loss import yolo_head_loss
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.model import Darknet

TOLERANCE = 1e-5


# ------------------------------------------------------------------------------------------------ inputs
def random_weights(model: Darknet, path: Path, seed: int, calibrate_hw: Tuple[int, int]) -> Path:
    """Random weights (tests/reference.py) written as a Darknet file, so that Darknet runs the same network."""
    randomize_model(model, seed, calibrate_hw=calibrate_hw)
    model.save_darknet_weights(path)
    return path


# ----------------------------------------------------------------------------------------- the comparison
def compare_with_darknet(darknet, cfg: Path, weights: Path, model: Darknet, x: np.ndarray,
                         truths: List[np.ndarray]) -> List[str]:
    """Runs Darknet and our loss on its head inputs; returns one line per head (empty when all agree)."""
    hw = (x.shape[2], x.shape[3])
    dump = darknet.train(cfg, weights, x, truths)
    metas = [m for m in dump.layers if m.type == "yolo"]
    heads = list(model.yolo_layers)
    assert len(metas) == len(heads) > 0
    outs = []
    for meta, head in zip(metas, heads):
        inp = torch.from_numpy(dump.out(meta.index - 1).copy())
        n, _, gh, gw = inp.shape
        view = inp.view(n, head.num_anchors, head.num_classes + 5, gh, gw).permute(0, 1, 3, 4, 2)
        outs.append(view.contiguous().requires_grad_(True))
    targets = targets_px(truths, hw)
    loss, _ = YoloLoss(model)(outs, targets, hw)
    loss.backward()
    keep = usable_targets(targets, x.shape[0], hw, heads[0].num_classes)
    failures = []
    for meta, head, out in zip(metas, heads, outs):
        n, _, gh, gw = dump.delta(meta.index).shape
        delta = torch.from_numpy(dump.delta(meta.index).copy())
        delta = delta.view(n, head.num_anchors, head.num_classes + 5, gh, gw).permute(0, 1, 3, 4, 2)
        expected = delta * head.opts.delta_normalizer
        ours = -n * out.grad
        largest = float(expected.abs().max())
        assert largest > 0, f"layer {meta.index}: Darknet's delta is all zero (nothing to compare)"
        err = (ours - expected).abs()
        worst = {name: float(err[..., sl].max()) / largest
                 for name, sl in (("xy", slice(0, 2)), ("wh", slice(2, 4)), ("obj", slice(4, 5)), ("cls", slice(5, None)))}
        if max(worst.values()) > TOLERANCE:
            failures.append(f"layer {meta.index}: error / max|delta| by entry {worst}")
        # Values: Darknet's cost of the layer.
        with torch.no_grad():
            box, obj, cls, count = yolo_head_loss(head, out.detach(), targets, keep, hw)
        if str(head.opts.iou_loss) == "mse":
            cost = float(box + obj + cls)
        else:
            cost = float(box) / max(count, 1) + float(obj + cls)
        if abs(cost - meta.cost) > 1e-4 * max(1.0, abs(meta.cost)):
            failures.append(f"layer {meta.index}: cost {cost:.6g}, Darknet {meta.cost:.6g}")
    return failures


# -------------------------------------------------------------------------------------- official cfgs
OFFICIAL = [  # cfg, input (h, w): small, because Darknet's training pass over the full network dominates
    ("yolov3.cfg", (64, 96)),
    ("yolov3.coco-giou-12.cfg", (64, 96)),
    ("yolov4.cfg", (64, 64)),
    ("yolov4-tiny.cfg", (128, 160)),
    ("yolov4-csp.cfg", (64, 64)),
    ("yolov7-tiny.cfg", (128, 160)),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,hw", OFFICIAL, ids=[c for c, _ in OFFICIAL])
def test_official_cfg_random_weights(darknet, assets, tmp_path, name, hw):
    cfg = darknet_file(f"cfg/{name}")
    model = Darknet(cfg)
    weights = random_weights(model, tmp_path / "random.weights", seed=0, calibrate_hw=hw)
    x, truths = coco_images_area_resized(assets, COCO_PAIRS[0], hw)
    failures = compare_with_darknet(darknet, cfg, weights, model, x, truths)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("pair", range(len(COCO_PAIRS)))
def test_yolov3_tiny_real_weights(darknet, assets, pair):
    cfg, weights = assets("cfg/yolov3-tiny.cfg"), assets("weights/yolov3-tiny.weights")
    model = Darknet(cfg)
    hw = [(160, 224), (224, 224), (256, 192), (192, 320)][pair]
    x, truths = coco_images_area_resized(assets, COCO_PAIRS[pair], hw)
    failures = compare_with_darknet(darknet, cfg, weights, model, x, truths)
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------------------- random cfgs
def random_yolo_options(rng: random.Random, classes: int) -> List[str]:
    """One [yolo] section's loss options, each drawn over the values Darknet's cfgs use (and a few more)."""
    new_coords = rng.random() < 0.4
    opts = {
        "iou_loss": rng.choice(["mse", "iou", "giou", "diou", "ciou"]),
        "iou_normalizer": rng.choice([0.05, 0.07, 0.1, 0.5, 0.75, 1.0]),
        "obj_normalizer": rng.choice([1.0, 0.4, 2.0, 4.0]),
        "cls_normalizer": rng.choice([1.0, 0.5, 0.3]),
        "delta_normalizer": rng.choice([1.0, 1.0, 0.5, 2.0]),
        "scale_x_y": rng.choice([1.0, 1.05, 1.1, 1.2, 2.0]),
        "new_coords": int(new_coords),
        "ignore_thresh": rng.choice([0.3, 0.5, 0.7]),
        "truth_thresh": rng.choice([1.0, 1.0, 0.3, 0.5]),
        "iou_thresh": rng.choice([1.0, 0.213, 0.2, 0.5]),
        "iou_thresh_kind": rng.choice(["iou", "giou", "diou", "ciou"]),
        "label_smooth_eps": rng.choice([0.0, 0.0, 0.1]),
        "objectness_smooth": rng.choice([0, 1]),
        "focal_loss": rng.choice([0, 0, 1]),
        "random": rng.choice([0, 1]),
        "resize": rng.choice([1.0, 1.5]),
    }
    if rng.random() < 0.5:
        # Darknet's cfgs use 2..40, which IoU deltas seldom reach; small values make the clip happen here.
        opts["max_delta"] = rng.choice([0.01, 0.03, 2, 5])
    if rng.random() < 0.4:
        opts["counters_per_class"] = ", ".join(str(rng.randint(1, 5000)) for _ in range(classes))
    return [f"{key}={value}" for key, value in opts.items()]


def random_cfg(seed: int, hw: Tuple[int, int]) -> Tuple[str, bool]:
    """A few convs and one or two [yolo] heads with random loss options; returns (cfg text, new_coords)."""
    rng = random.Random(seed)
    classes = 80  # coco128's labels
    anchors = "10,14, 23,27, 37,58, 81,82, 135,169, 344,319"
    two_heads = rng.random() < 0.6
    lines = ["[net]", f"height={hw[0]}", f"width={hw[1]}", "channels=3", "batch=2", "subdivisions=1"]

    def conv(filters, size=3, stride=1, act="leaky", bn=1):
        lines.extend(["", "[convolutional]", f"batch_normalize={bn}", f"filters={filters}", f"size={size}",
                      f"stride={stride}", "pad=1", f"activation={act}"])

    def head(mask, options):
        act = "logistic" if "new_coords=1" in options else "linear"
        conv((classes + 5) * len(mask), size=1, act=act, bn=0)
        lines.extend(["", "[yolo]", f"mask={','.join(map(str, mask))}", f"anchors={anchors}", f"classes={classes}",
                      "num=6", *options])

    for filters in (8, 16, 16, 32):
        conv(filters, stride=2)
    conv(32, stride=2)  # stride 32
    head([3, 4, 5], random_yolo_options(rng, classes))
    if two_heads:
        lines.extend(["", "[route]", "layers=-4"])  # stride 16 features
        conv(32)
        head([0, 1, 2], random_yolo_options(rng, classes))
    return "\n".join(lines) + "\n", any("new_coords=1" in line for line in lines)


def spread_head_biases(model: Darknet, seed: int) -> None:
    """Random objectness and class biases on the convs feeding the heads, so that some predictions have
    every class probability under 0.25 (Darknet's ignore test skips those) and others do not."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i, module in enumerate(model.module_list):
            if module in model.yolo_layers:
                conv = model.module_list[i - 1].conv
                k = module.num_classes + 5
                bias = conv.bias.view(module.num_anchors, k)
                bias[:, 4] += torch.randn(module.num_anchors, generator=g) * 1.5 - 1.0
                # Class logits near -4: with 80 classes only some predictions have one above 0.25.
                bias[:, 5:] += torch.randn(module.num_anchors, k - 5, generator=g) - 4.0


def random_model_files(seed: int, hw, folder):
    """:func:`random_cfg`'s cfg for ``seed`` written to ``folder``, its model with random weights and spread head
    biases, and those weights written for Darknet: ``(cfg text, cfg path, weights path, model)``."""
    text, _ = random_cfg(seed, hw)
    cfg = folder / f"random{seed}.cfg"
    cfg.write_text(text)
    model = Darknet(cfg)
    randomize_model(model, seed, calibrate_hw=hw)
    spread_head_biases(model, seed)
    weights = folder / "random.weights"
    model.save_darknet_weights(weights)  # after the bias change, so Darknet runs these very weights
    return text, cfg, weights, model


@pytest.mark.parametrize("seed", range(16))
def test_random_cfg_options(darknet, assets, tmp_path, seed):
    hw = [(96, 128), (128, 96), (128, 128), (64, 160)][seed % 4]
    text, cfg, weights, model = random_model_files(seed, hw, tmp_path)
    x, truths = coco_images_area_resized(assets, COCO_PAIRS[seed % len(COCO_PAIRS)], hw)
    failures = compare_with_darknet(darknet, cfg, weights, model, x, truths)
    assert not failures, f"options:\n{text[text.index('[yolo]'):]}\n" + "\n".join(failures)


@pytest.mark.parametrize("seed", range(4))
def test_crowded_truths_delta_equals_darknet(darknet, assets, tmp_path, seed):
    """The loss's bookkeeping against Darknet: 60 truths in one image, truths sharing a cell (Darknet's last
    writer sets the objectness delta, the classes unite, the box deltas add up), an image without truths, and
    truths whose best anchor lies in the other head's mask."""
    hw = (128, 128)
    text, cfg, weights, model = random_model_files(seed, hw, tmp_path)
    x, _ = coco_images_area_resized(assets, COCO_PAIRS[0] + COCO_PAIRS[1][:1], hw)
    truths, _ = crowded_truths(seed, 3, 80, 60, hw)
    failures = compare_with_darknet(darknet, cfg, weights, model, x, truths)
    assert not failures, f"options:\n{text[text.index('[yolo]'):]}\n" + "\n".join(failures)
