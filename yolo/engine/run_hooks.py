"""The run folder and the built-in hooks that write to it.

The order of the hooks matters: the evaluation (recorded in the trainer's state) comes before ``results.csv`` and
the checkpoints are written, and the lock comes first (it is taken before anything in the folder is touched).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from yolo.engine.config import Hyperparameters, TrainOptions
from yolo.engine.distributed import broadcast_object
from yolo.engine.hooks import (CheckpointHook, EvalHook, Guarded, HookBase, ProgressWriter, ResultsChartWriter,
                               ResultsCSVWriter, RunFolderLock, TensorBoardWriter)
from yolo.engine.run_folder import recover_run_folder, update_settings, write_settings
from yolo.progress import use_bars
from yolo.runs import increment_path, run_name


def run_folder(options: TrainOptions, resume_path: Optional[Path], main: bool) -> Path:
    """The resumed run's folder, or a new ``project/NAME`` (``NAME2``, ... when taken; the main process picks
    it and tells the others)."""
    if resume_path is not None:
        return resume_path.parent
    run_dir = str(increment_path(Path(options.project) / run_name(options.name))) if main else None
    return Path(broadcast_object(run_dir))


def open_run_folder(run_dir: Path, resumed: bool, options: TrainOptions, hyp: Hyperparameters, cfg_text: str,
                    data, dataset: Optional[Dict[str, Any]], finished: bool = False) -> Tuple[List[HookBase], Any]:
    """Lock ``run_dir``, undo what a kill left there, write (or, resumed, update) the settings files; returns the
    hooks (lock, progress, evaluation, results.csv, chart, TensorBoard, checkpoints) and the TensorBoard
    ``SummaryWriter`` (None when off). A resumed run that has ``finished`` already trains nothing, so its records
    stay as they are (``--epochs 1`` must not rewrite a 3-epoch run's opt.yaml). The checkpoints record ``dataset``
    (:func:`yolo.engine.dataset_record.dataset_record`). Main process only. On failure the lock is released."""
    lock = RunFolderLock(run_dir)  # before anything in the folder is touched
    hooks: List[HookBase] = [lock]
    try:
        recover_run_folder(run_dir)
        if not resumed:  # a resumed run keeps the settings files it started with, but for its new run length
            write_settings(run_dir, cfg_text, hyp.to_dict(), options.to_dict(), data)
        elif not finished:
            update_settings(run_dir, options.to_dict(), hyp.to_dict())
        hooks += [Guarded(ProgressWriter(use_bars(options.progress)), "progress display"),
                  EvalHook(hyp.eval_interval), ResultsCSVWriter(run_dir / "results.csv", hyp.darknet_map)]
        if hyp.plots:
            chart = ResultsChartWriter(run_dir / "results.csv", run_dir / "results.png")
            hooks.append(Guarded(chart, "results chart (results.png)"))
        writer = None
        if hyp.tensorboard:
            tensorboard = TensorBoardWriter(run_dir, hyp.tb_images)
            writer = tensorboard.writer
            hooks.append(Guarded(tensorboard, "TensorBoard writer"))
        hooks.append(CheckpointHook(dataset))
    except BaseException:
        for hook in hooks:
            hook.close()
        raise
    return hooks, writer


__all__ = ["open_run_folder", "run_folder"]
