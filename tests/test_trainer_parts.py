"""The trainer is given its parts: a run made of hand-built parts (a model, made-up batches, torch's SGD) trains
exactly as the run the builder makes from a cfg and a dataset YAML; a hook's state goes into ``last.pt`` and comes
back on resume (and a ``last.pt`` written before hooks had states still gives the best fitness back)."""
import os
import signal

import pytest
import torch
import torch.nn as nn

from training_helpers import write_one_head_training
from yolo.engine import RunPlan, TrainingParts, TrainOptions, Trainer, build_training
from yolo.engine.hooks import HookBase
from yolo.engine.hooks.evaluation import fitness
from yolo.engine.rng import seed_everything
from yolo.errors import ConfigError
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.cfg import parse_cfg
from yolo.models.checkpoint import load_checkpoint_file
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
    assert hand.step_log == built_trainer.step_log  # the last update's losses and the epoch's means
    built_weights, hand_weights = built_trainer.model.state_dict(), model.state_dict()
    assert built_weights.keys() == hand_weights.keys()
    for key, value in built_weights.items():
        assert torch.equal(value, hand_weights[key]), key
    assert any(not torch.equal(value, Darknet(parse_cfg(setup / "tiny.cfg")).state_dict()[key])
               for key, value in hand_weights.items() if value.is_floating_point())  # it did train


class CountingHook(HookBase):
    """Counts the updates of the run, resumed ones included (its state)."""

    def __init__(self):
        self.updates = 0

    def after_step(self, trainer) -> None:
        self.updates += 1

    def state_dict(self):
        return {"updates": self.updates}

    def load_state_dict(self, state) -> None:
        self.updates = state["updates"]


def rising_evaluation(self, epoch, final):
    """Stands in for Trainer._evaluate: metrics that rise every epoch (no model run)."""
    metrics = {"mAP50": (epoch + 1) / 10, "mAP50_95": (epoch + 1) / 20, "precision": 0.5, "recall": 0.5}
    self.last_metrics = dict(metrics)
    return metrics


def test_a_hooks_state_survives_a_resume(setup, tmp_path, monkeypatch):
    monkeypatch.setattr(Trainer, "_evaluate", rising_evaluation)
    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP), epochs=2,
                           device="cpu", project=str(tmp_path), name="run", progress=False)
    first = Trainer.from_options(options)
    first.hooks.append(CountingHook())
    first.add_callback("step_end", lambda t: t.request_stop() if t.global_step == 3 else None)
    assert first.fit().status == "interrupted"  # in epoch 2, after its first update
    last = tmp_path / "run" / "last.pt"
    saved = load_checkpoint_file(last)["train"]
    best_after_epoch_1 = fitness(rising_evaluation(type("T", (), {})(), 0, False))
    assert saved["hooks"] == {"EvalHook": {"best_fitness": pytest.approx(best_after_epoch_1)},
                              "CountingHook": {"updates": 3}}
    old_format = tmp_path / "old" / "last.pt"  # as the trainer wrote it before hooks had states
    old_format.parent.mkdir()
    ckpt = load_checkpoint_file(last)
    del ckpt["train"]["hooks"]
    torch.save(ckpt, old_format)
    (old_format.parent / "best.pt").write_bytes((tmp_path / "run" / "best.pt").read_bytes())

    resumed = Trainer.from_options(TrainOptions(resume=str(last), progress=False))
    counter = CountingHook()
    resumed.hooks.append(counter)
    seen = []
    resumed.add_callback("train_start", lambda t: seen.append((t.best_fitness, counter.updates)))
    result = resumed.fit()
    assert seen == [(pytest.approx(best_after_epoch_1), 3)]
    assert result.status == "finished" and result.global_step == 4 and counter.updates == 4
    assert load_checkpoint_file(last)["train"]["hooks"]["CountingHook"] == {"updates": 4}
    assert result.best_fitness == pytest.approx(fitness(rising_evaluation(type("T", (), {})(), 1, True)))

    # The old format: the best fitness comes from its top-level entry; a hook it knew nothing of starts afresh.
    resumed = Trainer.from_options(TrainOptions(resume=str(old_format), progress=False))
    counter = CountingHook()
    resumed.hooks.append(counter)
    seen.clear()
    resumed.add_callback("train_start", lambda t: seen.append((t.best_fitness, counter.updates)))
    result = resumed.fit()
    assert seen == [(pytest.approx(best_after_epoch_1), 0)]
    assert result.global_step == 4 and counter.updates == 1


def test_a_best_fitness_without_its_best_pt_is_dropped_on_resume(setup, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(Trainer, "_evaluate", rising_evaluation)
    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP), epochs=1,
                           device="cpu", project=str(tmp_path), name="run", progress=False)
    Trainer.from_options(options).fit()
    (tmp_path / "run" / "best.pt").unlink()  # as a kill between the two saves of an epoch would leave it
    resumed = Trainer.from_options(TrainOptions(resume=str(tmp_path / "run"), epochs=2, progress=False))
    seen = []
    resumed.add_callback("train_start", lambda t: seen.append(t.best_fitness))
    with caplog.at_level("WARNING"):
        result = resumed.fit()
    assert seen == [-1.0] and "best.pt is missing although last.pt records a best fitness" in caplog.text
    assert result.best is not None and load_checkpoint_file(result.best)["train"]["epoch"] == 2


def test_a_callback_names_a_known_event(setup):
    parts = TrainingParts(model=nn.Linear(1, 1), optimizer=None, schedule=lambda n: 0.0, criterion=None,
                          batches=lambda epoch, first: iter(()), plan=RunPlan(epochs=1, steps_per_epoch=1))
    with pytest.raises(ValueError, match="unknown training event 'step_start'"):
        Trainer(parts).add_callback("step_start", print)
    with pytest.raises(TypeError, match=r"Trainer.from_options\(options\) builds them"):
        Trainer(TrainOptions(cfg=str(setup / "tiny.cfg")))


def test_ctrl_c_while_the_parts_are_built_stops_at_the_first_update(setup, tmp_path, monkeypatch):
    import yolo.engine.trainer as trainer_module

    def interrupted_build(options):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the setup
        return build_training(options)

    monkeypatch.setattr(trainer_module, "build_training", interrupted_build)
    monkeypatch.setattr(Trainer, "_evaluate", rising_evaluation)
    before = signal.getsignal(signal.SIGINT)
    options = TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"), hyp=dict(HYP), epochs=1,
                           device="cpu", project=str(tmp_path), name="run", progress=False)
    result = Trainer.from_options(options).fit()
    assert result.status == "interrupted" and result.global_step == 1 and result.last.is_file()
    assert signal.getsignal(signal.SIGINT) is before  # the run's handlers are gone with it

    with pytest.raises(ConfigError, match="--data is required"):  # a failed build gives the handlers back too
        Trainer.from_options(TrainOptions(cfg=str(setup / "tiny.cfg"), device="cpu", progress=False))
    assert signal.getsignal(signal.SIGINT) is before
