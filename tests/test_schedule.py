"""Darknet's learning-rate policies against a plain transcription of its get_current_rate, and the optimizer groups."""
import math

import pytest
import torch
import torch.nn as nn

from yolo.cfg import parse_cfg_text
from yolo.engine.config import ConfigError, resolve_hyp
from yolo.engine.schedule import LRSchedule, resolve_steps, schedule_from_hyp
from yolo.engine.trainer import build_optimizer


def darknet_rate(n, learning_rate, policy, burn_in=0, power=4.0, steps=(), scales=(), step=1, scale=1.0,
                 gamma=1.0, max_batches=0):
    """Darknet's get_current_rate(net) with batch_num = n, written out as in network.c."""
    if n < burn_in:
        return learning_rate * pow(float(n) / burn_in, power)
    if policy == "constant":
        return learning_rate
    if policy == "step":
        return learning_rate * pow(scale, n // step)
    if policy == "steps":
        rate = learning_rate
        i = 0
        while i < len(steps):
            if steps[i] > n:
                return rate
            rate *= scales[i]
            i += 1
        return rate
    if policy == "exp":
        return learning_rate * pow(gamma, n)
    if policy == "poly":
        return learning_rate * pow(1 - float(n) / max_batches, power)
    if policy == "sig":
        return learning_rate * (1.0 / (1.0 + math.exp(gamma * (n - step))))
    raise ValueError(policy)


CASES = [
    dict(learning_rate=0.001, policy="steps", burn_in=1000, steps=[400000, 450000], scales=[0.1, 0.1]),
    dict(learning_rate=0.01, policy="steps", burn_in=10, power=2.0, steps=[20, 30, 30], scales=[0.5, 2.0, 0.1]),
    dict(learning_rate=0.1, policy="step", burn_in=5, step=7, scale=0.5),
    dict(learning_rate=0.1, policy="exp", gamma=0.99),
    dict(learning_rate=0.1, policy="poly", power=4.0, burn_in=3, max_batches=60),
    dict(learning_rate=0.1, policy="sig", gamma=0.2, step=25),
    dict(learning_rate=0.05, policy="constant", burn_in=8),
]


@pytest.mark.parametrize("case", CASES, ids=[c["policy"] + str(i) for i, c in enumerate(CASES)])
def test_schedule_matches_darknet(case):
    schedule = LRSchedule(**case)
    points = list(range(0, 61)) + [999, 1000, 1001, 399999, 400000, 449999, 450000, 500000]
    for n in points:
        if (case["policy"] == "poly" and n > case["max_batches"]) or (case["policy"] == "sig" and n > 1000):
            continue  # beyond poly's end; sig's reference overflows
        assert schedule(n) == pytest.approx(darknet_rate(n, **case), rel=1e-12, abs=1e-300), n


def test_burn_in_is_power_four_by_default():
    schedule = LRSchedule(learning_rate=0.01, policy="constant", burn_in=100)
    assert schedule(50) == pytest.approx(0.01 * 0.5 ** 4)
    assert schedule(1) == pytest.approx(0.01 * 1e-8)
    assert schedule(100) == 0.01


def test_fractional_steps_are_fractions_of_the_run():
    assert resolve_steps([0.8, 0.9, 300], 1000) == [800, 900, 300]
    net = parse_cfg_text("[net]\nlearning_rate=0.02\npolicy=steps\nsteps=0.5,0.75\nscales=.1,.1\nburn_in=4\n"
                         "max_batches=100\n[convolutional]\nfilters=3\n")[0]
    hyp = resolve_hyp(net, [], None, {})
    schedule = schedule_from_hyp(hyp, total_updates=40)
    assert schedule.steps == [20, 30]
    assert schedule(19) == pytest.approx(0.02) and schedule(20) == pytest.approx(0.002)
    assert schedule(30) == pytest.approx(0.0002)


def test_hyp_precedence_cfg_then_yaml_then_flags(tmp_path):
    net = parse_cfg_text("[net]\nbatch=64\nsubdivisions=2\nlearning_rate=0.001\nmomentum=0.949\ndecay=0.0005\n"
                         "width=416\nheight=416\nmax_batches=2000\nhue=.1\n[convolutional]\nfilters=3\n")[0]
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text("learning_rate: 0.005\nbatch: 32\naugment: {flip: 0.0}\n")
    hyp = resolve_hyp(net, [], hyp_file, {"batch": 16, "img_size": [320, 256], "epochs": None})
    assert hyp["momentum"] == pytest.approx(0.949) and hyp["decay"] == pytest.approx(0.0005)  # cfg
    assert hyp["learning_rate"] == pytest.approx(0.005)  # YAML over cfg
    assert hyp["batch"] == 16 and hyp["subdivisions"] == 2  # flag over YAML over cfg
    assert hyp["img_size"] == [320, 256]
    assert hyp["augment"]["flip"] == 0.0 and hyp["augment"]["hue"] == pytest.approx(0.1)
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rat: 0.1\n")
    with pytest.raises(ConfigError, match="learning_rat"):
        resolve_hyp(net, [], bad, {})
    with pytest.raises(ConfigError, match="subdivisions"):
        resolve_hyp(net, [], {"batch": 10, "subdivisions": 4}, {})


def test_no_weight_decay_on_batchnorm_and_biases():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.Conv2d(8, 4, 1, bias=True))
    opt = build_optimizer(model, lr=0.1, momentum=0.9, decay=0.0005)
    decay_of = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert decay_of[id(model[0].weight)] == 0.0005 and decay_of[id(model[2].weight)] == 0.0005
    for p in (model[1].weight, model[1].bias, model[2].bias):
        assert decay_of[id(p)] == 0.0
    assert len(decay_of) == len(list(model.parameters()))

    # One update equals Darknet's: v = m*v - (grad + decay*w) for weights, w += lr*v (biases: no decay term).
    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model(x).square().mean().backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    for name, p in model.named_parameters():
        decay = 0.0005 if name in ("0.weight", "2.weight") else 0.0
        expected = before[name] - 0.1 * (grads[name] + decay * before[name])
        torch.testing.assert_close(p.detach(), expected, rtol=1e-6, atol=1e-7)
