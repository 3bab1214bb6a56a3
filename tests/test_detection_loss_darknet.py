"""The [detection] (YOLOv1) training loss against Darknet itself: ``-d(loss)/d(head input)``, for the loss summed
over the batch, must equal the ``delta`` of Darknet's detection layer (src/detection_layer.c) within 1e-5 of its
largest value, with the head fed Darknet's own head input and Darknet given the per-cell truth grid that our
loss builds (``fill_truth_region``'s layout, checked separately against a plain transcription of it)."""
import numpy as np
import pytest
import torch

from cfg_snippets import CONV8_MAXPOOL, net_section
from darknet_parity import coco_batch, write_model
from training_helpers import write_data
from yolo.data import SHAPE_NAMES, ensure_shapes_dataset
from yolo.errors import CfgError
from yolo.losses.detection_loss import darknet_truth_grid, detection_loss
from yolo.losses.yolo_loss import YoloLoss, usable_targets

TOLERANCE = 1e-5  # relative to the largest |delta|


def detection_parity(darknet, assets, tmp_path, text: str, size: int, count: int = 2, start: int = 0, seed: int = 0):
    """(ours, Darknet's) delta of the [detection] layer, Float[N, K] each, on ``count`` coco128 images."""
    cfg, weights, model = write_model(tmp_path, text, size, seed)
    head = model.yolo_layers[0]
    x, _, targets = coco_batch(assets, count, (size, size), head.num_classes, start=start)
    hw = (size, size)
    keep = usable_targets(targets, count, hw, head.num_classes)
    grid = darknet_truth_grid(targets, keep, count, head.side, head.num_classes, hw)
    dump = darknet.train(cfg, weights, x, [g.flatten().numpy() for g in grid])
    index = len(model.module_list) - 1
    head_input = torch.from_numpy(dump.out(index - 1).reshape(count, -1).copy()).requires_grad_()
    head.train()
    box, obj, cls, num = detection_loss(head, head(head_input, hw), targets, keep, hw)
    (box + obj + cls).backward()
    assert num > 0
    return -head_input.grad.numpy(), dump.delta(index).reshape(count, -1)


def assert_equal_delta(ours, ref, what: str) -> float:
    scale = np.abs(ref).max()
    assert scale > 0, f"{what}: Darknet's delta is all zero"
    err = float(np.abs(ours - ref).max() / scale)
    print(f"{what}: largest deviation from Darknet's delta {err:.2e} of max |delta| {scale:.3g}")
    assert err < TOLERANCE, f"{what}: delta differs by {err:.2e} of max |delta| {scale:.3g}"
    return err


def v1_text(size: int, side: int, num: int, classes: int, **options) -> str:
    """A small YOLOv1-style cfg: conv, maxpool, [connected] (linear, as Darknet's), [detection] with ``options``."""
    k = side * side * (5 * num + classes)
    extra = "".join(f"{key}={value}\n" for key, value in options.items())
    return (net_section(size, size) + "\n" + CONV8_MAXPOOL + "\n"
            f"[connected]\noutput={k}\nactivation=linear\n\n"
            f"[detection]\nclasses={classes}\ncoords=4\nside={side}\nnum={num}\n{extra}")


@pytest.mark.slow
def test_tiny_yolo_v1_delta_equals_darknet(darknet, assets, tmp_path):
    """Darknet's cfg/yolov1/tiny-yolo.cfg (rescore, sqrt, no softmax, coord_scale 5, noobject_scale .5) at 64x64."""
    from darknet_ref import darknet_source, set_net_options

    text = set_net_options((darknet_source() / "cfg" / "yolov1" / "tiny-yolo.cfg").read_text(), width=64, height=64)
    ours, ref = detection_parity(darknet, assets, tmp_path, text, 64, count=2, start=0)
    assert_equal_delta(ours, ref, "tiny-yolo.cfg")


OPTION_SETS = {
    "softmax-sqrt-rescore": dict(side=4, num=2, classes=3, softmax=1, sqrt=1, rescore=1, coord_scale=5,
                                 noobject_scale=0.5, object_scale=2, class_scale=1.5),
    "plain": dict(side=3, num=3, classes=4, softmax=0, sqrt=0, rescore=0),
    "forced-softmax": dict(side=5, num=2, classes=2, softmax=1, sqrt=1, rescore=1, forced=1, coord_scale=3),
    "one-box": dict(side=4, num=1, classes=5, softmax=1, sqrt=0, rescore=1, class_scale=2, noobject_scale=0.25),
}


@pytest.mark.parametrize("name", sorted(OPTION_SETS))
def test_detection_options_delta_equals_darknet(darknet, assets, tmp_path, name):
    options = dict(OPTION_SETS[name])
    side, num, classes = options.pop("side"), options.pop("num"), options.pop("classes")
    ours, ref = detection_parity(darknet, assets, tmp_path, v1_text(48, side, num, classes, **options), 48, count=3,
                                 start=5 * len(name) % 60, seed=len(name))
    assert_equal_delta(ours, ref, name)


def fill_truth_region(boxes, side: int, classes: int) -> np.ndarray:
    """Plain transcription of Darknet's fill_truth_region on one image's rows (x, y, w, h, class), normalized."""
    truth = np.zeros(side * side * (5 + classes), np.float32)
    for x, y, w, h, cls in np.asarray(boxes, np.float32):
        if w < .001 or h < .001:
            continue
        col, row = int(x * side), int(y * side)
        x, y = x * side - col, y * side - row
        index = (col + row * side) * (5 + classes)
        if truth[index]:
            continue
        truth[index] = 1
        if cls < classes:
            truth[index + 1 + int(cls)] = 1
        truth[index + 1 + classes:index + 5 + classes] = (x, y, w, h)
    return truth


def test_truth_grid_is_fill_truth_region(assets):
    side, classes, size = 7, 20, 64
    x, truths, targets = coco_batch(assets, 6, (size, size), classes)
    targets = torch.cat([targets, torch.tensor([[0, 1, 10.0, 10.0, 0.03, 5.0]])])  # under 0.001 wide: dropped
    truths[0] = np.concatenate([truths[0], [[10 / size, 10 / size, 0.03 / size, 5 / size, 1]]])
    keep = usable_targets(targets, 6, (size, size), classes)
    grid = darknet_truth_grid(targets, keep, 6, side, classes, (size, size)).numpy()
    for image in range(6):
        expected = fill_truth_region(truths[image][:, [0, 1, 2, 3, 4]], side, classes)
        np.testing.assert_allclose(grid[image].flatten(), expected, atol=1e-6)
    assert sum(len(t) for t in truths) > grid[..., 0].sum() > 0  # some cells hold several boxes: the first wins


def test_training_refuses_random_and_forced_with_one_box(tmp_path):
    """Options Darknet reads but the loss does not reproduce stop training at its start, naming the cfg line."""
    from yolo.models.cfg_options import check_training_options
    from yolo.models.model import Darknet

    for options, message in ((dict(random=1), r"\[detection\] option 'random=1' is not implemented for training"),):
        cfg = tmp_path / "r.cfg"
        cfg.write_text(v1_text(48, 3, 2, 2, **options))
        model = Darknet(cfg)
        with pytest.raises(CfgError, match=message) as info:
            check_training_options([s for s in model.sections if s.type in ("net", "detection")])
        assert "r.cfg:" in str(info.value)
        with pytest.raises(ValueError, match=r"r.cfg:\d+: \[detection\] random=1"):
            YoloLoss(model)
    cfg = tmp_path / "f.cfg"
    cfg.write_text(v1_text(48, 3, 1, 2, forced=1))
    with pytest.raises(ValueError, match=r"f.cfg:\d+: \[detection\] forced=1 with num=1"):
        YoloLoss(Darknet(cfg))


@pytest.mark.slow
def test_trainer_trains_a_yolov1_cfg(tmp_path, monkeypatch):
    """The trainer takes a YOLOv1 cfg (its [detection] options checked, the loss from the dispatch): on a few
    shapes images the loss falls, the run is evaluated, and the checkpoint detects at the cfg's size."""
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.model import load_model

    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    root = ensure_shapes_dataset(tmp_path / "data", num_train=16, num_val=4, seed=3, size_range=(96, 128),
                                 max_shapes=3)
    data = write_data(tmp_path, root, val="images/train")
    cfg = tmp_path / "v1.cfg"
    text = v1_text(96, 3, 2, len(SHAPE_NAMES), softmax=1, sqrt=1, rescore=1, coord_scale=5, noobject_scale=0.5)
    # A logistic [connected] keeps this short run stable (a linear one, as Darknet's YOLOv1, needs a burn-in).
    text = text.replace("[net]\n", "[net]\nbatch=8\nsubdivisions=1\nlearning_rate=0.001\nburn_in=0\n")
    cfg.write_text(text.replace("activation=linear", "activation=logistic"))
    options = TrainOptions(cfg=str(cfg), data=str(data), device="cpu", project=str(tmp_path), name="v1",
                           progress=False, epochs=6,
                           hyp={"workers": 0, "tensorboard": False, "plots": False, "eval_interval": 6,
                                "head_prior": True, "conf_thres": 0.01,
                                "augment": {"jitter": 0.0, "hue": 0.0, "saturation": 1.0, "exposure": 1.0,
                                            "flip": 0.0}})
    result = Trainer.from_options(options).fit()
    import csv

    with open(result.run_dir / "results.csv", newline="") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert losses[-1] < 0.7 * losses[0], losses
    assert 0.0 <= result.metrics["mAP50"] <= 1.0
    model = load_model(weights=result.run_dir / "last.pt").eval()
    assert model(torch.rand(1, 3, 96, 96)).shape == (1, 3 * 3 * 2, 5 + len(SHAPE_NAMES))
