"""Training: the trainer and the builder of its parts, Darknet's learning-rate policies, EMA, DDP helpers and
transfer learning.

Typical use::

    from yolo.engine import Trainer, TrainOptions
    result = Trainer.from_options(TrainOptions(cfg="configs/yolov3-tiny-shapes.cfg", data="configs/shapes.yaml",
                                               hyp="configs/hyp.shapes.yaml", device="cpu")).fit()
    print(result.run_dir, result.metrics["mAP50"])

``Trainer.from_options`` is ``Trainer(build_training(options))``: the builder makes the parts
(:class:`TrainingParts`) from the cfg and the dataset YAML, the trainer runs them.

``tune(...)`` searches hyperparameters with Optuna, one training run per trial (:mod:`yolo.engine.tuner`; loaded
on first use, with Optuna).
"""
from yolo.engine.build import build_training
from yolo.engine.config import Hyperparameters, TrainOptions, resolve_hyp
from yolo.errors import ConfigError
from yolo.engine.ema import ModelEMA
from yolo.engine.schedule import LRSchedule, schedule_from_hyp
from yolo.engine.train_state import TrainState, fitness
from yolo.engine.optimizer import build_optimizer
from yolo.engine.parts import RunPlan, TrainingParts
from yolo.engine.trainer import TrainResult, Trainer, train
from yolo.errors import NonFiniteLossError
from yolo.engine.transfer import TransferReport, freeze_layers, load_pretrained, with_num_classes



def __getattr__(name: str):
    """``tune``, ``Tuner`` and ``TuneResult`` of :mod:`yolo.engine.tuner`, imported when first asked for: Optuna
    (the ``tune`` extra) loads only for a search."""
    if name in ("tune", "Tuner", "TuneResult"):
        from yolo.engine import tuner  # optional dependency: Optuna (the tune extra), loaded for a search only
        return getattr(tuner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConfigError", "Hyperparameters", "LRSchedule", "ModelEMA", "NonFiniteLossError", "RunPlan", "TrainOptions",
           "TrainResult", "TrainState", "Trainer", "TrainingParts", "TransferReport", "build_optimizer", "build_training",
           "fitness", "freeze_layers", "load_pretrained", "resolve_hyp", "schedule_from_hyp", "train", "tune",
           "with_num_classes"]
