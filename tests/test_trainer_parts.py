"""The trainer is given its parts: a run made of hand-built parts (a model, made-up batches, torch's SGD) trains
exactly as the run the builder makes from a cfg and a dataset YAML; a hook's state goes into ``last.pt`` and comes
back on resume (and a ``last.pt`` written before hooks had states still gives the best fitness back)."""
from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from helpers import cpu_step_runner
from training_helpers import made_up_evaluation, write_one_head_training
from yolo.engine import RunPlan, TrainingParts, TrainOptions, Trainer, build_training
from yolo.engine.hooks import EvalHook
from yolo.engine.hooks.evaluation import fitness
from yolo.engine.rng import seed_everything
from yolo.engine.train_state import TrainState
from yolo.errors import ConfigError
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.cfg import parse_cfg
from yolo.models.model import Darknet

LR = 2.0 ** -7  # a float32 number: the schedule's rate and torch's are the same number
# 8 images, batch 4 in 2 mini-batches of 2: 2 updates per epoch; constant rate, decay on conv weights
HYP = {"workers": 0, "tensorboard": False, "plots": False, "eval_interval": 1, "ema": False, "batch": 4,
       "subdivisions": 2, "burn_in": 0, "policy": "constant", "learning_rate": LR, "momentum": 0.9,
       "decay": 0.0005, "multi_scale": False}

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return write_one_head_training(tmp_path_factory.mktemp("parts"))


def made_up_batches(count: int):
    """``count`` mini-batches of 2 random 64x64 images, each with two boxes (pixels: image, class, cx, cy, w, h)."""
    generator = torch.Generator().manual_seed(11)
    batches = []
    for _ in range(count):
        images = torch.rand(2, 3, 64, 64, generator=generator)
        targets = torch.tensor([[0, 1, 20.0, 24.0, 16.0, 12.0], [1, 3, 40.0, 30.0, 22.0, 30.0]])
        batches.append((images, targets, [{}, {}]))
    return batches


@pytest.mark.slow
def test_a_trainer_given_hand_built_parts_trains_as_the_built_run(setup, tmp_path):
    batches = made_up_batches(4)  # one epoch: 2 updates of 2 mini-batches

    def feed(epoch, first_update):
        return iter(batches[first_update * 2:])

    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP), epochs=1,
                           device="cpu", project=str(tmp_path), name="built", progress=False)
    built = build_training(options)
    assert (built.plan.epochs, built.plan.steps_per_epoch, built.plan.accumulate, built.plan.mini_batch) == (1, 2, 2, 2)
    built.batches = feed  # the same inputs for both runs
    built_trainer = Trainer(built)
    built_result = built_trainer.fit()

    seed_everything(0)  # as the builder does before making the model (TrainOptions.seed)
    model = Darknet(parse_cfg(setup / "tiny.cfg"))
    # Darknet's SGD: decay on the weights of convolutions only, not on biases or BatchNorm scales
    decayed = [p for m in model.modules() for name, p in m.named_parameters(recurse=False)
               if name == "weight" and not isinstance(m, nn.BatchNorm2d)]
    others = [p for p in model.parameters() if all(p is not d for d in decayed)]
    optimizer = torch.optim.SGD([{"params": decayed, "weight_decay": 0.0005}, {"params": others, "weight_decay": 0.0}],
                                lr=LR, momentum=0.9)
    parts = TrainingParts(model=model, optimizer=optimizer, schedule=lambda update: LR, criterion=YoloLoss(model),
                          batches=feed, plan=RunPlan(epochs=1, steps_per_epoch=2, accumulate=2, mini_batch=2),
                          hyp=built.hyp)
    hand = Trainer(parts)
    result = hand.fit()

    assert result.status == built_result.status == "finished"
    assert result.global_step == built_result.global_step == 2
    assert result.run_dir is None and result.last is None and built_result.last.is_file()
    assert hand.state.step_log == built_trainer.state.step_log  # the last update's losses and the epoch's means
    built_weights, hand_weights = built_trainer.parts.model.state_dict(), model.state_dict()
    assert built_weights.keys() == hand_weights.keys()
    for key, value in built_weights.items():
        assert torch.equal(value, hand_weights[key]), key
    assert any(not torch.equal(value, Darknet(parse_cfg(setup / "tiny.cfg")).state_dict()[key])
               for key, value in hand_weights.items() if value.is_floating_point())  # it did train


def test_a_callback_names_a_known_event(setup):
    parts = TrainingParts(model=nn.Linear(1, 1), optimizer=None, schedule=lambda n: 0.0, criterion=None,
                          batches=lambda epoch, first: iter(()), plan=RunPlan(epochs=1, steps_per_epoch=1))
    with pytest.raises(ValueError, match="unknown training event 'step_start'"):
        Trainer(parts).add_callback("step_start", print)
    trainer = Trainer(parts)
    for old, new in (("train_start", "before_train"), ("step_end", "after_step"), ("epoch_end", "after_epoch")):
        with pytest.warns(DeprecationWarning, match=f"'{old}' is now named '{new}'"):
            trainer.add_callback(old, print)  # the earlier names still work
        assert trainer.hooks[-1].event == new
    with pytest.raises(TypeError, match=r"Trainer.from_options\(options\) builds them"):
        Trainer(TrainOptions(cfg=str(setup / "tiny.cfg")))


@pytest.mark.slow
def test_ctrl_c_while_the_parts_are_built_stops_at_the_first_update(setup, tmp_path, monkeypatch):
    import yolo.engine.trainer as trainer_module

    def interrupted_build(options):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the setup
        return build_training(options)

    monkeypatch.setattr(trainer_module, "build_training", interrupted_build)
    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    before = signal.getsignal(signal.SIGINT)
    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP), epochs=1,
                           device="cpu", project=str(tmp_path), name="run", progress=False)
    result = Trainer.from_options(options).fit()
    assert result.status == "interrupted" and result.global_step == 1 and result.last.is_file()
    assert signal.getsignal(signal.SIGINT) is before  # the run's handlers are gone with it

    with pytest.raises(ConfigError, match="--data is required"):  # a failed build gives the handlers back too
        Trainer.from_options(TrainOptions(cfg=str(setup / "tiny.cfg"), device="cpu", progress=False))
    assert signal.getsignal(signal.SIGINT) is before


class NoWritesIntoTheTrainer(Trainer):
    """A trainer that refuses any attribute written on it while its hooks run."""

    in_hooks = False

    def _call_hooks(self, method: str) -> None:
        object.__setattr__(self, "in_hooks", True)
        try:
            super()._call_hooks(method)
        finally:
            object.__setattr__(self, "in_hooks", False)

    def __setattr__(self, name, value):
        if self.in_hooks:
            raise AssertionError(f"a hook wrote trainer.{name}")
        super().__setattr__(name, value)


@pytest.mark.slow
def test_hooks_write_nothing_into_the_trainer_the_evaluation_flows_through_the_state(setup, tmp_path, monkeypatch):
    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP, eval_interval=2),
                           epochs=3, device="cpu", project=str(tmp_path), name="run", progress=False)
    trainer = NoWritesIntoTheTrainer(build_training(options))
    seen = []
    trainer.add_callback("after_epoch", lambda t: seen.append((t.state.epoch, dict(t.state.epoch_metrics),
                                                             t.state.is_best, t.state.best_fitness)))
    result = trainer.fit()
    assert result.status == "finished"
    first, last = made_up_evaluation(None, 1, False), made_up_evaluation(None, 2, True)
    assert seen == [(1, {}, False, -1.0), (2, first, True, pytest.approx(fitness(first))),
                    (3, last, True, pytest.approx(fitness(last)))]  # every 2 epochs and the last
    assert trainer.state.metrics == last and result.metrics == last


def test_the_evaluation_hook_calls_what_it_is_handed_when_due():
    calls = []
    hook = EvalHook(2, evaluate=lambda trainer, epoch, final: calls.append((epoch, final)) or {"mAP50": epoch})
    for done in range(1, 6):
        state = TrainState(epoch=done)
        hook.after_epoch(SimpleNamespace(state=state, parts=SimpleNamespace(plan=RunPlan(epochs=5, steps_per_epoch=1))))
        assert state.metrics == ({"mAP50": done - 1} if done in (2, 4, 5) else {})  # recorded in the state
    assert calls == [(1, False), (3, False), (4, True)]  # 0-based: after epochs 2, 4 and the last


def test_the_step_runner_alone_accumulates_as_plain_pytorch():
    """Two mini-batches to an update: the gradient of their mean loss, torch's SGD step at the schedule's rate."""
    torch.manual_seed(0)
    model, reference = nn.Linear(3, 2), nn.Linear(3, 2)
    reference.load_state_dict(model.state_dict())
    batches = [(torch.rand(4, 3, 1, 1), torch.rand(4, 2)) for _ in range(4)]

    def criterion(outputs, targets, size_hw, images_seen):  # per-image loss, its parts as YoloLoss names them
        loss = (outputs - targets).square().sum() / outputs.shape[0]
        return loss, {"box": loss, "obj": loss * 0, "cls": loss * 0, "num_targets": 4}

    state = TrainState()
    runner = cpu_step_runner(model, torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9), lambda n: 0.1 * n,
                             criterion, accumulate=2, steps_per_epoch=2, state=state,
                             forward=lambda images: model(images.flatten(1)))
    runner.start_epoch()
    updated = [runner.run(images, targets, b) for b, (images, targets) in enumerate(batches)]
    assert updated == [False, True, False, True] and state.global_step == 2 and state.lr == pytest.approx(0.2)

    optimizer = torch.optim.SGD(reference.parameters(), lr=1.0, momentum=0.9)
    for update in (1, 2):
        for images, targets in batches[2 * update - 2:2 * update]:
            ((reference(images.flatten(1)) - targets).square().sum() / 4 / 2).backward()
        for group in optimizer.param_groups:
            group["lr"] = 0.1 * update
        optimizer.step()
        optimizer.zero_grad()
    for a, b in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(a, b, rtol=0, atol=1e-6)
    assert runner.loss_sums[3].item() == 4 and state.step_log.num_targets == 4  # 4 mini-batches summed


def test_a_trainer_of_anything_but_built_parts_is_a_type_error():
    # before: Trainer({}) failed with AttributeError: 'dict' object has no attribute 'options'
    with pytest.raises(TypeError, match=r"Trainer takes the built parts of a run \(TrainingParts\), got dict; to "
                                        r"train from settings: Trainer.from_options"):
        Trainer({})


@pytest.mark.slow
def test_the_trainer_takes_training_options():
    with pytest.raises(TypeError, match=r"^Trainer\.from_options takes a TrainOptions, got NoneType None$"):
        Trainer.from_options(None)
