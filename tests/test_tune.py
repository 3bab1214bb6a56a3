"""tools/tune.py's search on generated shapes (8 train and 2 val images of 64-80 px, a one-head cfg, 2 updates an
epoch): a stopped study resumes where it stopped (the interrupted trial from its last.pt), a diverging trial is
pruned and recorded, the best hyp file trains as it is, and two processes on one SQLite study each run their own
trials."""
import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import one_line_error
from training_helpers import HYP, read_results, train_state, write_one_head_training
from yolo.cli.flags.train import parse_args as train_args
from yolo.cli.flags.tune import parse_args
from yolo.cli.train import main as train_main
from yolo.cli.tune import main
from yolo.engine.tuner import EpochScores, Tuner, tune
from yolo.models.cfg import parse_cfg_text
from yolo.settings.tune import TuneOptions

optuna = pytest.importorskip("optuna", reason="the hyperparameter search needs Optuna (pip install -e '.[tune]')")

REPO = Path(__file__).resolve().parent.parent
# A small space: the defaults with the burn-in (longer than these runs) left out and the learning rate kept sane.
SPACE = "learning_rate: [0.0005, 0.01]\nburn_in: null\n"


@pytest.fixture
def shapes(tmp_path):
    folder = write_one_head_training(tmp_path, hyp={**HYP, "augment": {"pipeline": "affine"}})
    (folder / "space.yaml").write_text(SPACE)
    return folder


def settings(folder: Path, **overrides) -> dict:
    return {"cfg": str(folder / "tiny.cfg"), "data": str(folder / "data.yaml"), "hyp": str(folder / "hyp.yaml"),
            "space": str(folder / "space.yaml"), "epochs": 2, "device": "cpu", "project": str(folder / "runs"),
            "name": "s", "progress": False, **overrides}


# Darknet's defaults of the [yolo] gains (src/parser.c parse_yolo)
DARKNET_GAINS = {"iou_normalizer": 0.75, "obj_normalizer": 1.0, "cls_normalizer": 1.0}


def gains_of(cfg_text: str) -> dict:
    """The gains the [yolo] head of a one-head cfg sets."""
    (head,) = [s for s in parse_cfg_text(cfg_text) if s.type == "yolo"]
    return {k: float(head.options[k]) for k in DARKNET_GAINS}


def trials_of(folder: Path):
    storage = f"sqlite:///{folder / 'study.db'}"
    return optuna.load_study(study_name=folder.name, storage=storage).get_trials(deepcopy=False)


@pytest.mark.slow
def test_a_stopped_study_resumes_where_it_stopped_and_its_best_hyp_file_trains(shapes, monkeypatch, capsys):
    reported = EpochScores.report

    def sigterm_after_trial_1_epoch_1(self, trainer):  # as `kill -TERM` during the second trial
        reported(self, trainer)
        if self.trial.number == 1 and trainer.state.epoch == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(EpochScores, "report", sigterm_after_trial_1_epoch_1)
    first = tune(**settings(shapes, trials=2))
    assert (first.status, first.stopped_by) == ("interrupted", "SIGTERM")
    folder = first.folder
    states = [(t.number, t.state.name, t.user_attrs.get("note", "")) for t in trials_of(folder)]
    assert states == [(0, "COMPLETE", ""), (1, "FAIL", "interrupted")]
    stopped = folder / "trial1"
    assert (stopped / "last.pt").is_file() and len(read_results(stopped)) == 1
    epoch_1 = read_results(stopped)[0]

    monkeypatch.setattr(EpochScores, "report", reported)
    # --resume takes the study's settings: neither the cfg nor the space is given again
    second = Tuner(TuneOptions(resume=True, project=str(shapes / "runs"), name="s", device="cpu",
                               progress=False)).run()
    assert second.status == "finished" and second.folder == folder
    trials = trials_of(folder)
    assert [(t.number, t.state.name) for t in trials] == [(0, "COMPLETE"), (1, "FAIL"), (2, "COMPLETE")]
    # trial 2 is trial 1 continued from its last.pt: the same values, the same run folder, its first epoch kept
    assert trials[2].params == trials[1].params and trials[2].user_attrs["run_dir"] == str(stopped)
    rows = read_results(stopped)
    assert [r["epoch"] for r in rows] == ["1", "2"] and rows[0] == epoch_1
    assert not (folder / "trial2").exists()
    assert trials[2].value == max(float(r["mAP50"]) for r in rows)

    with open(folder / "trials.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["state"] for r in table] == ["COMPLETE", "FAIL", "COMPLETE"]
    assert {"learning_rate", "augment.hue", "momentum"} <= set(table[0]) and "burn_in" not in table[0]
    assert (folder / "trials.png").stat().st_size > 0

    best = yaml.safe_load((folder / "best_hyp.yaml").read_text())
    winner = max((t for t in trials if t.state.name == "COMPLETE"), key=lambda t: t.value)
    assert best["learning_rate"] == winner.params["learning_rate"]
    assert best["augment"]["hue"] == winner.params["augment.hue"] and best["augment"]["pipeline"] == "affine"
    # the loss gains (searched by default) are cfg keys: in best.cfg, not in the --hyp file
    assert not any(k.startswith("gain") for k in best) and "--cfg best.cfg --hyp best_hyp.yaml" in \
        (folder / "best_hyp.yaml").read_text().splitlines()[0]
    # each trial trained from its cfg with its gains times the head's (Darknet's defaults: the cfg sets none)
    for t in (trials[0], trials[2]):
        assert gains_of(train_state(Path(t.user_attrs["run_dir"]))["cfg"]) == pytest.approx(
            {k: DARKNET_GAINS[k] * t.params[f"gain.{k}"] for k in DARKNET_GAINS}, rel=1e-5)
    # tools/train.py takes the files as they are
    status = train_main(train_args([str(a) for a in (
        "--cfg", folder / "best.cfg", "--data", shapes / "data.yaml", "--hyp", folder / "best_hyp.yaml",
        "--epochs", 1, "--device", "cpu", "--project", shapes / "train", "--no-progress")]))
    assert status == 0
    assert float(yaml.safe_load((shapes / "train/exp/hyp.yaml").read_text())["learning_rate"]) == \
        pytest.approx(winner.params["learning_rate"])
    assert gains_of((shapes / "train/exp/cfg.cfg").read_text()) == pytest.approx(
        {k: DARKNET_GAINS[k] * winner.params[f"gain.{k}"] for k in DARKNET_GAINS}, rel=1e-5)


@pytest.mark.slow
def test_a_diverging_trial_is_pruned_and_recorded_and_the_search_goes_on(shapes):
    # a learning rate of 1e25 and more makes the loss infinite at the second update
    (shapes / "space.yaml").write_text("learning_rate: [1.0e25, 1.0e30]\nburn_in: null\n")
    result = tune(**settings(shapes, trials=2, epochs=1))
    assert result.status == "finished" and result.best_trial is None
    trials = trials_of(result.folder)
    assert [t.state.name for t in trials] == ["PRUNED", "PRUNED"]
    assert all(t.user_attrs["note"].startswith("diverged: ") and "loss" in t.user_attrs["note"] for t in trials)
    with open(result.folder / "trials.csv", newline="") as f:
        assert [r["note"][:9] for r in csv.DictReader(f)] == ["diverged:", "diverged:"]
    assert not (result.folder / "best_hyp.yaml").exists()


@pytest.mark.slow
def test_two_processes_on_one_sqlite_study_never_run_the_same_trial(shapes):
    folder = Tuner(TuneOptions(**settings(shapes, trials=3, epochs=1))).folder  # the study, no trial yet
    command = [sys.executable, str(REPO / "tools" / "tune.py"), "--resume", "--project", str(shapes / "runs"),
               "--name", "s", "--device", "cpu", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    processes = [subprocess.Popen(command, cwd=shapes, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]
    errors = [p.communicate(timeout=600)[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], errors
    trials = trials_of(folder)
    # Both processes may ask for a trial while the study counts 2: a fourth trial then runs. The median pruner
    # (3 startup trials) may stop the third or fourth once 3 are complete; the first two always complete.
    assert len(trials) >= 3 and [t.state.name for t in trials[:2]] == ["COMPLETE", "COMPLETE"]
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in trials), [t.state.name for t in trials]
    run_dirs = [Path(t.user_attrs["run_dir"]) for t in trials]
    # each trial its own run folder, trialN after its number, trained once (one results row for its one epoch)
    assert [d.name for d in run_dirs] == [f"trial{t.number}" for t in trials]
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(d.name for d in run_dirs)
    assert all(len(read_results(d)) == 1 for d in run_dirs)


@pytest.mark.slow
def test_resume_without_a_study_and_a_study_name_taken_are_one_line_errors(shapes, capsys):
    runs = shapes / "runs"
    err = one_line_error(capsys, lambda: main(parse_args(["--resume", "--project", str(runs), "--name", "none"])))
    assert "--resume: no study at" in err and not runs.exists()
    storage = f"sqlite:///{shapes / 'shared.db'}"
    Tuner(TuneOptions(**settings(shapes, storage=storage)))  # creates the study 's' in shared.db
    again = ["--cfg", str(shapes / "tiny.cfg"), "--data", str(shapes / "data.yaml"), "--storage", storage,
             "--project", str(runs), "--name", "s"]
    err = one_line_error(capsys, lambda: main(parse_args(again)))
    assert "a study 's' is already in" in err and "--resume continues it" in err
    assert sorted(p.name for p in runs.iterdir()) == ["s"]  # the refused one left no folder (s2) behind
