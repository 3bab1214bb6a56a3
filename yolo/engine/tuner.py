"""Hyperparameter search on Optuna: each trial is one ordinary training run, scored by its own evaluation.

::

    from yolo.engine import tune
    result = tune(cfg="configs/yolov3-tiny-shapes.cfg", data="configs/shapes.yaml", hyp="configs/hyp.shapes.yaml",
                  trials=20, epochs=10, device="cpu")
    print(result.best_value, result.best_hyp)     # runs/tune/exp/best_hyp.yaml: tools/train.py --hyp takes it

Why Optuna: a maintained library whose study lives in a database (SQLite by default, any SQLAlchemy URL to share
one study between machines), with TPE sampling and pruning from per-epoch reports, and an ask-and-tell interface
that leaves the training loop, its signals and its run folders to the trainer.

A search is a folder ``runs/tune/NAME`` (:class:`yolo.settings.tune.TuneOptions`) holding ``study.db``, one run
folder per trial (``trial0``, ``trial1``, ...: ``results.csv``, ``best.pt``, ``last.pt`` as any training run), and
``trials.csv``, ``trials.png`` and ``best_hyp.yaml`` (:mod:`yolo.engine.tune_report`), rewritten after each trial.
A trial that draws loss gains (``gain.KEY``) trains from its own cfg ``trialN.cfg`` (:mod:`yolo.engine.tune_gains`),
and the best one's is ``best.cfg``: ``tools/train.py --cfg best.cfg --hyp best_hyp.yaml`` trains as it did.

* The space: :mod:`yolo.engine.tune_space` (the declared ranges, the defaults, the ``--space`` file).
* The score: the best value of ``metric`` (a column of ``results.csv``) over the trial's epochs, the one its
  ``best.pt`` holds (a loss column: its lowest). Each epoch's value is reported to the study: the median pruner
  stops a trial whose score falls below the median of the earlier trials at that epoch (state ``PRUNED``).
* A trial whose loss becomes NaN or infinite (the trainer stops it with
  :class:`~yolo.errors.NonFiniteLossError`) is recorded as ``PRUNED`` with the message in its note.
* Ctrl-C, SIGTERM or SIGHUP stop the trial in progress as they stop a training run (``last.pt`` saved), and the
  search after it: the trial is recorded ``FAIL`` with the note ``interrupted``; ``resume=True`` continues the
  study, that trial first, from its ``last.pt``, with the same hyperparameters.
* ``trials`` counts the study's trials of every process: several processes (``resume=True``, one ``storage``)
  share the work, each trial drawn and run by one of them (a few may run one trial more than ``trials`` when
  they ask at the same moment).
"""
from __future__ import annotations

import csv
import logging
import math
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from yolo.engine.config import read_hyp
from yolo.engine.hooks.writers import RESULTS_COLUMNS, RESULTS_TIME_COLUMNS
from yolo.engine.trainer import Trainer
from yolo.engine.tune_report import (best_heading, hyp_with, trial_rows, write_best_hyp, write_trials_csv,
                                     write_trials_plot)
from yolo.engine.tune_gains import gain_multipliers, has_gain_heads, write_cfg_with_gains
from yolo.engine.tune_space import Param, read_space
from yolo.errors import ConfigError, NonFiniteLossError
from yolo.data.worker_signals import STOP_SIGNALS
from yolo.runs import increment_path, remove_if_empty, run_name
from yolo.settings.declare import with_settings_signature
from yolo.settings.train import TrainOptions
from yolo.settings.tune import DEFAULT_EPOCHS, DEFAULT_METRIC, DEFAULT_TRIALS, TuneOptions

try:
    import optuna
except ImportError:  # optional dependency: pip install "yolo-darknet[tune]"
    optuna = None

logger = logging.getLogger(__name__)

INSTALL_HINT = 'the hyperparameter search needs Optuna: pip install "yolo-darknet[tune]" (or pip install optuna)'
NOT_METRICS = ("epoch", "lr", *RESULTS_TIME_COLUMNS)  # results.csv columns that score nothing
INTERRUPTED = "interrupted"


@dataclass
class TuneResult:
    """What :func:`tune` returns: the tune folder, the study's name, its best trial (None while no trial
    finished), the files written, and how the search ended (``status`` ``finished`` or ``interrupted``, then
    ``stopped_by`` names the signal)."""

    folder: Path
    study_name: str
    metric: str
    trials: int  # trials in the study, of every process
    best_trial: Optional[int]
    best_value: Optional[float]
    best_params: Dict[str, Any]
    best_hyp: Optional[Path]
    status: str
    stopped_by: str = ""
    best_cfg: Optional[Path] = None  # the cfg with the best trial's loss gains (None: no gain was searched)


def metric_columns() -> List[str]:
    """The ``results.csv`` columns a search may be scored by."""
    return [c for c in RESULTS_COLUMNS if c not in NOT_METRICS]


def check_metric(metric: str) -> str:
    """``metric`` when it is a column of :func:`metric_columns`; else a one-line :class:`ConfigError`."""
    if metric not in metric_columns():
        raise ConfigError(f"--metric {metric!r} is not a column of results.csv that scores a run (choose one of "
                          f"{', '.join(metric_columns())})")
    return metric


def direction(metric: str) -> str:
    """``minimize`` for a loss column, ``maximize`` for the evaluation's."""
    return "minimize" if metric.endswith("loss") else "maximize"


class Tuner:
    """One process's part of a search (:func:`tune` is ``Tuner(options).run()``).

    A new search checks its options, then creates its folder and study, and records them in the study (under the
    key ``settings``, as studies have always held them: cfg, data, weights, the ``--hyp`` values, the space, epochs,
    metric, trials, batch size, input size, seed); ``resume`` loads the study and takes each of these not given
    from the record. ``study_options`` holds them, as given or recorded."""

    def __init__(self, options: TuneOptions):
        if optuna is None:
            raise ConfigError(INSTALL_HINT)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.options = o = options
        self.stop_signal: Optional[str] = None
        self.folder = self.study = None
        recorded: Dict[str, Any] = {}
        if o.resume:
            self.folder, self.study = self._load_study()
            recorded = self.study.user_attrs.get("settings", {})
        self.study_options = s = {key: getattr(o, key) if getattr(o, key) is not None else recorded.get(key, default)
                                   for key, default in (("cfg", None), ("data", None), ("weights", None),
                                                        ("batch_size", None), ("img_size", None),
                                                        ("epochs", DEFAULT_EPOCHS), ("trials", DEFAULT_TRIALS),
                                                        ("metric", recorded.get("metric", DEFAULT_METRIC)))}
        s["seed"] = recorded.get("seed", o.seed)
        self.metric = check_metric(s["metric"])
        if o.resume and recorded.get("metric", self.metric) != self.metric:
            raise ConfigError(f"--metric {self.metric}: the study '{self.study.study_name}' is scored by "
                              f"{recorded['metric']}")
        if s["cfg"] is None or s["data"] is None:
            raise ConfigError("--cfg and --data are required (or --resume a search)")
        self.base_hyp = read_hyp(o.hyp) if o.hyp is not None else dict(recorded.get("hyp", {}))
        augment = self.base_hyp.get("augment") or {}
        pipeline = augment.get("pipeline", "darknet") if isinstance(augment, dict) else "darknet"
        if o.space is None and "space" in recorded:
            self.space = [Param(d["key"], {"int": int, "float": float}[d["kind"]], d["low"], d["high"], d["log"])
                          for d in recorded["space"]]
        else:
            self.space = read_space(o.space, pipeline, gains=has_gain_heads(Path(s["cfg"])))
        if not o.resume:
            self.folder, self.study = self._create_study()
            img_size = list(s["img_size"]) if s["img_size"] is not None else None
            space = [{"key": p.key, "kind": p.kind.__name__, "low": p.low, "high": p.high, "log": p.log}
                     for p in self.space]
            self.study.set_user_attr("settings", {**s, "img_size": img_size, "hyp": self.base_hyp, "space": space})
            self.study.set_user_attr("metric", self.metric)

    # ---------------------------------------------------------------- the study
    def _storage(self, folder: Path):
        url = self.options.storage or f"sqlite:///{(folder / 'study.db').resolve()}"
        # several processes on one SQLite file wait for its lock instead of failing at once
        kwargs = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
        return url, optuna.storages.RDBStorage(url, engine_kwargs=kwargs)

    def _study_name(self, folder: Path) -> str:
        return folder.name if self.options.storage is None else run_name(self.options.name)

    @staticmethod
    def _sampler_and_pruner():
        return optuna.samplers.TPESampler(), optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1)

    def _load_study(self):
        o = self.options
        folder = Path(o.project) / run_name(o.name)
        if o.storage is None and not (folder / "study.db").is_file():
            raise ConfigError(f"--resume: no study at {folder / 'study.db'}: start it without --resume")
        created = not folder.is_dir()
        folder.mkdir(parents=True, exist_ok=True)
        url, storage = self._storage(folder)
        sampler, pruner = self._sampler_and_pruner()
        try:
            study = optuna.load_study(study_name=self._study_name(folder), storage=storage, sampler=sampler,
                                      pruner=pruner)
        except KeyError:
            if created:
                remove_if_empty(folder)
            raise ConfigError(f"--resume: no study '{self._study_name(folder)}' in {url}: start it without "
                              f"--resume") from None
        return folder, study

    def _create_study(self):
        o = self.options
        folder = increment_path(Path(o.project) / run_name(o.name))
        url, storage = self._storage(folder)
        sampler, pruner = self._sampler_and_pruner()
        try:
            study = optuna.create_study(study_name=self._study_name(folder), storage=storage, sampler=sampler,
                                        pruner=pruner, direction=direction(self.metric))
        except optuna.exceptions.DuplicatedStudyError:
            remove_if_empty(folder)
            raise ConfigError(f"a study '{self._study_name(folder)}' is already in {url}: --resume continues "
                              f"it") from None
        return folder, study

    def _counted(self) -> int:
        """The study's trials run or running, but the interrupted ones (each continues in a trial queued for it)."""
        return sum(1 for t in self.study.get_trials(deepcopy=False)
                   if t.state != optuna.trial.TrialState.WAITING and t.user_attrs.get("note") != INTERRUPTED)

    def _requeue_interrupted(self) -> None:
        """Each interrupted trial not continued yet, queued again to go on from its ``last.pt``."""
        trials = self.study.get_trials(deepcopy=False)
        continued = {t.user_attrs.get("resume_from") for t in trials}
        for t in trials:
            last = t.user_attrs.get("last")
            if t.user_attrs.get("note") == INTERRUPTED and last and last not in continued and Path(last).is_file():
                self.study.enqueue_trial(t.params, user_attrs={"resume_from": last, "continues": t.number},
                                         skip_if_exists=False)

    # ---------------------------------------------------------------- the search
    def run(self) -> TuneResult:
        if self.options.resume:
            self._requeue_interrupted()
        previous = self._install_handlers()
        try:
            while self.stop_signal is None and self._counted() < self.study_options["trials"]:
                self._run_trial(self.study.ask())
                self.write_reports()
        finally:
            self._restore_handlers(previous)
        self.write_reports()
        return self._result()

    def _run_trial(self, trial) -> None:
        params = {p.key: self._suggest(trial, p) for p in self.space}
        resume_from = trial.user_attrs.get("resume_from")
        trainer = None
        try:
            trainer = Trainer.from_options(self._train_options(trial.number, params, resume_from))
            trial.set_user_attr("run_dir", str(trainer.parts.run_dir))
            scores = EpochScores(trial, self.metric, trainer.parts.run_dir / "results.csv")
            trainer.add_callback("after_epoch", scores.report)
            result = trainer.fit()
        except NonFiniteLossError as exc:
            trial.set_user_attr("note", f"diverged: {exc}")
            logger.warning("trial %d diverged (pruned): %s", trial.number, exc)
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return
        except BaseException as exc:  # a setting every trial shares is wrong, or a second Ctrl-C: the search stops
            trial.set_user_attr("note", INTERRUPTED if isinstance(exc, KeyboardInterrupt) else f"failed: {exc}")
            if trainer is not None and trainer.parts.run_dir is not None and (trainer.parts.run_dir / "last.pt").is_file():
                trial.set_user_attr("last", str(trainer.parts.run_dir / "last.pt"))
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        if result.status == "interrupted" and scores.pruned:
            trial.set_user_attr("note", f"pruned after epoch {scores.last_epoch}")
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif result.status == "interrupted":
            self.stop_signal = result.stopped_by or "request"
            trial.set_user_attr("note", INTERRUPTED)
            trial.set_user_attr("last", str(result.last))
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        elif scores.best is None:
            trial.set_user_attr("note", f"no {self.metric} in its results.csv")
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, scores.best)
            logger.warning("trial %d: %s %.4f (%s)", trial.number, self.metric, scores.best,
                           ", ".join(f"{k}={v:.4g}" for k, v in params.items()))

    @staticmethod
    def _suggest(trial, p: Param):
        if p.kind is int:
            return trial.suggest_int(p.key, int(p.low), int(p.high), log=p.log)
        return trial.suggest_float(p.key, p.low, p.high, log=p.log)

    def _train_options(self, number: int, params: Dict[str, Any], resume_from: Optional[str]) -> TrainOptions:
        o, s = self.options, self.study_options
        common = dict(device=o.device, workers=o.workers, progress=o.progress)
        if resume_from is not None:  # the run goes on with its own saved settings
            return TrainOptions(resume=resume_from, epochs=s["epochs"], **common)
        img_size = tuple(s["img_size"]) if s["img_size"] is not None else None
        cfg, gains = s["cfg"], gain_multipliers(params)
        if gains:  # the gains are cfg keys: the trial trains from its own copy of the cfg
            cfg = str(write_cfg_with_gains(Path(s["cfg"]), gains, self.folder / f"trial{number}.cfg"))
        return TrainOptions(cfg=cfg, data=s["data"], weights=s["weights"], hyp=hyp_with(self.base_hyp, params),
                            epochs=s["epochs"], batch_size=s["batch_size"], img_size=img_size, seed=s["seed"],
                            project=str(self.folder), name=f"trial{number}", **common)

    # ---------------------------------------------------------------- signals between trials
    def _install_handlers(self) -> Dict[int, Any]:
        """Between trials a signal stops the search at once (during one the trainer's own handlers stop it)."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, self._between_trials) for sig in STOP_SIGNALS}

    def _between_trials(self, signum, frame) -> None:
        self.stop_signal = signal.Signals(signum).name

    @staticmethod
    def _restore_handlers(previous: Dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    # ---------------------------------------------------------------- results
    def write_reports(self) -> None:
        """``trials.csv``, ``trials.png``, ``best_hyp.yaml`` and (with searched gains) ``best.cfg`` from the study's
        records."""
        trials = self.study.get_trials(deepcopy=False)
        keys = sorted({k for t in trials for k in t.params})
        rows = trial_rows(trials, keys)
        write_trials_csv(rows, keys, self.folder / "trials.csv")
        write_trials_plot(rows, keys, self.metric, self.folder / "trials.png",
                          log_keys=[p.key for p in self.space if p.log])
        best = self._best()
        if best is not None:
            gains = gain_multipliers(best.params)
            if gains:
                write_cfg_with_gains(Path(self.study_options["cfg"]), gains, self.folder / "best.cfg")
            heading = best_heading(self.study.study_name, best.number, self.metric, best.value, len(trials),
                                   with_cfg=bool(gains))
            write_best_hyp(self.base_hyp, best.params, heading, self.folder / "best_hyp.yaml")

    def _best(self):
        try:
            return self.study.best_trial
        except ValueError:  # no trial finished yet
            return None

    def _result(self) -> TuneResult:
        best = self._best()
        return TuneResult(folder=self.folder, study_name=self.study.study_name, metric=self.metric,
                          trials=len(self.study.trials),
                          best_trial=None if best is None else best.number,
                          best_value=None if best is None else best.value,
                          best_params={} if best is None else dict(best.params),
                          best_hyp=None if best is None else self.folder / "best_hyp.yaml",
                          status="interrupted" if self.stop_signal else "finished",
                          stopped_by=self.stop_signal or "",
                          best_cfg=self.folder / "best.cfg" if best is not None and gain_multipliers(best.params)
                          else None)


class EpochScores:
    """The ``epoch_end`` callback of a trial's trainer: the epoch's ``metric`` from ``results.csv`` reported to the
    study, the best kept, and a stop asked for when the pruner says so."""

    def __init__(self, trial, metric: str, results: Path):
        self.trial, self.metric, self.results = trial, metric, results
        self.minimize = direction(metric) == "minimize"
        self.best: Optional[float] = None
        self.pruned = False
        self.last_epoch = 0

    def report(self, trainer) -> None:
        if not trainer.parts.dist.is_main:
            return
        for row in read_rows(self.results):  # every row: a resumed trial's earlier epochs count too
            value = _number(row.get(self.metric))
            if value is None:
                continue
            if self.best is None or (value < self.best if self.minimize else value > self.best):
                self.best = value
        self.last_epoch = trainer.state.epoch
        if self.best is not None:
            self.trial.report(self.best, step=self.last_epoch)
            if self.trial.should_prune():
                self.pruned = True
                trainer.request_stop()


def read_rows(path: Path) -> List[Dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _number(text: Optional[str]) -> Optional[float]:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def tune(**settings) -> TuneResult:
    """Run (or continue, ``resume=True``) a hyperparameter search: ``Tuner(TuneOptions(**settings)).run()``."""
    return Tuner(TuneOptions(**settings)).run()


with_settings_signature(tune, TuneOptions)

__all__ = ["EpochScores", "TuneResult", "Tuner", "check_metric", "direction", "metric_columns", "tune"]
