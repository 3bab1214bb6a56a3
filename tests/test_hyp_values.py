"""Hyperparameter values that would crash a run later or train on garbage (yolo.engine.config.resolve_hyp):
each is one ConfigError line naming the --hyp file (or the cfg's file and line) and the key; the schedules
Darknet trains without a word (a rate of 0, steps out of order) are one warning line."""
import logging
from typing import Optional

import pytest
import yaml

from cfg_snippets import ONE_HEAD_CFG
from helpers import one_line_error
from training_helpers import HYP, write_one_head_training
from yolo.cli import train as train_cli
from yolo.engine.config import resolve_hyp
from yolo.engine.parts import RunPlan
from yolo.engine.run_plan import run_schedule
from yolo.errors import ConfigError
from yolo.models.cfg import parse_cfg_text

STEPS = "policy: steps\nmax_batches: 100\n"
RANGE_WORDS = "must be two numbers [low, high] with 0 < low <= 1 <= high (factors of the input side)"


def resolve(tmp_path, hyp_text: str, cfg: str = ONE_HEAD_CFG, flags: Optional[dict] = None):
    """resolve_hyp on ``cfg`` (as tiny.cfg; ONE_HEAD_CFG) and ``hyp_text`` written to ``tmp_path/hyp.yaml``;
    ``flags`` default to ``--epochs 1``."""
    sections = parse_cfg_text(cfg, "tiny.cfg")
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text(hyp_text + "\n")
    return resolve_hyp(sections[0], sections[-1:], hyp_file, {"epochs": 1} if flags is None else flags)


def error_of(tmp_path, hyp_text: str, cfg: str = ONE_HEAD_CFG, flags: Optional[dict] = None) -> str:
    """The ConfigError's message, ``tmp_path/hyp.yaml`` written as ``HYP``."""
    with pytest.raises(ConfigError) as info:
        resolve(tmp_path, hyp_text, cfg, flags)
    return str(info.value).replace(str(tmp_path / "hyp.yaml"), "HYP")


@pytest.mark.parametrize("hyp_text, expected", [
    # ranges of the trainer's own keys
    ("ema: true\nema_tau: 0", "HYP: ema_tau=0.0 is out of range: it must be above 0"),
    ("max_steps_per_epoch: -3",
     "HYP: max_steps_per_epoch=-3 is out of range: it must be at least 1 (leave it out, or null, for no cap)"),
    ("max_steps_per_epoch: 0",
     "HYP: max_steps_per_epoch=0 is out of range: it must be at least 1 (leave it out, or null, for no cap)"),
    ("workers: -2", "HYP: workers=-2 is out of range: it must be between 0 and 64 (as --workers)"),
    ("max_batches: -5", "HYP: max_batches=-5 is out of range: it must be 0 or more"),
    # multi_scale_range
    ("multi_scale: true\nmulti_scale_range: 0.5", f"HYP: multi_scale_range=0.5 {RANGE_WORDS}"),
    ("multi_scale: true\nmulti_scale_range: [0.5, 1.0, 2.0]", f"HYP: multi_scale_range=[0.5, 1.0, 2.0] {RANGE_WORDS}"),
    ("multi_scale: true\nmulti_scale_range: [-1.0, -0.5]", f"HYP: multi_scale_range=[-1.0, -0.5] {RANGE_WORDS}"),
    ("multi_scale: true\nmulti_scale_range: [a, b]", f"HYP: multi_scale_range=['a', 'b'] {RANGE_WORDS}"),
    # policy steps
    (STEPS + "steps: 'a,b'\nscales: [0.1, 0.1]", "HYP: steps='a,b' holds 'a', which is not a number"),
    (STEPS + "steps: [{a: 1}]\nscales: [0.1]", "HYP: steps=[{'a': 1}] holds {'a': 1}, which is not a number"),
    (STEPS + "steps: [50]\nscales: [.nan]", "HYP: scales=[nan] holds nan, which is not a finite number"),
    (STEPS + "steps: [50]\nscales: [.inf]", "HYP: scales=[inf] holds inf, which is not a finite number"),
    # booleans: a text is not read as true
    ("ema: 'false'", "HYP: ema='false' is not a boolean (true or false)"),
    ("tensorboard: 'no'", "HYP: tensorboard='no' is not a boolean (true or false)"),
    ("multi_scale: 'false'", "HYP: multi_scale='false' is not a boolean (true or false)"),
    ("amp: 'false'", "HYP: amp='false' is not a boolean (true or false)"),
    ("amp: 2", "HYP: amp=2 is not a boolean (true or false)"),
    # integers: neither cut nor taken from a boolean
    ("batch: true", "HYP: batch=True is not an integer"),
    ("batch: 4.9", "HYP: batch=4.9 is not a whole number"),
    ("eval_interval: 1.5", "HYP: eval_interval=1.5 is not a whole number"),
    ("learning_rate: true", "HYP: learning_rate=True is not a number"),
    # augmentation values that drop every box, and a value that is not a number
    ("augment: {pipeline: affine, min_visible: 2}", "HYP: augmentation min_visible=2.0 must be in [0, 1] (the "
     "fraction of a box's area that must stay in the image: above 1 drops every box)"),
    ("augment: {pipeline: affine, translate: 5}", "HYP: augmentation translate=5.0 must be < 1 (the shift is drawn "
     "from [-t, t] times the input side: 1 or more moves the image out of the input)"),
    ("augment: {pipeline: affine, mosaic: true, min_side: 100}",
     "HYP: augment.min_side=100 is larger than the input image (64x64): every box would be dropped"),
    ("augment: {hue: abc}", "HYP: augment.hue='abc' is not a number"),
    ("augment: {hue: .nan}", "HYP: augment.hue=nan is not a finite number"),
    # batch against subdivisions, both from the --hyp file
    ("batch: 4\nsubdivisions: 8", "HYP: batch=4 is smaller than subdivisions=8"),
])
def test_a_bad_value_is_one_line_naming_the_file_and_key(tmp_path, hyp_text, expected):
    assert error_of(tmp_path, hyp_text) == expected


@pytest.mark.parametrize("hyp_text, cfg_change, expected", [
    (STEPS + "steps: [50, 80]\nscales: [0.1, -0.1]", None,
     "HYP: scales=[0.1, -0.1] holds -0.1: a negative scale makes the learning rate negative"),
    ("policy: step\nscale: -0.5", None, "HYP: scale=-0.5 is out of range: it must be 0 or more (with policy=step a "
     "negative value makes the learning rate negative)"),
    ("policy: sgdr\nmax_batches: 100\nlearning_rate_min: -1", None, "HYP: learning_rate_min=-1 is out of range: it "
     "must be 0 or more (with policy=sgdr a negative value makes the learning rate negative)"),
    ("{}", ("policy=constant", "policy=exp\ngamma=-1"), "tiny.cfg:10: gamma=-1 is out of range: it must be 0 or "
     "more (with policy=exp a negative value makes the learning rate negative)"),
    ("{}", ("subdivisions=1", "subdivisions=8"), "tiny.cfg:3: batch=4 is smaller than subdivisions=8 (tiny.cfg:4)"),
])
def test_a_schedule_that_makes_the_rate_negative_is_refused(tmp_path, hyp_text, cfg_change, expected):
    cfg = ONE_HEAD_CFG.replace(*cfg_change) if cfg_change else ONE_HEAD_CFG
    assert error_of(tmp_path, hyp_text, cfg) == expected


def test_epochs_in_the_hyp_are_a_whole_number(tmp_path):
    assert error_of(tmp_path, "epochs: 1.9", flags={}) == "HYP: epochs=1.9 is not a whole number"
    assert error_of(tmp_path, "epochs: 0", flags={}) == "HYP: epochs=0 is out of range: it must be at least 1"
    assert resolve(tmp_path, "epochs: 2.0", flags={}).epochs == 2


def test_valid_spellings_keep_their_meaning(tmp_path):
    hyp = resolve(tmp_path, "ema: 0\namp: no\nmulti_scale: true\ntensorboard: 1\nbatch: 8.0\n"
                            "max_steps_per_epoch: null\nworkers: 0\nmulti_scale_range: [0.5, 1]\n"
                            + STEPS + "steps: '50,80'\nscales: [0.0, 0.1]")
    assert (hyp.ema, hyp.amp, hyp.multi_scale, hyp.tensorboard) == (False, False, True, True)
    assert type(hyp.batch) is int and hyp.batch == 8
    assert hyp.max_steps_per_epoch is None and hyp.workers == 0 and hyp.multi_scale_range == [0.5, 1.0]
    assert hyp.steps == [50.0, 80.0] and hyp.scales == [0.0, 0.1]  # a scale of 0 is Darknet's rate of 0


def schedule_warnings(tmp_path, caplog, hyp_text: str, cfg: str = ONE_HEAD_CFG) -> list:
    """The warning lines of run_schedule for a 10-update run."""
    hyp = resolve(tmp_path, hyp_text, cfg)
    with caplog.at_level(logging.WARNING, logger="yolo.engine.run_plan"):
        run_schedule(hyp, RunPlan(epochs=1, steps_per_epoch=10), seed=0, main=True)
    return [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]


def test_steps_out_of_order_keep_darknets_rule_with_one_warning(tmp_path, caplog):
    warnings = schedule_warnings(tmp_path, caplog, STEPS + "steps: [0.9, 0.5]\nscales: [0.5, 0.1]")
    assert warnings == ["lr steps [9, 5] are not in increasing order: as in Darknet, the scales apply in the listed "
                        "order and stop at the first step not yet reached, so a step after a larger one waits for it"]


def test_steps_in_order_and_a_rate_above_0_give_no_warning(tmp_path, caplog):
    assert schedule_warnings(tmp_path, caplog, STEPS + "steps: [0.5, 0.9]\nscales: [0.5, 0.1]") == []


def test_a_learning_rate_of_0_in_the_cfg_is_one_warning(tmp_path, caplog):
    cfg = ONE_HEAD_CFG.replace("learning_rate=0.001", "learning_rate=0")
    assert schedule_warnings(tmp_path, caplog, "{}", cfg) == [
        "learning_rate=0: the weights never change (Darknet trains so too); set learning_rate in the cfg's [net] "
        "or in --hyp"]


@pytest.mark.slow
def test_the_train_tool_gives_the_range_error_as_one_line(tmp_path, capsys):
    folder = write_one_head_training(tmp_path)
    (folder / "hyp.yaml").write_text(yaml.safe_dump({**HYP, "ema": True, "ema_tau": 0}))
    args = train_cli.parse_args(["--cfg", str(folder / "tiny.cfg"), "--data", str(folder / "data.yaml"),
                                 "--hyp", str(folder / "hyp.yaml"), "--epochs", "1", "--device", "cpu",
                                 "--project", str(tmp_path / "runs"), "--no-progress"])
    err = one_line_error(capsys, lambda: train_cli.main(args))
    assert err == f"error: {folder / 'hyp.yaml'}: ema_tau=0.0 is out of range: it must be above 0"
