"""Random cfgs mixing every layer type (tests/random_cfg.py) against Darknet itself, layer by layer.

Each seed gives a cfg that Darknet must build and run (the harness fails the test otherwise); with random weights
written by our writer, every layer's output must match Darknet's within 1e-4 relative to the layer's largest value.
Cfgs with sequence layers run twice (the state carries over) with time_steps=2; a cfg whose [shortcut] adds
layers of different channel counts runs one image per Darknet run (Darknet's batched path reads the wrong image
there, see ../shared/darknet/README.md).
"""
import numpy as np
import pytest
import torch

from random_cfg import available_makers, random_cfg, randomize_weights, relative_error, yolo_output
from yolo.models.cfg import parse_cfg_text
from yolo.models.layer_types.recurrent_base import set_time_steps
from yolo.models.model import Darknet

SEEDS = range(40)


def test_generator_is_deterministic_and_mixes_every_type():
    assert random_cfg(3).text == random_cfg(3).text
    seen = {t for seed in SEEDS for t in random_cfg(seed).types}
    assert seen >= {name for name, _, _ in available_makers()} | {"softmax"}, seen


@pytest.mark.parametrize("seed", SEEDS)
def test_random_cfg_matches_darknet(darknet, tmp_path, seed):
    cfg = random_cfg(seed)
    model = Darknet(parse_cfg_text(cfg.text, source=f"random_cfg({seed})")).eval()
    randomize_weights(model, seed)
    weights = tmp_path / "random.weights"
    model.save_darknet_weights(weights)

    images = 1 if cfg.mixed_shortcut else 2
    time_steps = images if cfg.recurrent else 1
    calls = 2 if cfg.recurrent else 1
    set_time_steps(model, time_steps)
    x = np.random.RandomState(seed).rand(calls * images, *cfg.input_shape).astype(np.float32)
    dumps = darknet.sequence(cfg.text, weights, x, time_steps, calls)

    for call, (dump, x_call) in enumerate(zip(dumps, torch.from_numpy(x).chunk(calls))):
        with torch.no_grad():
            outputs, _ = model.layer_outputs(x_call)
        assert len(dump.layers) == len(outputs)
        for i, (kind, ours) in enumerate(zip(cfg.types, outputs)):
            ours = ours.numpy()
            if kind == "yolo":
                ours = yolo_output(ours, model.module_list[i])
            ref = dump.out(i)
            assert ref.size == ours.size, f"seed {seed} layer {i} ({kind}): Darknet {ref.shape}, ours {ours.shape}"
            err = relative_error(ref.reshape(ours.shape), ours)
            assert err < 1e-4, f"seed {seed} call {call} layer {i} ({kind}): relative error {err:.2e}\n{cfg.text}"
