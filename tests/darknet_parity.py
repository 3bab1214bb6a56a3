"""What the Darknet-comparison tests share: coco128 inputs for a head (stretched, or fixed image pairs resized with
``INTER_AREA``) and Darknet's truth rows as our targets, truths crowded into few cells, a model's ``.weights`` with
a chosen ``seen``, a small YOLOv1 model with trained-like outputs, each head's delta from us and from Darknet
(tests/darknet_ref), their comparison, a few SGD steps, Darknet's own decode of each head
(tests/darknet_ref/head_boxes.c), and our learning-rate schedule read from cfg text."""
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import cv2
import numpy as np
import torch

from helpers import randomize_model
from yolo.engine.schedule import LRSchedule, read_net_schedule
from yolo.losses.targets import usable_targets
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.cfg import parse_cfg_text
from yolo.models.model import Darknet
from yolo.models.weights import DarknetHeader, save_darknet_weights

TOLERANCE = 1e-5  # relative to the largest |delta|

# Settings of Darknet's plain-build augmentation (yolo.data.darknet_augment) with every step on: jitter, zoom,
# mirror, hue, saturation and exposure.
AUGMENT_HYP = {"jitter": 0.3, "resize": 1.5, "letter_box": 0, "flip": 0.5, "hue": 0.1, "saturation": 1.5,
               "exposure": 1.5}

# Image pairs from coco128 (file stems); the first ones are used by the random-weights cases.
COCO_PAIRS = [("000000000009", "000000000025"), ("000000000030", "000000000034"),
              ("000000000036", "000000000042"), ("000000000049", "000000000061")]


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


def coco_images_area_resized(assets, stems: Sequence[str],
                             hw: Tuple[int, int]) -> Tuple[np.ndarray, List[np.ndarray]]:
    """The coco128 images ``stems`` resized to ``hw`` with ``INTER_AREA`` (RGB 0..1, NCHW) and, per image, Darknet
    truth rows (x, y, w, h, class)."""
    images, truths = [], []
    for stem in stems:
        bgr = cv2.imread(str(assets(f"coco128/images/train2017/{stem}.jpg")))
        rgb = cv2.resize(bgr, (hw[1], hw[0]), interpolation=cv2.INTER_AREA)[:, :, ::-1]
        images.append(rgb.transpose(2, 0, 1).astype(np.float32) / 255.0)
        labels = np.loadtxt(assets(f"coco128/labels/train2017/{stem}.txt"), ndmin=2).astype(np.float32)
        truths.append(np.concatenate([labels[:, 1:5], labels[:, :1]], 1))
    return np.stack(images), truths


def targets_px(truths: Sequence[np.ndarray], hw: Tuple[int, int]) -> torch.Tensor:
    """Darknet truth rows -> our targets Float[M, 6] (image, class, cx, cy, w, h in input pixels), in order."""
    h, w = hw
    rows = [[b, r[4], r[0] * w, r[1] * h, r[2] * w, r[3] * h] for b, t in enumerate(truths) for r in t]
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def crowded_truths(seed: int, count: int, num_classes: int, boxes: int,
                   hw: Tuple[int, int]) -> Tuple[List[np.ndarray], torch.Tensor]:
    """Truths that load the losses' bookkeeping, for ``count`` images: (Darknet truth rows per image, our targets
    Float[M, 6] in pixels of ``hw``). The first image has ``boxes`` random boxes, then the first two again with
    another class and 3/4 of their size (same cells, other anchors or the same ones) and the first once more
    exactly; the second image has none; the others have three boxes and their repeats. Values are multiples of
    1/1024, so that with power-of-two sides the pixels convert back to exactly Darknet's floats."""
    rng = np.random.RandomState(seed)
    truths = []
    for k in range(count):
        n = boxes if k == 0 else 0 if k == 1 else 3
        xy = rng.randint(8, 248, (n, 2)) / 256
        wh = rng.randint(4, 160, (n, 2)) / 256
        rows = np.concatenate([xy, wh, rng.randint(0, num_classes, (n, 1))], 1)
        if n:
            again = rows[:2].copy()
            again[:, 4] = (again[:, 4] + 1) % num_classes
            again[:, 2:4] *= 0.75
            rows = np.concatenate([rows, again, rows[:1]])
        truths.append(rows.astype(np.float32))
    return truths, targets_px(truths, hw)


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


HEAD_BOXES_C = Path(__file__).resolve().parent / "darknet_ref" / "head_boxes.c"


def head_boxes_program(darknet) -> Path:
    """tests/darknet_ref/head_boxes.c built once against the cached libdarknet."""
    program = darknet.workdir / "head_boxes"
    if not program.is_file():
        folder = darknet.folder
        cc = subprocess.run(["gcc", "-O2", "-o", str(program), str(HEAD_BOXES_C), f"-I{folder / 'include'}",
                             f"-I{folder / 'src'}", f"-L{folder}", "-ldarknet", f"-Wl,-rpath,{folder}", "-lm",
                             "-fopenmp"], capture_output=True, text=True)
        if cc.returncode != 0:
            raise RuntimeError(f"building head_boxes failed:\n{cc.stderr[-3000:]}")
    return program


def darknet_heads(darknet, cfg: Path, weights: Path = None, image: np.ndarray = None,
                  thresh: float = 0.0) -> Tuple[List[Dict], Dict[int, np.ndarray]]:
    """Darknet's heads of ``cfg``: ``[{"index", "type", "n", "total", "anchors", "mask"}]`` and, with ``image``
    (Float[C, H, W] RGB 0..1 at the network size), per head layer index Float64[K, 9 + C] detection rows
    ``x, y, w, h (relative), objectness, 4 uncertainties, C thresholded class scores`` in Darknet's order."""
    args = [str(head_boxes_program(darknet)), str(cfg), str(weights or "-"), "-", str(thresh)]
    if image is not None:
        args[3] = str(darknet.workdir / "head_boxes_input.f32")
        np.ascontiguousarray(image, dtype=np.float32).tofile(args[3])
    run = subprocess.run(args, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"Darknet head_boxes failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    heads, dets = [], {}
    for line in run.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "head":
            heads.append({"index": int(parts[1]), "type": parts[2], "n": int(parts[3]), "total": int(parts[4]),
                          "anchors": [], "mask": []})
        elif parts[0] == "anchors":
            heads[-1]["anchors"] = [float(v) for v in parts[1:]]
        elif parts[0] == "mask":
            heads[-1]["mask"] = [int(v) for v in parts[1:]]
        elif parts[0] == "det":
            dets.setdefault(int(parts[1]), []).append([float(v) for v in parts[2:]])
    return heads, {i: np.array(rows, dtype=np.float64) for i, rows in dets.items()}


def ours_from_cfg(cfg_text: str) -> LRSchedule:
    """Our learning-rate schedule from the [net] section of ``cfg_text`` (to compare with Darknet's rates)."""
    net = parse_cfg_text(cfg_text, "rate.cfg")[0]
    return LRSchedule(**read_net_schedule(net))
