"""A float16 model's heads run in float32 (:class:`yolo.inference.prepare.Float32Head`, what a Detector with
``half=True`` uses on CUDA), checked here on the CPU against the float32 eval model."""
import copy

import pytest
import torch

from conftest import asset
from yolo.inference.prepare import Float32Head
from yolo.models.model import load_model


@pytest.mark.slow
def test_float32_heads_in_a_float16_model_match_the_float32_model():
    model = load_model(asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights"), device="cpu").eval()
    x = torch.rand(2, 3, 320, 320, generator=torch.Generator().manual_seed(0))
    half = copy.deepcopy(model)
    half.fuse()
    half.half()
    for i, module in enumerate(half.module_list):
        if half._is_head[i]:
            half.module_list[i] = Float32Head(module)
    half.to(memory_format=torch.channels_last)
    with torch.no_grad():
        expected = model(x)
        got = half(x.half().contiguous(memory_format=torch.channels_last))
    assert got.dtype == torch.float32 and got.shape == expected.shape
    assert all(p.dtype == torch.float32 for m in half.module_list if isinstance(m, Float32Head)
               for p in m.buffers())
    # float16 convolutions: boxes within a pixel, probabilities within 1e-2 of the float32 model
    assert (got[..., :4] - expected[..., :4]).abs().max().item() < 1.0
    assert (got[..., 4:] - expected[..., 4:]).abs().max().item() < 1e-2
