"""The extra layer types and activations, each against Darknet itself (through the harness) where Darknet's
CPU path computes it correctly, and against Darknet's CUDA formula written out in numpy where it does not."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from cfg_snippets import net_section
from helpers import randomize_model
from yolo.errors import CfgError
from yolo.models.cfg import parse_cfg_text
from yolo.models.model import Darknet

GENERIC = ["linear", "logistic", "loggy", "relu", "relu6", "elu", "selu", "gelu", "relie", "ramp", "leaky", "tanh",
           "plse", "stair", "hardtan", "lhtan", "revleaky"]
CONV_ONLY = ["swish", "mish", "hard_mish", "normalize_channels", "normalize_channels_softmax",
             "normalize_channels_softmax_maxval"]


def _cfg(body: str, size: int = 8, channels: int = 3) -> str:
    return net_section(size, size, channels) + "\n" + body


def _compare(darknet, tmp_path, text: str, size: int = 8, seed: int = 0, scale: float = 1.0):
    path = tmp_path / "net.cfg"
    path.write_text(text)
    model = Darknet(path)
    randomize_model(model, seed=seed, calibrate_hw=(size, size))
    weights = tmp_path / "net.weights"
    model.save_darknet_weights(weights)
    x = (np.random.RandomState(seed).rand(1, model.input_channels, size, size).astype(np.float32) - 0.5) * scale
    dump = darknet.forward(path, weights, x)
    with torch.no_grad():
        outputs, _ = model.eval().layer_outputs(torch.from_numpy(x))
    for i, ours in enumerate(outputs):
        if dump.layers[i].type in ("cost", "contrastive"):  # Darknet leaves their outputs unwritten in inference
            continue
        ref = dump.out(i)
        ours = ours.numpy().reshape(ref.shape)
        err = np.abs(ref - ours).max() / max(1e-6, np.abs(ref).max())
        assert err < 1e-5, f"layer {i} ({dump.layers[i].type}): relative error {err:.2e}"
    return model, outputs


@pytest.mark.parametrize("name", GENERIC)
def test_activation_layer_matches_darknet(name, darknet, tmp_path):
    # Inputs spread over -12..12 reach every piece of the piecewise activations.
    text = _cfg(f"[convolutional]\nfilters=4\nsize=1\nactivation=linear\n\n[activation]\nactivation={name}\n")
    _compare(darknet, tmp_path, text, scale=24.0)


@pytest.mark.parametrize("name", CONV_ONLY + ["relu6", "gelu", "selu", "elu"])
def test_convolutional_activation_matches_darknet(name, darknet, tmp_path):
    """relu6 included: ../shared/darknet patches the CPU activate() to compute it as its CUDA kernel does."""
    text = _cfg(f"[convolutional]\nfilters=5\nsize=3\npad=1\nactivation={name}\n")
    _compare(darknet, tmp_path, text, scale=8.0)


@pytest.mark.parametrize("name", ["hard_mish", "normalize_channels"])
def test_conv_only_activation_is_refused_elsewhere(name, tmp_path):
    path = tmp_path / "net.cfg"
    path.write_text(_cfg(f"[convolutional]\nfilters=4\nsize=1\nactivation=linear\n\n[activation]\nactivation={name}\n"))
    with pytest.raises(CfgError, match=f"net.cfg:12: .*'{name}'"):
        Darknet(path)


def test_gelu_is_darknets_tanh_form():
    from yolo.models.activations import create_activation
    x = torch.linspace(-5, 5, 101)
    expected = 0.5 * x * (1 + torch.tanh(0.797885 * x + 0.035677 * x ** 3))
    assert torch.equal(create_activation("gelu")(x), expected)
    assert not torch.allclose(create_activation("gelu")(x), torch.nn.functional.gelu(x), atol=1e-6, rtol=0)


LAYERS = {
    "connected_bn": "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=leaky\n\n"
                    "[connected]\noutput=7\nbatch_normalize=1\nactivation=leaky\n\n[connected]\noutput=5\nactivation=linear\n",
    "local": "[local]\nsize=3\nstride=1\npad=1\nfilters=4\nactivation=leaky\n\n[local]\nsize=3\nstride=2\npad=0\nfilters=3\n"
             "activation=linear\n",
    "crop_batchnorm": "[crop]\ncrop_height=6\ncrop_width=4\n\n[batchnorm]\n\n[cost]\n",
    "scale_channels": "[convolutional]\nfilters=6\nsize=3\npad=1\nactivation=leaky\n\n[avgpool]\n\n"
                      "[convolutional]\nfilters=6\nsize=1\nactivation=logistic\n\n[scale_channels]\nfrom=-3\n\n"
                      "[convolutional]\nfilters=1\nsize=1\nactivation=logistic\n\n[scale_channels]\nfrom=-2\nscale_wh=1\n",
    "sam": "[convolutional]\nfilters=6\nsize=3\npad=1\nactivation=leaky\n\n[convolutional]\nfilters=6\nsize=1\n"
           "activation=logistic\n\n[sam]\nfrom=-2\nactivation=relu\n",
    "reorg3d": "[convolutional]\nfilters=16\nsize=1\nactivation=leaky\n\n[reorg3d]\nstride=2\n\n[reorg3d]\nstride=2\n"
               "reverse=1\n\n[reorg]\nstride=2\n",
    # 6 channels, stride 2: 4 does not divide 6, Darknet's old reorg still computes a fixed gather.
    "reorg_uneven": "[convolutional]\nfilters=6\nsize=1\nactivation=leaky\n\n[reorg]\nstride=2\n",
    "local_avgpool": "[local_avgpool]\nsize=3\nstride=2\n\n[local_avgpool]\nsize=2\nstride=1\npadding=0\n",
    # a negative stride downsamples (Darknet's reverse): scale x the sum of each block; 12 by 5 leaves 2, with
    # Darknet's rows of 10 read across the 12-wide rows' ends
    "downsample": "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=leaky\n\n[upsample]\nstride=-2\nscale=0.5\n\n"
                  "[upsample]\nstride=2\n\n[route]\nlayers=-1,-3\n\n[upsample]\nstride=-5\n",
    "weighted_shortcuts": "[convolutional]\nfilters=4\nsize=1\nactivation=leaky\n\n[convolutional]\nfilters=4\nsize=3\npad=1\n"
                          "activation=leaky\n\n[convolutional]\nfilters=6\nsize=1\nactivation=leaky\n\n"
                          "[shortcut]\nfrom=-2,-3\nweights_type=per_channel\nweights_normalization=softmax\n\n"
                          "[shortcut]\nfrom=-3\nweights_type=per_feature\nweights_normalization=relu\nactivation=swish\n\n"
                          "[shortcut]\nfrom=-4,-5\n",
    "dilation": "[convolutional]\nfilters=4\nsize=3\npad=1\ndilation=2\nactivation=leaky\n",
    "share_index": "[convolutional]\nbatch_normalize=1\nfilters=3\nsize=3\npad=1\nactivation=leaky\n\n"
                   "[convolutional]\nshare_index=0\nbatch_normalize=1\nfilters=3\nsize=3\npad=1\ndilation=2\n"
                   "activation=mish\n",
}


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_layer_type_matches_darknet(kind, darknet, tmp_path):
    model, _ = _compare(darknet, tmp_path, _cfg(LAYERS[kind], size=12, channels=3), size=12)
    # Shortcut weights start at 1 in Darknet: give them other values and compare again.
    if kind == "weighted_shortcuts":
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 2:
                    p.copy_(torch.randn(p.shape))
        weights = tmp_path / "w2.weights"
        model.save_darknet_weights(weights)
        x = np.random.RandomState(3).rand(1, 3, 12, 12).astype(np.float32)
        dump = darknet.forward(tmp_path / "net.cfg", weights, x)
        with torch.no_grad():
            outputs, _ = model.eval().layer_outputs(torch.from_numpy(x))
        for i, ours in enumerate(outputs):
            np.testing.assert_allclose(ours.numpy(), dump.out(i), rtol=1e-5, atol=1e-5 * np.abs(dump.out(i)).max())


def test_upsample_stride_zero_or_a_downsample_to_nothing_is_refused(tmp_path):
    for stride, message in ((0, "must not be 0"), (-13, "nothing is left")):
        with pytest.raises(CfgError, match=message) as info:
            Darknet(parse_cfg_text(_cfg(f"[upsample]\nstride={stride}\n", size=12), "down.cfg"))
        assert str(info.value).startswith("down.cfg:7: [upsample]")
    assert Darknet(parse_cfg_text(_cfg("[upsample]\nstride=-12\n", size=12), "down.cfg")).layer_infos[0].out_shape \
        == (3, 1, 1)


def test_yolov1_detection_decode(tmp_path):
    """The [detection] decode of Darknet's get_detection_detections, written out in numpy."""
    side, num, classes = 2, 2, 3
    k = side * side * ((1 + 4) * num + classes)
    text = _cfg(f"[connected]\noutput={k}\nactivation=logistic\n\n[detection]\nclasses={classes}\ncoords=4\n"
                f"side={side}\nnum={num}\nsoftmax=1\nsqrt=1\n", size=16)
    (tmp_path / "v1.cfg").write_text(text)
    model = Darknet(tmp_path / "v1.cfg").eval()
    x = torch.rand(1, 3, 16, 16)
    with torch.no_grad():
        rows = model(x)[0].numpy()
        flat = model.module_list[0](x).flatten().numpy()
    cells = side * side
    probs = flat[:cells * classes].reshape(cells, classes)
    probs = np.exp(probs) / np.exp(probs).sum(1, keepdims=True)
    for i in range(cells):
        for n in range(num):
            row = rows[i * num + n]
            box = flat[cells * (classes + num) + (i * num + n) * 4:][:4]
            expected = [(box[0] + i % side) / side * 16, (box[1] + i // side) / side * 16, box[2] ** 2 * 16,
                        box[3] ** 2 * 16, flat[cells * classes + i * num + n], *probs[i]]
            np.testing.assert_allclose(row, expected, rtol=1e-5)


def test_binary_convolution_is_cudas_per_filter_formula():
    """xnor=1: sign(x) (x > 0 -> 1, else -1) convolved with sign(w) * mean|w| of each filter, padding 0."""
    text = _cfg("[convolutional]\nxnor=1\nfilters=3\nsize=3\npad=1\nactivation=linear\n", size=5, channels=2)
    from yolo.models.cfg import parse_cfg_text
    model = Darknet(parse_cfg_text(text, source="xnor.cfg")).eval()
    w = model.module_list[0].conv.weight.detach().numpy()
    b = model.module_list[0].conv.bias.detach().numpy()
    x = torch.randn(1, 2, 5, 5)
    with torch.no_grad():
        ours = model(x).numpy()[0]
    xb = np.pad(np.where(x.numpy()[0] > 0, 1.0, -1.0), ((0, 0), (1, 1), (1, 1)))
    wb = np.where(w > 0, 1.0, -1.0) * np.abs(w).mean(axis=(1, 2, 3), keepdims=True)
    expected = np.zeros((3, 5, 5))
    for f in range(3):
        for i in range(5):
            for j in range(5):
                expected[f, i, j] = (xb[:, i:i + 3, j:j + 3] * wb[f]).sum() + b[f]
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_batched_shortcut_follows_cuda_not_the_cpu_read(darknet, assets, tmp_path, caplog):
    """Darknet's CPU [shortcut] with unequal channel counts reads the wrong image for batches > 1 (see
    ../shared/darknet/README.md); its CUDA path adds each image's own channels. Ours, run on a batch of two,
    equals Darknet run on each image alone."""
    caplog.set_level(logging.ERROR)
    cfg = assets("cfg/yolov3-tiny-prn.cfg")
    model = Darknet(cfg)
    randomize_model(model, calibrate_hw=(64, 64))
    weights = tmp_path / "prn.weights"
    model.save_darknet_weights(weights)
    x = np.random.RandomState(0).rand(2, 3, 64, 64).astype(np.float32)
    with torch.no_grad():
        batched, _ = model.eval().layer_outputs(torch.from_numpy(x))
    shortcuts = [i for i, s in enumerate(model.sections[1:]) if s.type == "shortcut"]
    assert shortcuts
    for image in range(2):
        dump = darknet.forward(cfg, weights, x[image:image + 1])
        for i in shortcuts:
            ref = dump.out(i)[0]
            np.testing.assert_allclose(batched[i][image].numpy(), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_detector_runs_a_yolov1_cfg(tmp_path):
    """The Detector takes [detection] rows like any head's: boxes in original-image pixels, one dict per image."""
    from yolo.inference.detector import Detector
    k = 2 * 2 * ((1 + 4) * 2 + 3)
    text = _cfg(f"[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=leaky\n\n[connected]\noutput={k}\n"
                f"activation=logistic\n\n[detection]\nclasses=3\ncoords=4\nside=2\nnum=2\nsoftmax=1\nsqrt=1\n", size=64)
    (tmp_path / "v1.cfg").write_text(text)
    model = Darknet(tmp_path / "v1.cfg")
    randomize_model(model, calibrate_hw=(64, 64))
    model.save_darknet_weights(tmp_path / "v1.weights")
    detector = Detector(tmp_path / "v1.cfg", tmp_path / "v1.weights", img_size=64, conf_thres=0.0, iou_thres=1.0)
    image = (np.random.RandomState(0).rand(48, 80, 3) * 255).astype(np.uint8)
    (result,) = detector([image])
    assert result["boxes"].shape[1] == 4 and len(result["boxes"]) > 0
    assert set(result) == {"boxes", "scores", "labels", "names"}
