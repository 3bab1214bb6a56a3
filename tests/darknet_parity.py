"""What the loss-against-Darknet tests share: coco128 inputs for a head, a model's ``.weights`` with a chosen ``seen``,
a small YOLOv1 model with trained-like outputs,
each head's delta from us and from Darknet (tests/darknet_ref), their comparison, and a few SGD steps."""
from pathlib import Path

import cv2
import numpy as np
import torch

from reference import randomize_model
from yolo.losses.targets import usable_targets
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.model import Darknet
from yolo.models.weights import DarknetHeader, save_darknet_weights

TOLERANCE = 1e-5  # relative to the largest |delta|


def coco_batch(assets, count: int, size_hw, num_classes: int, start: int = 0):
    """``count`` coco128 images stretched to ``size_hw``: (x Float[N, 3, H, W] RGB 0..1, Darknet truth rows per
    image (x, y, w, h, class) normalized, our targets Float[M, 6] in input pixels). Class ids are taken
    modulo ``num_classes`` so that every label takes part."""
    folder = Path(assets("coco128/images/train2017"))
    labels = Path(assets("coco128/labels/train2017"))
    height, width = size_hw
    images, truths, targets = [], [], []
    for k, path in enumerate(sorted(folder.glob("*.jpg"))[start:start + count]):
        bgr = cv2.imread(str(path))
        rgb = cv2.resize(bgr, (width, height), interpolation=cv2.INTER_LINEAR)[:, :, ::-1]
        images.append(rgb.transpose(2, 0, 1).astype(np.float32) / 255.0)
        label = labels / f"{path.stem}.txt"  # background images have no label file
        rows = np.loadtxt(label, ndmin=2, dtype=np.float32) if label.exists() else np.zeros((0, 5), np.float32)
        cls = rows[:, 0] % num_classes
        truths.append(np.concatenate([rows[:, 1:5], cls[:, None]], 1))
        for c, (x, y, w, h) in zip(cls, rows[:, 1:5]):
            targets.append([k, c, x * width, y * height, w * width, h * height])
    return np.stack(images), truths, torch.tensor(targets, dtype=torch.float32)


def write_weights(model, path: Path, seen: int) -> Path:
    save_darknet_weights(model, path, header=DarknetHeader(0, 2, 0, seen))
    return path


def write_model(tmp_path: Path, text: str, size: int, seed: int = 0):
    """(cfg, weights, model): ``text`` written out, a model with random weights and its ``.weights``."""
    cfg = tmp_path / "v1.cfg"
    cfg.write_text(text)
    model = Darknet(cfg)
    randomize_model(model, seed, calibrate_hw=(size, size))
    # A trained YOLOv1's [connected] outputs (confidences, class probabilities, box values) lie near 0..1;
    # random weights on a linear [connected] give thousands, and boxes wider than the image by 1000 times.
    g = torch.Generator().manual_seed(seed)
    linear = model.module_list[-2].linear
    with torch.no_grad():
        linear.weight.copy_(torch.randn(linear.weight.shape, generator=g))  # randomize_model leaves it as built
        linear.bias.zero_()
        outputs, _ = model.eval().layer_outputs(torch.rand(2, 3, size, size, generator=g))
        linear.weight.mul_(0.15 / (outputs[-2] - linear.bias[:, None, None]).std())
        linear.bias.copy_(0.2 + 0.3 * torch.rand(linear.bias.shape, generator=g))
    weights = tmp_path / "v1.weights"
    model.save_darknet_weights(weights)
    return cfg, weights, model.eval()


def head_deltas(darknet, cfg, model, weights, x, truths, targets, loss_fn):
    """For every head: (ours, Darknet's) delta, Float[N, C, H, W] each. ``loss_fn(head, out, targets, keep, hw)``
    returns the (box, obj, cls, count) terms summed over the batch."""
    dump = darknet.train(cfg, weights, x, truths)
    hw = x.shape[2:]
    pairs = []
    for i, module in enumerate(model.module_list):
        if module not in model.yolo_layers:
            continue
        head_input = torch.from_numpy(dump.out(i - 1).copy()).requires_grad_()
        module.train()
        out = module(head_input, hw)
        keep = usable_targets(targets, x.shape[0], hw, module.num_classes)
        box, obj, cls, count = loss_fn(module, out, targets, keep, hw)
        (box + obj + cls).backward()
        pairs.append((-head_input.grad.numpy(), dump.delta(i)))
    return pairs


def assert_deltas_equal(pairs, what: str) -> None:
    assert pairs, f"{what}: no head"
    for k, (ours, ref) in enumerate(pairs):
        assert ours.shape == ref.shape, (what, k, ours.shape, ref.shape)
        scale = np.abs(ref).max()
        assert scale > 0, f"{what}: head {k} has an all-zero Darknet delta"
        err = np.abs(ours - ref).max() / scale
        assert err < TOLERANCE, f"{what}: head {k} delta differs by {err:.2e} of max |delta| {scale:.3g}"


def sgd_losses(model, x, targets, steps: int = 8, lr: float = 1e-3):
    """Losses (per image, through YoloLoss) over ``steps`` plain SGD steps on one batch."""
    criterion = YoloLoss(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    model.train()
    images = torch.from_numpy(x)
    losses = []
    for _ in range(steps):
        loss, _ = criterion(model(images), targets, tuple(x.shape[2:]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
