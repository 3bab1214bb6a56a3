"""Darknet's learning-rate policies and [net] schedule keys, checked against Darknet's own get_current_rate
(through the reference harness), and the optimizer's parameter groups."""
import numpy as np
import pytest
import torch
import torch.nn as nn

from cfg_snippets import RATE_CFG
from darknet_parity import ours_from_cfg
from darknet_ref import set_net_options
from yolo.models.cfg import parse_cfg_text
from yolo.errors import CfgError
from yolo.engine.config import resolve_hyp
from yolo.errors import ConfigError
from yolo.engine.schedule import LRSchedule, burn_in_outlasts_run, read_net_schedule, resolve_steps, schedule_from_hyp
from yolo.engine.optimizer import build_optimizer


# (policy options, number of updates to compare). Each policy with several option sets, burn-in included.
CASES = [
    (dict(policy="constant", learning_rate=0.05), 20),
    (dict(policy="constant", learning_rate=0.01, burn_in=40), 60),
    (dict(policy="constant", learning_rate=0.01, burn_in=30, power=2), 40),
    (dict(policy="step", learning_rate=0.1, burn_in=5, step=7, scale=0.5), 80),
    (dict(policy="step", learning_rate=0.02, step=100, scale=0.1), 350),
    (dict(policy="steps", learning_rate=0.001, burn_in=10, steps="40,80", scales=".1,.1"), 120),
    (dict(policy="steps", learning_rate=0.01, burn_in=10, power=2, steps="20,30,30", scales=".5,2,.1"), 50),
    (dict(policy="steps", learning_rate=0.01, steps="50,25", scales=".1,.5"), 70),        # not increasing
    (dict(policy="steps", learning_rate=0.01, steps="10,20", scales=".1,.2,.3,.4"), 30),  # extra scales unused
    (dict(policy="exp", learning_rate=0.1, gamma=0.99), 1200),
    (dict(policy="exp", learning_rate=0.001, gamma=1.003, burn_in=50), 400),
    (dict(policy="poly", learning_rate=0.1, max_batches=200), 200),
    (dict(policy="poly", learning_rate=0.01, max_batches=1000, power=0.9, burn_in=100), 1000),
    (dict(policy="sigmoid", learning_rate=0.1, gamma=0.2, step=100), 300),
    (dict(policy="sigmoid", learning_rate=0.05, gamma=0.01, step=30, burn_in=10), 100),
    (dict(policy="sgdr", learning_rate=0.01, sgdr_cycle=30, learning_rate_min=0.0001), 250),
    (dict(policy="sgdr", learning_rate=0.02, max_batches=50), 400),                        # cycle = max_batches
    (dict(policy="sgdr", learning_rate=0.01, sgdr_cycle=20, sgdr_mult=1, burn_in=15), 100),
    (dict(policy="sgdr", learning_rate=0.01, sgdr_cycle=10, sgdr_mult=3, learning_rate_min=0.001), 400),
]


@pytest.mark.parametrize("case,updates", CASES, ids=[f"{c['policy']}{i}" for i, (c, _) in enumerate(CASES)])
def test_rate_equals_darknet_at_every_update(darknet, case, updates):
    expected = darknet.rates(RATE_CFG, updates, **case)
    schedule = ours_from_cfg(set_net_options(RATE_CFG, **case))
    ours = np.array([schedule(n) for n in range(updates + 1)])
    assert len(expected) == updates + 1
    # Darknet returns float32: equal to its rounding.
    np.testing.assert_allclose(ours, expected, rtol=2e-7, atol=1e-12)


def test_random_policy_is_seeded_and_distributed_as_darknet(darknet):
    """Darknet draws from rand(): only the distribution can be compared. Ours is a function of (seed, n)."""
    opts = dict(policy="random", learning_rate=0.1, power=2, burn_in=5)
    expected = darknet.rates(RATE_CFG, 4000, **opts)
    schedule = ours_from_cfg(set_net_options(RATE_CFG, **opts))
    ours = np.array([schedule(n) for n in range(4001)])
    np.testing.assert_allclose(ours[:5], expected[:5], rtol=2e-7)  # burn-in is not random
    for rates in (ours[5:], expected[5:]):
        assert rates.min() >= 0 and rates.max() <= 0.1
        # lr * u^2 with u uniform: mean lr/3, median lr/4
        assert abs(rates.mean() - 0.1 / 3) < 0.003 and abs(np.median(rates) - 0.025) < 0.004
    again = ours_from_cfg(set_net_options(RATE_CFG, **opts))
    assert [again(n) for n in range(4001)] == list(ours)
    other = LRSchedule(**{**read_net_schedule(parse_cfg_text(set_net_options(RATE_CFG, **opts))[0]), "seed": 1})
    assert [other(n) for n in range(5, 50)] != list(ours[5:50])


def test_darknet_reads_past_short_scales_and_we_refuse_with_the_line(darknet):
    """steps=10,20,30 with two scales: Darknet's parse_net_options dereferences past the end of the string and
    crashes; ours names the file and the line of scales."""
    with pytest.raises(RuntimeError, match="failed"):
        darknet.rates(RATE_CFG, 3, policy="steps", steps="10,20,30", scales=".1,.1")
    text = set_net_options(RATE_CFG, policy="steps", steps="10,20,30", scales=".1,.1")
    line = text.splitlines().index("scales=.1,.1") + 1
    with pytest.raises(CfgError, match=rf"rate.cfg:{line}: .*3 steps but only 2 scales"):
        ours_from_cfg(text)


@pytest.mark.parametrize("options,message,key", [
    (dict(policy="sig"), "unknown policy 'sig'", "policy"),         # Darknet's name is 'sigmoid'
    (dict(policy="Steps"), "unknown policy 'Steps'", "policy"),     # Darknet compares names case-sensitively
    (dict(policy="steps", steps="0.8,0.9", scales=".1,.1"), "'0.8' is not a whole number", "steps"),
    (dict(policy="steps", steps="100,200,", scales=".1,.1,.1"), "'' is not a whole number", "steps"),
    (dict(policy="steps", steps="100"), "needs both steps and scales", "policy"),
    (dict(policy="sgdr", sgdr_cycle=10, sgdr_mult=0), "sgdr_mult=0", "sgdr_mult"),
    (dict(policy="sgdr", sgdr_cycle=0), "sgdr_cycle=0 must be positive", "sgdr_cycle"),
    (dict(policy="step", step=0), "policy=step needs step > 0", "step"),
    (dict(burn_in=-1), "burn_in=-1", "burn_in"),
])
def test_bad_schedule_keys_are_one_line_errors(options, message, key):
    text = set_net_options(RATE_CFG, **options)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith(key + "="))
    with pytest.raises(CfgError, match=rf"^rate.cfg:{line}: .*{message}"):
        ours_from_cfg(text)


def test_defaults_are_darknets():
    """parse_net_options' defaults: learning_rate .001, power 4, policy constant, sgdr_cycle = max_batches,
    sgdr_mult 2, learning_rate_min .00001, step 1, scale 1, gamma 1, momentum .9, decay .0001, Adam's .9/.999/1e-6."""
    net = parse_cfg_text("[net]\nmax_batches=700\n[convolutional]\nfilters=1\n")[0]
    got = read_net_schedule(net)
    assert got == dict(learning_rate=0.001, max_batches=700, learning_rate_min=0.00001, sgdr_cycle=700, sgdr_mult=2,
                       power=4.0, burn_in=0, step=1, scale=1.0, gamma=1.0, policy="constant", steps=[], scales=[])
    hyp = resolve_hyp(net, [], None, {})
    assert (hyp["momentum"], hyp["decay"], hyp["batch"], hyp["subdivisions"]) == (0.9, 0.0001, 1, 1)
    assert (hyp["adam"], hyp["B1"], hyp["B2"], hyp["eps"]) == (0, 0.9, 0.999, 0.000001)
    # Darknet reads B1/B2/eps only with adam=1 (and with these exact, case-sensitive names).
    net = parse_cfg_text("[net]\nmax_batches=7\nB1=0.5\n[convolutional]\nfilters=1\n")[0]
    assert resolve_hyp(net, [], None, {})["B1"] == 0.9
    net = parse_cfg_text("[net]\nmax_batches=7\nadam=1\nB1=0.5\nB2=0.99\neps=1e-8\n[convolutional]\nfilters=1\n")[0]
    hyp = resolve_hyp(net, [], None, {})
    assert (hyp["adam"], hyp["B1"], hyp["B2"], hyp["eps"]) == (1, 0.5, 0.99, 1e-8)


def test_keys_of_other_policies_are_ignored_as_darknet_ignores_them(darknet):
    """parse_net_options reads steps/scales only for steps and sgdr, step for step and sigmoid, scale for step,
    gamma for exp and sigmoid: a leftover key of another policy changes nothing, even a malformed one."""
    opts = dict(policy="poly", max_batches=50, steps="0.5,x", scales="1,2,3", gamma=0.5, step=3, scale=7)
    expected = darknet.rates(RATE_CFG, 50, **opts)
    schedule = ours_from_cfg(set_net_options(RATE_CFG, **opts))
    assert (schedule.steps, schedule.gamma, schedule.step, schedule.scale) == ([], 1.0, 1, 1.0)
    np.testing.assert_allclose([schedule(n) for n in range(51)], expected, rtol=2e-7, atol=1e-12)


def test_batch_not_a_multiple_of_subdivisions_rounds_down_as_darknet():
    """Darknet: mini-batch = batch / subdivisions (integer), an update = mini-batch * subdivisions images."""
    net = parse_cfg_text("[net]\nbatch=64\nsubdivisions=3\nmax_batches=7\n[convolutional]\nfilters=1\n")[0]
    hyp = resolve_hyp(net, [], None, {})
    assert hyp["batch"] == 63 and hyp["subdivisions"] == 3
    with pytest.raises(ConfigError, match="smaller than subdivisions"):
        resolve_hyp(net, [], {"batch": 2, "subdivisions": 4}, {})


def test_fractional_steps_from_the_hyperparameter_yaml_are_fractions_of_the_run():
    assert resolve_steps([0.8, 0.9, 300, 0], 1000) == [800, 900, 300, 0]
    with pytest.raises(ValueError, match="1.5"):
        resolve_steps([1.5], 1000)
    net = parse_cfg_text("[net]\nlearning_rate=0.02\npolicy=steps\nsteps=5000,6000\nscales=.1,.1\nburn_in=4\n"
                         "max_batches=100\n[convolutional]\nfilters=3\n")[0]
    hyp = resolve_hyp(net, [], {"steps": [0.5, 0.75]}, {})
    schedule = schedule_from_hyp(hyp, total_updates=40)
    assert schedule.steps == [20, 30]
    assert schedule(19) == pytest.approx(0.02) and schedule(20) == pytest.approx(0.002)
    assert schedule(30) == pytest.approx(0.0002)
    with pytest.raises(ConfigError, match="2 steps but only 1 scales"):
        resolve_hyp(net, [], {"scales": [0.1]}, {})


def test_poly_and_sgdr_follow_max_batches_or_else_the_run_length():
    net = parse_cfg_text("[net]\npolicy=poly\nmax_batches=100\n[convolutional]\nfilters=1\n")[0]
    assert schedule_from_hyp(resolve_hyp(net, [], None, {}), total_updates=60).max_batches == 100
    net = parse_cfg_text("[net]\npolicy=sgdr\n[convolutional]\nfilters=1\n")[0]
    schedule = schedule_from_hyp(resolve_hyp(net, [], None, {"epochs": 3}), total_updates=60)
    assert schedule.max_batches == 60 and schedule.sgdr_cycle == 60
    assert schedule(60) == pytest.approx(0.00001)


def test_hyp_precedence_cfg_then_yaml_then_flags(tmp_path):
    net = parse_cfg_text("[net]\nbatch=64\nsubdivisions=2\nlearning_rate=0.001\nmomentum=0.949\ndecay=0.0005\n"
                         "width=416\nheight=416\nmax_batches=2000\nhue=.1\n[convolutional]\nfilters=3\n")[0]
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text("learning_rate: 0.005\nbatch: 32\naugment: {flip: 0.0}\n")
    hyp = resolve_hyp(net, [], hyp_file, {"batch": 16, "img_size": [320, 256], "epochs": None})
    assert hyp["momentum"] == pytest.approx(0.949) and hyp["decay"] == pytest.approx(0.0005)  # cfg
    assert hyp["learning_rate"] == pytest.approx(0.005)  # YAML over cfg
    assert hyp["batch"] == 16 and hyp["subdivisions"] == 2  # flag over YAML over cfg
    assert hyp["img_size"] == (320, 256)
    assert hyp["augment"]["flip"] == 0.0 and hyp["augment"]["hue"] == pytest.approx(0.1)
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rat: 0.1\n")
    with pytest.raises(ConfigError, match="learning_rat"):
        resolve_hyp(net, [], bad, {})
    with pytest.raises(ConfigError, match="unknown learning-rate policy 'sig'"):
        resolve_hyp(net, [], {"policy": "sig"}, {})


# ------------------------------------------------------------------------------------- optimizer groups
def test_sgd_decays_only_conv_weights_and_steps_as_darknet():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.Conv2d(8, 4, 1, bias=True))
    opt = build_optimizer(model, lr=0.1, momentum=0.9, decay=0.0005)
    assert isinstance(opt, torch.optim.SGD)
    decay_of = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert decay_of[id(model[0].weight)] == 0.0005 and decay_of[id(model[2].weight)] == 0.0005
    for p in (model[1].weight, model[1].bias, model[2].bias):
        assert decay_of[id(p)] == 0.0
    assert len(decay_of) == len(list(model.parameters()))

    # Two updates, written out as update_convolutional_layer with the sum over a batch of B images:
    # u += -B * grad; u -= decay * B * w (weights only); w += lr / B * u; u *= momentum.
    torch.manual_seed(0)
    batch = 4
    u = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for _ in range(2):
        x = torch.randn(2, 3, 6, 6)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        for name, p in model.named_parameters():
            u[name] += -batch * p.grad
            if name in ("0.weight", "2.weight"):
                u[name] += -0.0005 * batch * before[name]
            expected = before[name] + 0.1 / batch * u[name]
            u[name] *= 0.9
            torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-7)


def test_adam_decays_every_parameter_and_layers_scale_their_rate():
    from yolo.engine.schedule import set_lr
    from yolo.models.model import Darknet

    cfg = ("[net]\nwidth=16\nheight=16\nchannels=3\n[convolutional]\nfilters=4\nsize=3\nbatch_normalize=1\n"
           "learning_rate=0.5\nactivation=leaky\n[convolutional]\nfilters=2\nsize=1\nactivation=linear\n")
    model = Darknet(parse_cfg_text(cfg))
    opt = build_optimizer(model, lr=0.01, momentum=0.9, decay=0.0005, adam=True, eps=1e-6, batch=8)
    assert isinstance(opt, torch.optim.Adam)
    assert all(g["weight_decay"] == 0.0005 for g in opt.param_groups)
    assert all(g["eps"] == pytest.approx(1e-6 / 8) for g in opt.param_groups)
    set_lr(opt, 0.002)
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    for p in model.module_list[0].parameters():
        assert lr_of[id(p)] == pytest.approx(0.001)
    for p in model.module_list[1].parameters():
        assert lr_of[id(p)] == pytest.approx(0.002)


def test_burn_in_longer_than_the_run_is_warned_about():
    """yolov3-tiny.cfg's burn_in=1000 on a 16-update fine-tuning run: the rate ends at lr * (16/1000)^4 (Darknet's
    burn-in formula), so the run learns almost nothing; the warning says so. A burn-in the run completes is fine."""
    schedule = LRSchedule(learning_rate=0.001, burn_in=1000, power=4, policy="steps", steps=[800, 900],
                          scales=[0.1, 0.1], max_batches=16)
    message = burn_in_outlasts_run(schedule, 16)
    assert message is not None and "burn_in=1000" in message and "16 updates" in message
    assert f"{0.001 * (16 / 1000) ** 4:.3g}" in message  # 6.55e-11
    assert burn_in_outlasts_run(schedule, 1000) is None
    assert burn_in_outlasts_run(LRSchedule(learning_rate=0.001, burn_in=0, max_batches=16), 16) is None


STOCK_NET = ("[net]\nbatch=64\nsubdivisions=1\nwidth=416\nheight=416\nlearning_rate=0.001\nburn_in=1000\n"
             "max_batches=500200\npolicy=steps\nsteps=400000,450000\nscales=.1,.1\n"
             "[convolutional]\nfilters=4\nsize=1\nactivation=linear\n")


def _stock_hyp(flags=None, hyp=None):
    """yolov3-tiny.cfg's [net] schedule (burn_in=1000 of max_batches=500200) resolved with ``flags`` and ``hyp``."""
    net = parse_cfg_text(STOCK_NET)[0]
    return resolve_hyp(net, [], hyp, {"epochs": 3, **(flags or {})})


def test_a_short_fine_tune_keeps_darknets_burn_in_by_default_and_the_warning_names_the_flag(caplog):
    """Darknet ramps for burn_in updates whatever the run's length: 3 epochs of 2 updates on a stock cfg end at
    lr * (6/1000)^4. That stays the default (the run goes on) and the warning names the flag that scales it."""
    import logging

    from yolo.engine.parts import RunPlan
    from yolo.engine.run_plan import run_schedule

    hyp = _stock_hyp()
    assert hyp.scale_burn_in is False
    with caplog.at_level(logging.INFO, logger="yolo"):
        schedule = run_schedule(hyp, RunPlan(epochs=3, steps_per_epoch=2), seed=0, main=True)
    assert schedule.burn_in == 1000
    assert schedule(6) == pytest.approx(0.001 * (6 / 1000) ** 4, rel=1e-5)  # 1.3e-12
    warning = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "burn_in=1000" in r.getMessage()]
    assert len(warning) == 1 and "--scale-burn-in" in warning[0] and "burn_in 0 here" in warning[0], warning


@pytest.mark.parametrize("given", [{"flags": {"scale_burn_in": True}}, {"hyp": {"scale_burn_in": True}}],
                         ids=["flag", "hyp"])
def test_scale_burn_in_gives_burn_in_its_share_of_the_run(given, caplog):
    """--scale-burn-in (or scale_burn_in: true in --hyp): burn_in keeps its share of max_batches. 1000 of 500200
    over 6 updates rounds to none: the first update runs at the full rate; 1000 of 4000 over 400 updates is 100."""
    import logging

    from yolo.engine.parts import RunPlan
    from yolo.engine.run_plan import run_schedule

    hyp = _stock_hyp(**given)
    with caplog.at_level(logging.INFO, logger="yolo"):
        schedule = run_schedule(hyp, RunPlan(epochs=3, steps_per_epoch=2), seed=0, main=True)
    assert schedule.burn_in == 0 and schedule(1) == pytest.approx(0.001)
    assert "scaled to this run's 6 updates: burn_in 0" in caplog.text and "longer than this run" not in caplog.text
    hyp.max_batches = 4000
    schedule = run_schedule(hyp, RunPlan(epochs=4, steps_per_epoch=100), seed=0, main=True)
    assert schedule.burn_in == 100
    assert schedule(50) == pytest.approx(0.001 * (50 / 100) ** 4, rel=1e-5)
    hyp.max_batches = 400  # a run as long as max_batches: burn_in as the cfg says
    assert run_schedule(hyp, RunPlan(epochs=4, steps_per_epoch=100), seed=0, main=True).burn_in == 1000


def test_the_scale_burn_in_flag_reaches_the_hyperparameters():
    from yolo.cli.flags.train import parse_args
    from yolo.cli.flags.common import settings_from
    from yolo.settings.train import TrainOptions

    options = settings_from(parse_args(["--cfg", "c.cfg", "--data", "d.yaml", "--scale-burn-in"]), TrainOptions)
    assert options.hyp_overrides()["scale_burn_in"] is True
    assert _stock_hyp(options.hyp_overrides()).scale_burn_in is True
