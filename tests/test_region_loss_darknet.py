"""The [region] (YOLOv2) training loss against Darknet itself: ``-N * d(loss)/d(head input)`` must equal the
``delta`` Darknet's region layer computes (src/region_layer.c), on real coco128 images and labels, with the head
fed Darknet's own head input. Both sides of Darknet's ``seen < 12800`` prior term are checked (the seen count
reaches Darknet through the weights file's header)."""
import random

import numpy as np
import pytest
import torch

from cfg_snippets import SMALL_BACKBONE
from darknet_parity import assert_deltas_equal, coco_batch, crowded_truths, head_deltas, sgd_losses, write_weights
from helpers import randomize_model
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.model import Darknet
from yolo.losses.region_loss import PRIOR_IMAGES, region_loss


def region_parity(darknet, tmp_path, cfg, x, truths, targets, header_seen: int, seed: int = 0):
    model = Darknet(cfg)
    randomize_model(model, seed)
    weights = write_weights(model, tmp_path / f"region-{seed}-{header_seen}.weights", header_seen)
    seen = header_seen + x.shape[0]  # Darknet adds the batch to seen before the forward pass

    def loss_fn(head, out, t, keep, hw):
        return region_loss(head, out, t, keep, hw, seen=seen)

    return head_deltas(darknet, cfg, model, weights, x, truths, targets, loss_fn)


# --------------------------------------------------------------------------------------------------- tests
@pytest.mark.slow
@pytest.mark.parametrize("name, header_seen", [("yolov2-voc.cfg", 0), ("yolov2-tiny-voc.cfg", PRIOR_IMAGES)])
def test_region_delta_equals_darknet(darknet, assets, tmp_path, name, header_seen):
    from darknet_ref import darknet_source

    cfg = darknet_source() / "cfg" / name
    x, truths, targets = coco_batch(assets, 2, (192, 192), 20, start=4 if header_seen else 0)
    pairs = region_parity(darknet, tmp_path, cfg, x, truths, targets, header_seen)
    assert_deltas_equal(pairs, f"{name} seen={header_seen}")


@pytest.mark.slow
def test_crowded_truths_delta_equals_darknet(darknet, assets, tmp_path):
    """Truths sharing a slot (the last one sets all of its terms), an image without truths, and many truths."""
    from darknet_ref import darknet_source

    cfg = darknet_source() / "cfg" / "yolov2-tiny-voc.cfg"
    x = coco_batch(assets, 3, (192, 192), 20)[0]
    truths, targets = crowded_truths(1, 3, 20, 24, (192, 192))
    pairs = region_parity(darknet, tmp_path, cfg, x, truths, targets, 0)
    assert_deltas_equal(pairs, "yolov2-tiny-voc.cfg, crowded truths")


@pytest.mark.slow
def test_prior_term_switches_off_at_12800(darknet, assets, tmp_path):
    """The seen threshold itself: just below it the prior term is on, at it off (Darknet's '<')."""
    from darknet_ref import darknet_source

    cfg = darknet_source() / "cfg" / "yolov2-tiny-voc.cfg"
    x, truths, targets = coco_batch(assets, 1, (160, 160), 20, start=9)
    below = region_parity(darknet, tmp_path, cfg, x, truths, targets, PRIOR_IMAGES - 2)  # seen 12799
    at = region_parity(darknet, tmp_path, cfg, x, truths, targets, PRIOR_IMAGES - 1)  # seen 12800
    assert_deltas_equal(below, "seen 12799")
    assert_deltas_equal(at, "seen 12800")
    assert np.abs(below[0][1] - at[0][1]).max() > 0, "Darknet's prior term did not change the delta"


def random_region_cfg(rng: random.Random, classes: int = 0) -> str:
    """A small random [region] network: two convs and a maxpool, then the head with random options."""
    classes, num = classes or rng.randint(1, 6), rng.randint(1, 5)
    anchors = ", ".join(f"{rng.uniform(0.3, 6.0):.3f},{rng.uniform(0.3, 6.0):.3f}" for _ in range(num))
    softmax = rng.randint(0, 1)
    options = {
        "anchors": anchors, "classes": classes, "num": num, "coords": 4, "softmax": softmax,
        "rescore": rng.randint(0, 1), "bias_match": rng.randint(0, 1), "thresh": round(rng.uniform(0.2, 0.8), 3),
        "object_scale": round(rng.uniform(0.5, 5), 3), "noobject_scale": round(rng.uniform(0.2, 2), 3),
        "class_scale": round(rng.uniform(0.5, 2), 3), "coord_scale": round(rng.uniform(0.5, 2), 3),
        "absolute": rng.randint(0, 1), "classfix": rng.choice([0, 0, -1, 1, 2]),
        "focal_loss": rng.randint(0, 1) if softmax else 0, "jitter": 0.2, "random": 0,
    }
    head = "\n".join(f"{k}={v}" for k, v in options.items())
    return f"""[net]
batch=1
width=96
height=96
channels=3

{SMALL_BACKBONE}
[convolutional]
filters={(classes + 5) * num}
size=1
stride=1
pad=1
activation=linear

[region]
{head}
"""


# Seeds chosen to cover the ignore threshold, focal_loss, softmax=0 and classfix -1, 1 and 2.
@pytest.mark.parametrize("seed", [1, 2, 4, 8, 11])
def test_random_region_options_equal_darknet(darknet, assets, tmp_path, seed):
    rng = random.Random(seed)
    text = random_region_cfg(rng)
    cfg = tmp_path / f"region-{seed}.cfg"
    cfg.write_text(text)
    classes = int(text.split("classes=")[1].split()[0])
    x, truths, targets = coco_batch(assets, 2, (96, 128), classes, start=10 * seed)
    pairs = region_parity(darknet, tmp_path, cfg, x, truths, targets, rng.choice([0, PRIOR_IMAGES]), seed)
    assert_deltas_equal(pairs, f"seed {seed}:\n{text}")


def test_yolo_loss_trains_region_head_and_reads_seen(assets):
    """Through YoloLoss (the trainer's path): finite, and the prior term follows its images_seen argument."""
    model = Darknet(assets("cfg/yolov2-tiny-voc.cfg"))
    randomize_model(model, 0)
    model.train()
    x, _, targets = coco_batch(assets, 2, (160, 160), 20)
    criterion = YoloLoss(model)
    outputs = model(torch.from_numpy(x))
    early, _ = criterion(outputs, targets, (160, 160), images_seen=2)
    late, parts = criterion(outputs, targets, (160, 160), images_seen=PRIOR_IMAGES)
    assert torch.isfinite(early) and torch.isfinite(late) and parts["num_targets"] > 0
    assert early > late  # the prior term adds a non-negative box term while seen < 12800


def test_region_training_refuses_hierarchical_softmax(tmp_path):
    text = random_region_cfg(random.Random(0)).replace("[region]\n", "[region]\ntree=data/9k.tree\n")
    cfg = tmp_path / "tree.cfg"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=r"tree\.cfg:\d+: \[region\].* tree=data/9k.tree"):
        YoloLoss(Darknet(cfg))  # refused by the builder or, at the latest, by the loss


def test_training_steps_lower_the_region_loss(assets, tmp_path):
    cfg = tmp_path / "tiny-region.cfg"
    cfg.write_text(random_region_cfg(random.Random(2)))
    model = Darknet(cfg)
    randomize_model(model, 0)
    x, _, targets = coco_batch(assets, 2, (96, 96), model.num_classes)
    losses = sgd_losses(model, x, targets)
    assert np.isfinite(losses).all() and losses[-1] < 0.8 * losses[0], losses


@pytest.mark.slow
def test_trainer_trains_a_region_cfg_and_tells_it_the_images_seen(tmp_path, monkeypatch):
    """One epoch of the real trainer on a tiny [region] cfg: it runs, stays finite, and the head was told how
    many images training had seen (all 16: one process, two updates of 8)."""
    import yaml

    from yolo.data import SHAPE_NAMES, ensure_shapes_dataset
    from yolo.engine import TrainOptions, Trainer

    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    root = ensure_shapes_dataset(tmp_path / "data", num_train=16, num_val=4, seed=3, size_range=(96, 128),
                                 max_shapes=3)
    data = tmp_path / "data.yaml"
    data.write_text(yaml.safe_dump({"path": str(root), "train": "images/train", "val": "images/val",
                                    "names": list(SHAPE_NAMES)}))
    cfg = tmp_path / "region.cfg"
    cfg.write_text(random_region_cfg(random.Random(2), classes=len(SHAPE_NAMES)))
    options = TrainOptions(cfg=str(cfg), data=str(data), device="cpu", project=str(tmp_path), name="run",
                           progress=False, img_size=96, epochs=1,
                           hyp={"workers": 0, "tensorboard": False, "plots": False, "eval_interval": 100,
                                "batch": 8, "subdivisions": 1})
    trainer = Trainer.from_options(options)
    criterion, seen = trainer.parts.criterion, []

    def recorded(outputs, targets, size_hw, images_seen):
        seen.append(images_seen)
        return criterion(outputs, targets, size_hw, images_seen=images_seen)

    trainer.parts.criterion = recorded
    trainer.fit()
    head = trainer.parts.model.yolo_layers[0]
    assert isinstance(head.train_opts.coord_scale, float) and seen == [8, 16]


@pytest.mark.parametrize("seed", [2, 4])  # softmax=1, softmax=0
def test_region_eval_rows_equal_darknet_output(darknet, tmp_path, seed):
    """Objectness and class scores equal Darknet's region output (softmax, or the raw values without it); boxes
    equal Darknet's get_region_box on its (raw) coordinate outputs."""
    cfg = tmp_path / "region.cfg"
    cfg.write_text(random_region_cfg(random.Random(seed)))
    model = Darknet(cfg)
    randomize_model(model, seed)
    model.eval()
    weights = write_weights(model, tmp_path / "w.weights", 0)
    x = np.random.RandomState(seed).rand(2, 3, 96, 128).astype(np.float32)
    dump = darknet.forward(cfg, weights, x)
    head = model.yolo_layers[0]
    a, k = head.num_anchors, head.num_classes + 5
    meta = dump.layers[-1]
    h, w = meta.out_h, meta.out_w
    # Darknet's CPU region output is laid out (cell, anchor, entry).
    ref = dump.out(len(model.module_list) - 1).reshape(2, h, w, a, k).transpose(0, 3, 1, 2, 4)
    with torch.no_grad():
        ours = model(torch.from_numpy(x)).reshape(2, a, h, w, k).numpy()
    np.testing.assert_allclose(ours[..., 4:], ref[..., 4:], rtol=1e-5, atol=1e-6)
    cells = head.anchors_cells.numpy()
    sig = 1 / (1 + np.exp(-ref[..., :2]))
    cx = (np.arange(w)[None, None, None, :] + sig[..., 0]) / w * 128
    cy = (np.arange(h)[None, None, :, None] + sig[..., 1]) / h * 96
    bw = np.exp(ref[..., 2]) * cells[None, :, None, None, 0] / w * 128
    bh = np.exp(ref[..., 3]) * cells[None, :, None, None, 1] / h * 96
    np.testing.assert_allclose(ours[..., :4], np.stack([cx, cy, bw, bh], -1), rtol=1e-5, atol=1e-3)
