"""What a hyperparameter search takes: :class:`TuneOptions`, each setting declared once with its ``tools/tune.py``
flag and help. The settings a trial trains with (``--cfg``, ``--data``, ``--device``, ...) are declared as
:class:`yolo.settings.train.TrainOptions` declares them: one flag, one help text.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from yolo.files.paths import check_path
from yolo.ops.sizes import SizeLike
from yolo.settings.checks import check_device, check_optional_number
from yolo.settings.declare import setting
from yolo.settings.train import TrainOptions
from yolo.settings.values import positive_int

DEFAULT_METRIC = "mAP50"
DEFAULT_TRIALS = 20
DEFAULT_EPOCHS = 10


def _as_train(name: str) -> Any:
    """The field ``name`` of :class:`TrainOptions` as it is declared there (default, flag and help)."""
    (field,) = [f for f in dataclasses.fields(TrainOptions) if f.name == name]
    return dataclasses.field(default=field.default, metadata=field.metadata)


@dataclass
class TuneOptions:
    """What ``tools/tune.py`` takes (also :func:`yolo.engine.tune`'s keyword arguments).

    Each trial is one training run (``TrainOptions`` with the trial's hyperparameters over ``hyp``) in
    ``project/name/trialN``; the study (Optuna) is ``project/name/study.db`` unless ``storage`` names a database.
    """

    cfg: Optional[str] = _as_train("cfg")
    data: Optional[str] = _as_train("data")
    weights: Optional[str] = _as_train("weights")
    hyp: Optional[str] = setting(None, "--hyp", help="hyperparameter YAML every trial starts from (the searched "
                                                     "keys are drawn over it)")
    trials: Optional[int] = setting(
        None, "--trials", type=positive_int,
        help=f"trials of the study in all, every process together (default: {DEFAULT_TRIALS}; with --resume: the "
             f"study's)")
    epochs: Optional[int] = setting(
        None, "--epochs", type=positive_int,
        help=f"epochs of each trial (default: {DEFAULT_EPOCHS}; with --resume: the study's)")
    space: Optional[str] = setting(None, "--space", help="YAML narrowing or widening the search space "
                                                         "(key: [low, high], or null to leave a key out)")
    metric: Optional[str] = setting(
        None, "--metric", help=f"the results.csv column a trial is scored by, its best value over the epochs "
                               f"(default: {DEFAULT_METRIC}; mAP50_95, ...)")
    storage: Optional[str] = setting(None, "--storage",
                                     help="the study's database URL, to let several machines work on one study "
                                          "(default: sqlite in the tune folder)")
    resume: bool = setting(False, "--resume", action="store_true",
                           help="continue the study --name with its settings (an interrupted trial goes on from "
                                "its last.pt); also how another process joins a study")
    project: str = setting("runs/tune", "--project", help="parent of the tune folders (default: runs/tune)")
    name: str = setting("exp", "--name", help="tune folder and study name (default: exp; a new search takes exp2, "
                                              "exp3, ... when taken)")
    batch_size: Optional[int] = _as_train("batch_size")
    img_size: Optional[SizeLike] = _as_train("img_size")
    device: Optional[str] = _as_train("device")
    workers: Optional[int] = _as_train("workers")
    seed: int = _as_train("seed")
    progress: bool = _as_train("progress")

    def __post_init__(self):
        """The types and ranges the flags give, for the same settings given from Python."""
        for name in ("cfg", "data", "weights", "hyp", "space"):
            check_path(name, getattr(self, name))
        check_path("project", self.project, optional=False)
        for name in ("name", "metric"):
            value = getattr(self, name)
            if not isinstance(value, str) and not (name == "metric" and value is None):
                raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
        check_optional_number("trials", self.trials, positive_int)
        check_optional_number("epochs", self.epochs, positive_int)
        check_optional_number("batch_size", self.batch_size, positive_int)
        check_device("device", self.device)


__all__ = ["DEFAULT_EPOCHS", "DEFAULT_METRIC", "DEFAULT_TRIALS", "TuneOptions"]
