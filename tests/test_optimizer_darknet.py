"""Our optimizer step equals Darknet's: the same weights after one and two updates, checked through the harness.

Darknet (tests/darknet_ref, ``updates`` mode) trains a small cfg on real coco128 images for one or two iterations:
per iteration ``train_network_datum`` on each sub-batch, then ``update_network``. We take the same starting
weights (random, written by our writer), run our forward and backward, and update with the trainer's own
optimizer code (:func:`yolo.engine.optimizer.optimizer_from_hyp` and ``StepRunner._optimizer_step``).

To test the optimizer and the convolution backward apart from the loss, Darknet's ``[yolo]`` delta is injected
as the gradient at the head's input. Darknet's delta is the negative gradient of its loss summed over the images;
our trainer's loss is per image and each mini-batch's loss is divided by ``subdivisions``, so the gradient of
mini-batch ``s`` is ``-delta_s / batch`` with ``batch`` the images of a whole update (mini-batch x subdivisions).
"""
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from helpers import cpu_step_runner, randomize_model
from yolo import load_model
from yolo.engine.config import resolve_hyp
from yolo.engine.schedule import schedule_from_hyp
from yolo.engine.optimizer import optimizer_from_hyp
from yolo.engine.update_step import StepRunner
from yolo.losses.yolo_loss import YoloLoss

SIZE = 64
# No BatchNorm: the update of conv weights and biases (BatchNorm has its own test below). The decay is 100 times
# the usual so that its term, and its absence on biases, shows well above float32 noise.
CFG = """
[net]
batch={batch}
subdivisions={subdivisions}
width=64
height=64
channels=3
momentum=0.9
decay=0.05
learning_rate=0.02
burn_in=2
policy=steps
steps=100
scales=.1
max_batches=200

[convolutional]
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
filters=16
size=3
stride=2
pad=1
activation=leaky
learning_rate=0.5

[convolutional]
filters=16
size=3
stride=2
pad=1
activation=leaky

[convolutional]
filters=255
size=1
stride=1
pad=1
activation=linear

[yolo]
mask=0,1,2
anchors=10,14, 23,27, 37,58
classes=80
num=3
jitter=0
ignore_thresh=.7
truth_thresh=1
random=0
"""



def our_update(model, hyp, schedule) -> StepRunner:
    """The trainer's step runner for ``model`` with Darknet's optimizer of ``hyp``: its ``_optimizer_step`` is our
    update (the learning rate of the next update number, held gradients, clipping, the step)."""
    return cpu_step_runner(model, optimizer_from_hyp(model, hyp), schedule, hyp=hyp)

def coco128_batch(assets, n: int):
    """``n`` coco128 images stretched to SIZE x SIZE (Float[n, 3, SIZE, SIZE], RGB 0..1) and their labels as
    Darknet truths (rows x, y, w, h, class; normalized centre boxes, unchanged by a plain resize)."""
    root = assets("coco128/images/train2017")
    labels = assets("coco128/labels/train2017")
    images, truths = [], []
    for path in sorted(root.glob("*.jpg"))[:n]:
        bgr = cv2.imread(str(path))
        rgb = cv2.resize(bgr, (SIZE, SIZE), interpolation=cv2.INTER_AREA)[:, :, ::-1]
        images.append(rgb.transpose(2, 0, 1).astype(np.float32) / 255.0)
        rows = np.loadtxt(labels / (path.stem + ".txt"), dtype=np.float32, ndmin=2)
        truths.append(rows[:, [1, 2, 3, 4, 0]])
    return np.stack(images), truths


def our_updates(cfg_path: Path, weights: Path, x: np.ndarray, dumps, subdivisions: int):
    """Our weights after ``len(dumps)`` updates, with Darknet's head deltas injected; also checks that our
    forward saw what Darknet's did (the same weights at every round)."""
    model = load_model(cfg_path, weights).train()
    hyp = resolve_hyp(model.net, [s for s in model.sections if s.type == "yolo"], {"ema": False}, {})
    batch = hyp["batch"]
    trainer = our_update(model, hyp, schedule_from_hyp(hyp, hyp["max_batches"]))
    heads = [i for i, s in enumerate(model.sections[1:]) if s.type == "yolo"]
    mini = x.shape[0] // subdivisions
    rates = []
    for round_dumps in dumps:
        for s, dump in enumerate(round_dumps):
            outputs, _ = model.layer_outputs(torch.from_numpy(x[s * mini:(s + 1) * mini]))
            for i in heads:
                np.testing.assert_allclose(outputs[i].detach().numpy(), dump.out(i - 1), rtol=0,
                                           atol=2e-5 * np.abs(dump.out(i - 1)).max())
            grads = [torch.from_numpy(-dump.delta(i) / batch) for i in heads]
            torch.autograd.backward([outputs[i] for i in heads], grads)
        trainer._optimizer_step()
        rates.append(trainer.state.lr)
    return model, rates


def assert_same_weights(ours, theirs, start):
    """Every parameter within 1e-5 of Darknet's (relative to the tensor's scale), and so is its change."""
    checked = 0
    for (name, p), q, p0 in zip(ours.named_parameters(), theirs.parameters(), start.parameters()):
        a, b, a0 = p.detach().numpy(), q.detach().numpy(), p0.detach().numpy()
        change = np.abs(b - a0).max()
        assert change > 0, f"{name}: Darknet did not change it"
        err = np.abs(a - b).max()
        assert err <= 1e-5 * np.abs(b).max(), f"{name}: max error {err:.3g}, scale {np.abs(b).max():.3g}"
        # The change itself, so that a small rate cannot hide a wrong gradient.
        assert err <= 1e-4 * change, f"{name}: max error {err:.3g} against a change of {change:.3g}"
        checked += 1
    assert checked == 8  # four convs, weights and biases


@pytest.mark.parametrize("subdivisions,rounds", [(1, 1), (2, 1), (2, 2)])
def test_updates_equal_darknets_with_injected_head_delta(darknet, assets, tmp_path, subdivisions, rounds):
    x, truths = coco128_batch(assets, 4)
    cfg = tmp_path / "net.cfg"
    cfg.write_text(CFG.format(batch=4, subdivisions=subdivisions))
    start = load_model(cfg)
    randomize_model(start, seed=3, calibrate_hw=(SIZE, SIZE))
    weights = tmp_path / "start.weights"
    start.save_darknet_weights(weights)

    rates, dumps, final = darknet.updates(cfg, weights, x, truths, rounds=rounds, subdivisions=subdivisions)
    assert rates == pytest.approx([0.02 * 0.5 ** 4, 0.02][:rounds], rel=1e-6)  # burn_in=2: (1/2)^4, then 1
    assert all(np.abs(d.delta(4)).max() > 0 for r in dumps for d in r)

    ours, our_rates = our_updates(cfg, weights, x, dumps, subdivisions)
    assert our_rates == pytest.approx(rates, rel=1e-6)
    assert_same_weights(ours, load_model(cfg, final), load_model(cfg, weights))


# ------------------------------------------------------------------------------------------- Adam
def test_adam_is_darknets_cuda_update_which_its_cpu_build_ignores(darknet, assets, tmp_path):
    """Darknet's CPU update_convolutional_layer has no Adam: with adam=1 it runs SGD (shown through the harness).
    Ours follows the CUDA path (adam_update_gpu), written out below: every parameter decayed,
    m = B1 m + (1 - B1) d, v = B2 v + (1 - B2) d^2 on the summed update d = -(batch * grad + decay * batch * w),
    w += rate * m_hat / (sqrt(v_hat) + eps) with t the update number, and d cleared (no momentum)."""
    x, truths = coco128_batch(assets, 2)
    cfg = tmp_path / "net.cfg"
    cfg.write_text(CFG.format(batch=2, subdivisions=1))
    start = load_model(cfg)
    randomize_model(start, seed=4, calibrate_hw=(SIZE, SIZE))
    weights = tmp_path / "start.weights"
    start.save_darknet_weights(weights)
    _, _, sgd = darknet.updates(cfg, weights, x, truths, rounds=2)
    _, _, adam = darknet.updates(cfg, weights, x, truths, rounds=2, adam=1, B1=0.8, B2=0.99, eps=1e-6)
    assert sgd.read_bytes() == adam.read_bytes()  # the CPU build ignores adam

    adam_cfg = tmp_path / "adam.cfg"
    adam_text = CFG.format(batch=2, subdivisions=1).replace("momentum=0.9", "adam=1\nB1=0.8\nB2=0.99\neps=1e-6")
    adam_cfg.write_text(adam_text)
    model = load_model(adam_cfg, weights).train()
    hyp = resolve_hyp(model.net, [s for s in model.sections if s.type == "yolo"], {"ema": False}, {})
    trainer = our_update(model, hyp, schedule_from_hyp(hyp, hyp["max_batches"]))
    b1, b2, eps, decay, batch = 0.8, 0.99, 1e-6, 0.05, 2
    names = [n for n, _ in model.named_parameters()]
    w = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}
    m = {n: np.zeros_like(a) for n, a in w.items()}
    v = {n: np.zeros_like(a) for n, a in w.items()}
    gen = torch.Generator().manual_seed(0)
    for t in (1, 2):
        outputs, _ = model.layer_outputs(torch.from_numpy(x))
        target = torch.randn(outputs[3].shape, generator=gen)
        ((outputs[3] - target) ** 2).sum().div(batch).backward()
        grads = {n: p.grad.double().numpy().copy() for n, p in model.named_parameters()}
        trainer._optimizer_step()
        rate = trainer.parts.schedule(t)
        for n in names:
            scale = 0.5 if n.startswith("module_list.1.") else 1.0  # that layer's learning_rate=0.5
            d = -batch * grads[n] - decay * batch * w[n]
            m[n] = b1 * m[n] + (1 - b1) * d
            v[n] = b2 * v[n] + (1 - b2) * d * d
            w[n] = w[n] + rate * scale * (m[n] / (1 - b1 ** t)) / (np.sqrt(v[n] / (1 - b2 ** t)) + eps)
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), w[n], rtol=0, atol=1e-5 * np.abs(w[n]).max(), err_msg=n)
    sgd_weights = load_model(cfg, sgd)
    assert any(not torch.allclose(p, q, atol=1e-4) for p, q in zip(model.parameters(), sgd_weights.parameters()))


# ------------------------------------------------------------------------------------- BatchNorm
BN_CFG = """
[net]
batch=2
subdivisions=1
width=64
height=64
channels=3
momentum=0.9
decay=0.0005
learning_rate=0.001

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters=16
size=3
stride=2
pad=1
activation=linear

[convolutional]
filters=255
size=1
stride=1
pad=1
activation=linear

[yolo]
mask=0,1,2
anchors=10,14, 23,27, 37,58
classes=80
num=3
random=0
"""


def test_batchnorm_in_training_follows_cudnn_and_differs_from_darknet_cpu_by_the_variance(darknet, assets,
                                                                                          tmp_path):
    """Darknet's CPU forward_batchnorm_layer normalizes with the unbiased batch variance (sum / (m - 1)) and moves
    its rolling statistics by 0.1; cuDNN (what Darknet users train with, and ours: PyTorch's BatchNorm2d) uses the
    biased variance (sum / m) and moves them by 0.01, each with the unbiased variance. Each layer is fed Darknet's
    own input, so that only the BatchNorm is compared."""
    x, truths = coco128_batch(assets, 2)
    cfg = tmp_path / "bn.cfg"
    cfg.write_text(BN_CFG)
    start = load_model(cfg)
    randomize_model(start, seed=5, calibrate_hw=(SIZE, SIZE))
    weights = tmp_path / "start.weights"
    start.save_darknet_weights(weights)
    _, dumps, final = darknet.updates(cfg, weights, x, truths, rounds=1)
    dump, after = dumps[0][0], load_model(cfg, final)

    model = load_model(cfg, weights).train()
    for i, layer_input in ((0, x), (1, dump.out(0))):
        module = model.module_list[i]
        bn = module.bn
        mean0, var0 = bn.running_mean.clone().numpy(), bn.running_var.clone().numpy()
        with torch.no_grad():
            z = module.conv(torch.from_numpy(np.ascontiguousarray(layer_input))).double()
            ours = module(torch.from_numpy(np.ascontiguousarray(layer_input))).double().numpy()
        m = z.shape[0] * z.shape[2] * z.shape[3]
        mean = z.mean((0, 2, 3)).numpy()
        biased = z.var((0, 2, 3), unbiased=False).numpy()
        unbiased = biased * m / (m - 1)
        gamma, beta = bn.weight.detach().double().numpy(), bn.bias.detach().double().numpy()

        def bn_act(variance):
            y = (gamma * (z.numpy() - mean[:, None, None]).transpose(0, 2, 3, 1)
                 / np.sqrt(variance + 1e-5)).transpose(0, 3, 1, 2) + beta[:, None, None]
            return np.where(y > 0, y, 0.1 * y) if i == 0 else y

        theirs = dump.out(i)
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(bn_act(biased), ours, rtol=0, atol=1e-5 * scale)      # ours: cuDNN's 1/m
        np.testing.assert_allclose(bn_act(unbiased), theirs, rtol=0, atol=1e-5 * scale)  # Darknet CPU: 1/(m-1)
        assert np.abs(ours - theirs).max() > 20 * 1e-5 * scale  # so the two really differ
        if i == 1:  # linear: (out - beta) differs per channel by exactly sqrt((var_b + eps) / (var_u + eps))
            factor = np.sqrt((biased + 1e-5) / (unbiased + 1e-5))[None, :, None, None]
            np.testing.assert_allclose((ours - beta[:, None, None]) * factor, theirs - beta[:, None, None],
                                       rtol=0, atol=1e-5 * scale)

        # Running statistics after one step: ours move by 0.01 (cuDNN), Darknet's CPU by 0.1, both towards the
        # batch mean and the unbiased batch variance.
        theirs_bn = after.module_list[i].bn
        np.testing.assert_allclose(theirs_bn.running_mean.numpy(), 0.9 * mean0 + 0.1 * mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(theirs_bn.running_var.numpy(), 0.9 * var0 + 0.1 * unbiased, rtol=1e-5)
        np.testing.assert_allclose(bn.running_mean.numpy(), 0.99 * mean0 + 0.01 * mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn.running_var.numpy(), 0.99 * var0 + 0.01 * unbiased, rtol=1e-5)


# ------------------------------------------------------------------------------------ end to end
def test_two_updates_with_our_loss_equal_darknets(darknet, assets, tmp_path):
    """As above, but with nothing taken from Darknet on our side: our loss (yolo.losses.yolo_loss.YoloLoss), divided by
    subdivisions as the trainer does, backward, and the trainer's update; two updates of two sub-batches."""

    x, truths = coco128_batch(assets, 4)
    cfg = tmp_path / "net.cfg"
    cfg.write_text(CFG.format(batch=4, subdivisions=2))
    start = load_model(cfg)
    randomize_model(start, seed=6, calibrate_hw=(SIZE, SIZE))
    weights = tmp_path / "start.weights"
    start.save_darknet_weights(weights)
    rates, _, final = darknet.updates(cfg, weights, x, truths, rounds=2, subdivisions=2)

    model = load_model(cfg, weights).train()
    ours = _train_with_our_loss(model, x, truths, SIZE, rounds=2)
    assert ours == pytest.approx(rates[:2], rel=1e-6)
    assert_same_weights(model, load_model(cfg, final), load_model(cfg, weights))


def _train_with_our_loss(model, x, truths, size: int, rounds: int) -> list:
    """``rounds`` updates of ``model`` by our trainer's code (YoloLoss, backward, ``StepRunner._optimizer_step``) on
    ``x`` Float[4, 3, size, size] in two sub-batches of 2; ``truths`` per image rows (x, y, w, h, class), normalized.
    Returns the learning rate of each update."""
    hyp = resolve_hyp(model.net, [s for s in model.sections if s.type == "yolo"], {"ema": False}, {})
    trainer = our_update(model, hyp, schedule_from_hyp(hyp, hyp["max_batches"]))
    criterion = YoloLoss(model)
    rates = []
    for _ in range(rounds):
        for s in range(2):
            rows = [[b, r[4], r[0] * size, r[1] * size, r[2] * size, r[3] * size]
                    for b, t in enumerate(truths[2 * s:2 * s + 2]) for r in t]
            loss, _ = criterion(model(torch.from_numpy(x[2 * s:2 * s + 2])), torch.tensor(rows), (size, size))
            (loss / 2).backward()
        trainer._optimizer_step()
        rates.append(trainer.state.lr)
    return rates


def _yolov3_tiny_updates(ref, assets, tmp_path, rounds: int = 2):
    """``rounds`` updates of yolov3-tiny from its real weights on 4 coco128 images at 256 x 256 (two sub-batches
    of 2, constant rate 0.001) by Darknet ``ref`` and by our trainer's code (loss, backward, update).

    Returns ``[(name, our change, Darknet's change)]`` per parameter and running statistic (float64 arrays)."""
    from darknet_ref import set_net_options

    size, n = 256, 4
    root, labels = assets("coco128/images/train2017"), assets("coco128/labels/train2017")
    images, truths = [], []
    for path in sorted(root.glob("*.jpg"))[:n]:
        rgb = cv2.resize(cv2.imread(str(path)), (size, size), interpolation=cv2.INTER_AREA)[:, :, ::-1]
        images.append(rgb.transpose(2, 0, 1).astype(np.float32) / 255.0)
        truths.append(np.loadtxt(labels / (path.stem + ".txt"), dtype=np.float32, ndmin=2)[:, [1, 2, 3, 4, 0]])
    x = np.stack(images)
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "yolov3-tiny.cfg"
    cfg.write_text(set_net_options(assets("cfg/yolov3-tiny.cfg").read_text(), batch=n, subdivisions=2, width=size,
                                   height=size, burn_in=0, policy="constant", learning_rate=0.001, max_batches=100))
    weights = assets("weights/yolov3-tiny.weights")
    _, _, final = ref.updates(cfg, weights, x, truths, rounds=rounds, subdivisions=2)

    model = load_model(cfg, weights).train()
    _train_with_our_loss(model, x, truths, size, rounds)
    start, theirs = load_model(cfg, weights).state_dict(), load_model(cfg, final).state_dict()
    return [(k, (model.state_dict()[k] - v).double().numpy().ravel(), (theirs[k] - v).double().numpy().ravel())
            for k, v in start.items() if "num_batches" not in k]


def _cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.slow
def test_darknets_cpu_build_trains_unlike_its_cuda_path_and_the_patched_build_trains_as_ours(darknet, assets,
                                                                                            tmp_path):
    """Why a Darknet CPU-build fine-tune differs from ours although each layer's update is tested equal above:
    on a real network (yolov3-tiny, [route] and [upsample] layers, BatchNorm) Darknet's CPU training code
    differs from its CUDA path, which our trainer follows. The CPU build never trains the BatchNorm shifts, moves
    the running statistics by 0.1 (cuDNN: 0.01), and its backbone updates point elsewhere: a convolution's
    backward overwrites its input's delta (col2im_cpu_ext zeroes it), dropping the second head's gradient at
    the [route], and [route]/[upsample] deltas are never reset between mini-batches. Built with the patches of
    darknet_ref.CUDA_TRAINING, which make the CPU code do what the CUDA code does, Darknet's two updates are
    ours. (The remaining difference, about 1%, is the CPU's unbiased batch variance in normalization, see the
    BatchNorm test above.)"""
    from darknet_ref import CUDA_TRAINING, DarknetRef, build_reference, darknet_source

    stock = dict((k, (o, t)) for k, o, t in _yolov3_tiny_updates(darknet, assets, tmp_path / "stock"))
    for key in ("module_list.0.bn.bias", "module_list.13.bn.bias", "module_list.21.bn.bias"):
        ours, theirs = stock[key]
        assert np.abs(theirs).max() == 0 and np.abs(ours).max() > 0, key  # the CPU never trains the shift
    ours, theirs = stock["module_list.0.bn.running_mean"]
    # four mini-batches moving by 0.1 against 0.01: (1 - 0.9^4) / (1 - 0.99^4) = 8.7 for equal batch means
    assert np.linalg.norm(theirs) / np.linalg.norm(ours) == pytest.approx(8.7, rel=0.1)
    for key in ("module_list.0.conv.weight", "module_list.8.conv.weight", "module_list.13.conv.weight",
                "module_list.18.conv.weight"):
        assert _cosine(*stock[key]) < 0.9, key  # below the [route]: another direction
    ours, theirs = stock["module_list.22.conv.weight"]  # the last head's own conv nearly agrees
    assert _cosine(ours, theirs) > 0.95

    patched = DarknetRef(build_reference(darknet_source(), patches=CUDA_TRAINING).folder, tmp_path)
    for key, ours, theirs in _yolov3_tiny_updates(patched, assets, tmp_path / "patched"):
        assert np.linalg.norm(theirs) > 0, key
        assert _cosine(ours, theirs) > 0.98, key
        assert np.linalg.norm(ours) / np.linalg.norm(theirs) == pytest.approx(1, abs=0.05), key


# ------------------------------------------------------------------ per-layer update options (CUDA only)
HOLD_CFG = CFG.replace("activation=leaky\nlearning_rate=0.5", "activation=leaky\nlearning_rate=0.5\nburnin_update=1") \
              .replace("[convolutional]\nfilters=8\n", "[convolutional]\ndont_update=2\nfilters=8\n") \
              .replace("[convolutional]\nfilters=255\n", "[convolutional]\nclip=0.05\nfilters=255\n")


def test_dont_update_burnin_update_and_clip_follow_darknets_cuda_update(darknet, assets, tmp_path):
    """update_network_gpu skips a layer while dont_update >= n or burnin_update * burn_in > n (its
    weight_updates keep adding up, untouched by momentum and decay) and update_convolutional_layer_gpu clips
    conv weights to [-clip, clip]; Darknet's CPU update_network has none of the three (shown through the
    harness). Ours, against the CUDA rules written out: layer 0 held for updates 1-2, layer 1 (burn_in=2)
    for update 1, layer 3's weights clipped."""
    x, truths = coco128_batch(assets, 2)
    cfg, plain = tmp_path / "hold.cfg", tmp_path / "plain.cfg"
    cfg.write_text(HOLD_CFG.format(batch=2, subdivisions=1))
    plain.write_text(CFG.format(batch=2, subdivisions=1))
    assert all(key in cfg.read_text() for key in ("dont_update=2", "burnin_update=1", "clip=0.05"))
    start = load_model(cfg)
    randomize_model(start, seed=7, calibrate_hw=(SIZE, SIZE))
    weights = tmp_path / "start.weights"
    start.save_darknet_weights(weights)
    _, _, held = darknet.updates(cfg, weights, x, truths, rounds=1)
    _, _, not_held = darknet.updates(plain, weights, x, truths, rounds=1)
    assert held.read_bytes() == not_held.read_bytes()  # the CPU build ignores all three

    model = load_model(cfg, weights).train()
    hyp = resolve_hyp(model.net, [s for s in model.sections if s.type == "yolo"], {"ema": False}, {})
    trainer = our_update(model, hyp, schedule_from_hyp(hyp, hyp["max_batches"]))
    batch, decay, momentum = 2, 0.05, 0.9
    first = {0: 3, 1: 2, 2: 1, 3: 1}  # dont_update=2 -> 3; burnin_update=1 * burn_in=2 -> 2
    scale = {0: 1.0, 1: 0.5, 2: 1.0, 3: 1.0}
    w = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}
    u = {n: np.zeros_like(a) for n, a in w.items()}  # Darknet's weight_updates / bias_updates
    gen = torch.Generator().manual_seed(1)
    for n in range(1, 5):
        outputs, _ = model.layer_outputs(torch.from_numpy(x))
        ((outputs[3] - torch.randn(outputs[3].shape, generator=gen)) ** 2).sum().div(batch).backward()
        grads = {k: p.grad.double().numpy().copy() for k, p in model.named_parameters()}
        trainer._optimizer_step()
        rate = trainer.parts.schedule(n)
        for k in w:
            layer = int(k.split(".")[1])
            u[k] += -batch * grads[k]
            if n < first[layer]:
                continue
            if k.endswith("weight"):
                u[k] += -decay * batch * w[k]
            w[k] = w[k] + rate * scale[layer] / batch * u[k]
            u[k] *= momentum
            if layer == 3 and k.endswith("weight"):
                w[k] = np.clip(w[k], -0.05, 0.05)
        if n == 1:
            start_w = dict(start.named_parameters())
            assert torch.equal(model.module_list[0].conv.weight, start_w["module_list.0.conv.weight"])
            assert torch.equal(model.module_list[1].conv.bias, start_w["module_list.1.conv.bias"])
    for k, p in model.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), w[k], rtol=0, atol=1e-5 * np.abs(w[k]).max(), err_msg=k)
    assert np.abs(w["module_list.3.conv.weight"]).max() == pytest.approx(0.05)  # the clip did act


@pytest.mark.parametrize("line,message", [
    ("train_only_bn=1", "train_only_bn=1' changes Darknet's update"),
    ("grad_centr=1", "grad_centr=1' changes Darknet's update"),
    ("dont_update=5", "'dont_update' with adam=1 is not supported"),
])
def test_update_options_not_reproduced_are_refused_with_the_line(tmp_path, line, message):
    from yolo.errors import CfgError

    text = CFG.format(batch=2, subdivisions=1).replace("[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\n"
                                                       "activation=leaky\nlearning_rate=0.5",
                                                       "[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\n"
                                                       f"activation=leaky\n{line}", 1)
    if line.startswith("dont_update"):
        text = text.replace("momentum=0.9", "adam=1")
    cfg = tmp_path / "bad.cfg"
    cfg.write_text(text)
    number = text.splitlines().index(line) + 1
    model = load_model(cfg)
    hyp = resolve_hyp(model.net, [s for s in model.sections if s.type == "yolo"], {"ema": False}, {})
    with pytest.raises(CfgError, match=rf"bad.cfg:{number}: \[convolutional\] \(layer 1\): .*{message}"):
        optimizer_from_hyp(model, hyp)


SHORTCUT_CFG = """
[net]
batch=2
subdivisions=1
width=32
height=32
channels=3
momentum=0.9
decay=0.05
learning_rate=0.01

[convolutional]
filters=4
size=3
stride=1
pad=1
activation=leaky

[convolutional]
filters=4
size=3
stride=1
pad=1
activation=leaky
learning_rate=2

[shortcut]
from=-2
weights_type=per_channel
activation=linear
learning_rate=0.5
"""


def weighted_shortcut_model(cfg: Path):
    """The model of SHORTCUT_CFG, or a skip where the model builder does not build weighted shortcuts."""
    from yolo.errors import CfgError

    try:
        return load_model(cfg)
    except CfgError as exc:
        if "weighted shortcut" in str(exc):
            pytest.skip("this version builds no weighted [shortcut]")
        raise


def test_weighted_shortcut_follows_darknets_cuda_update(tmp_path):
    """update_shortcut_layer_gpu: no decay on the shortcut weights (the line is commented out on CUDA, the CPU
    decays them), the summed update kept within [-1, 1] (constrain_ongpu; none on the CPU), the layer's
    learning_rate applied. Written out in Darknet's summed units against ours over three updates whose gradients
    are large enough for the bound to act."""
    cfg = tmp_path / "shortcut.cfg"
    cfg.write_text(SHORTCUT_CFG)
    model = weighted_shortcut_model(cfg).train()
    hyp = resolve_hyp(model.net, [], {"ema": False, "epochs": 1}, {})
    trainer = our_update(model, hyp, schedule_from_hyp(hyp, 10))
    batch, decay, momentum, rate = 2, 0.05, 0.9, 0.01
    w = {n: p.detach().double().numpy().copy() for n, p in model.named_parameters()}
    u = {n: np.zeros_like(a) for n, a in w.items()}
    gen = torch.Generator().manual_seed(2)
    clamped = False
    for _ in range(3):
        x = torch.rand(batch, 3, 32, 32, generator=gen)
        (model(x) * torch.randn(batch, 4, 32, 32, generator=gen)).sum().mul(3.0 / batch).backward()
        grads = {k: p.grad.double().numpy().copy() for k, p in model.named_parameters()}
        trainer._optimizer_step()
        for k in w:
            layer = int(k.split(".")[1])
            u[k] += -batch * grads[k]
            if layer == 2:  # the shortcut: clamp, no decay
                clamped |= bool((np.abs(u[k]) > 1).any())
                u[k] = np.clip(u[k], -1, 1)
                scale = 0.5
            else:
                if k.endswith("weight"):
                    u[k] += -decay * batch * w[k]
                scale = 2.0 if layer == 1 else 1.0
            w[k] = w[k] + rate * scale / batch * u[k]
            u[k] *= momentum
    assert clamped, "the gradients were too small for the bound to act"
    for k, p in model.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), w[k], rtol=0, atol=1e-5 * np.abs(w[k]).max(), err_msg=k)


def test_adam_with_layers_other_than_convolutions_is_refused_with_the_line(tmp_path):
    from yolo.errors import CfgError

    text = SHORTCUT_CFG.replace("momentum=0.9", "adam=1")
    cfg = tmp_path / "adam.cfg"
    cfg.write_text(text)
    model = weighted_shortcut_model(cfg)
    hyp = resolve_hyp(model.net, [], {"ema": False, "epochs": 1}, {})
    line = text.splitlines().index("[shortcut]") + 1
    with pytest.raises(CfgError, match=rf"adam.cfg:{line}: \[shortcut\] \(layer 2\): adam=1: Darknet's CUDA Adam"):
        optimizer_from_hyp(model, hyp)
