"""The trainer's hooks: everything around the training step (see :mod:`yolo.engine.hooks.base`)."""
from yolo.engine.hooks.base import HookBase, StepLog
from yolo.engine.hooks.callbacks import EVENTS, CallbackHook
from yolo.engine.hooks.checkpointing import CheckpointHook
from yolo.engine.hooks.evaluation import EvalHook, evaluate_run, evaluate_training, fitness
from yolo.engine.hooks.guarded import Guarded
from yolo.engine.hooks.writers import (RESULTS_COLUMNS, ProgressWriter, ResultsChartWriter, ResultsCSVWriter,
                                      TensorBoardWriter)

__all__ = ["CallbackHook", "CheckpointHook", "EVENTS", "EvalHook", "Guarded", "HookBase", "ProgressWriter",
           "RESULTS_COLUMNS", "ResultsCSVWriter", "ResultsChartWriter", "StepLog", "TensorBoardWriter",
           "evaluate_run", "evaluate_training", "fitness"]
