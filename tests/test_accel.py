"""The fast CPU kernels (yolo.accel) fall back to the plain PyTorch modules where PyTorch's private oneDNN operators
are missing or do not run: the model then computes exactly what it computes without them."""
import logging

import pytest
import torch

from cfg_snippets import SMALL_BACKBONE, net_section
from yolo.accel import cpu_conv
from yolo.accel.cpu_conv import FusedConvCPU
from yolo.accel.winograd import WinogradConv3x3
from yolo.inference.prepare import prepare_for_inference
from yolo.models.model import Darknet
from yolo.models.weights import randomize_weights

# SMALL_BACKBONE, then a stride-1 3x3 convolution (a Winograd candidate) and a 1x1 one.
CFG = net_section(64, 64) + "\n" + SMALL_BACKBONE + (
    "\n[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    "\n[convolutional]\nfilters=8\nsize=1\nstride=1\npad=1\nactivation=linear\n")

ACCEL = (FusedConvCPU, WinogradConv3x3)


def _model(tmp_path):
    cfg = tmp_path / "small.cfg"
    cfg.write_text(CFG)
    model = Darknet(cfg)
    randomize_weights(model, seed=0)
    return model.eval()


def _run(net):
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        return net(x.contiguous(memory_format=torch.channels_last))


@pytest.mark.slow
def test_a_pytorch_without_the_operators_keeps_the_plain_convolutions(tmp_path, monkeypatch):
    model = _model(tmp_path)
    if cpu_conv.onednn_conv_available():  # the kernels are used where they can be
        assert any(isinstance(m, ACCEL) for m in prepare_for_inference(model).module_list)
    monkeypatch.setattr(cpu_conv, "PRIVATE_OPERATORS", cpu_conv.PRIVATE_OPERATORS + ("_not_in_this_build",))
    assert not cpu_conv.onednn_conv_available()
    fast = prepare_for_inference(model)
    assert not any(isinstance(m, ACCEL) for m in fast.module_list)
    plain = _run(prepare_for_inference(model, fast_cpu_kernels=False))
    assert torch.allclose(_run(fast), plain, rtol=0, atol=1e-6)


def test_operators_that_fail_to_run_give_the_plain_model_back(tmp_path, monkeypatch, caplog):
    model = _model(tmp_path)

    def changed_signature(self, x):
        raise RuntimeError("mkldnn::_convolution_pointwise() expected at most 9 argument(s) but received 10")

    monkeypatch.setattr(FusedConvCPU, "forward", changed_signature)
    monkeypatch.setattr(WinogradConv3x3, "forward", changed_signature)
    with caplog.at_level(logging.WARNING, logger="yolo.accel.swap"):
        fast = prepare_for_inference(model)
    assert not any(isinstance(m, ACCEL) for m in fast.module_list)
    assert "plain PyTorch convolutions instead" in caplog.text and "expected at most 9" in caplog.text
    assert torch.equal(_run(fast), _run(prepare_for_inference(model, fast_cpu_kernels=False)))
