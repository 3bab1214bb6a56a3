"""What training takes: :class:`TrainOptions`, each setting declared once with its ``tools/train.py`` flag and help.

The hyperparameters themselves (``[net]``, ``--hyp``) are :class:`yolo.engine.config.Hyperparameters`; the
flags ``--epochs``, ``--batch-size``, ``--img-size``, ``--workers``, ``--tf32``, ``--compile`` and
``--cache-images`` override theirs.
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

from yolo.ops.sizes import SizeLike
from yolo.files.paths import check_path
from yolo.settings.checks import check_device, check_number, check_optional_number
from yolo.settings.common import DECODERS, device_setting, img_size_setting, progress_setting, setting_decode_train
from yolo.settings.declare import declared, setting
from yolo.settings.values import non_negative_int, positive_int, seed_value, worker_count


@dataclass
class TrainOptions:
    """What ``tools/train.py`` takes (also the programmatic entry: ``Trainer.from_options(TrainOptions(...))``).

    ``hyp`` is a YAML path or a dict of hyperparameters. ``img_size`` is one side or ``(height, width)``.
    ``resume`` is a ``last.pt`` or a run folder; the run then continues with its own saved settings
    (``epochs``, ``device`` and ``workers`` may still be given).
    """

    cfg: Optional[str] = setting(None, "--cfg", help="Darknet .cfg (not needed with --resume)")
    data: Optional[str] = setting(
        None, "--data", help="dataset YAML (train and val splits, class names) or Darknet .data file (classes, "
                             "train, valid, names)")
    weights: Optional[str] = setting(
        None, "--weights", help="start from Darknet .weights (full or partial) or a .pt; tensors that do not fit "
                                "are re-initialized and reported")
    cutoff: Optional[int] = setting(None, "--cutoff", type=non_negative_int,
                                    help="read only layers 0..N-1 of a Darknet .weights file")
    hyp: Union[str, Dict[str, Any], None] = setting(None, "--hyp",
                                                    help="hyperparameter YAML (overrides the cfg's [net])")
    epochs: Optional[int] = setting(None, "--epochs", overrides="epochs", type=positive_int,
                                    help="default: enough epochs for the cfg's max_batches")
    batch_size: Optional[int] = setting(
        None, "--batch-size", type=positive_int, overrides="batch",
        help="images per optimizer update over all processes (Darknet's batch; default: the cfg's)")
    img_size: Optional[SizeLike] = img_size_setting(
        "training input: one side or height width (default: the cfg's [net] size)", overrides="img_size")
    device: Optional[str] = device_setting()
    project: str = setting("runs/train", "--project", help="parent of the run folders (default: runs/train)")
    name: str = setting("exp", "--name", help="run folder name (default: exp; then exp2, exp3, ...: never overwritten)")
    # The flag alone (--resume) stands for the newest run under --project: tools/train.py finds it.
    resume: Optional[str] = setting(
        None, "--resume", nargs="?", const="",
        help="continue a run from its last.pt (or run folder); alone: the newest run under --project")
    freeze: int = setting(0, "--freeze", type=non_negative_int,
                          help="freeze the first N layers (their BatchNorm statistics too)")
    workers: Optional[int] = setting(None, "--workers", overrides="workers", type=worker_count,
                                     help="data-loading processes (default: automatic)")
    seed: int = setting(0, "--seed", type=seed_value,
                        help="seed of initialization, data order and augmentation (default: 0)")
    sync_bn: bool = setting(False, "--sync-bn", action="store_true", help="SyncBatchNorm across processes (CUDA DDP)")
    adapt_classes: bool = setting(
        False, "--adapt-classes", action="store_true",
        help="set the cfg's heads to the dataset's class count (classes and the filters before each head)")
    # None: the hyperparameter's; the run's opt.yaml records the value used (compile and cache_images too).
    tf32: Optional[bool] = setting(
        None, "--tf32", action=argparse.BooleanOptionalAction, overrides="tf32",
        help="TF32 matmuls/convolutions on CUDA: faster, but not Darknet's float32 step (default: the "
             "hyperparameter tf32, false)")
    compile: Optional[bool] = setting(
        None, "--compile", action=argparse.BooleanOptionalAction, overrides="compile",
        help="train through torch.compile (falls back with a warning; default: the hyperparameter compile, false)")
    cache_images: Optional[bool] = setting(
        None, "--cache-images", action=argparse.BooleanOptionalAction, overrides="cache_images",
        help="decode the train images once and keep them in memory, one copy per machine, where they fit (else "
             "one warning and the images are read from disk; default: the hyperparameter cache_images, false)")
    darknet_map: Optional[bool] = setting(
        None, "--darknet-map", action=argparse.BooleanOptionalAction, overrides="darknet_map",
        help="every evaluation also Darknet's `detector map` mAP@0.50 (its detections, matching and mean over all "
             "classes, as its -map chart): a darknet_mAP50 column in results.csv and results.png (default: the "
             "hyperparameter darknet_map, false)")
    scale_burn_in: Optional[bool] = setting(
        None, "--scale-burn-in", action=argparse.BooleanOptionalAction, overrides="scale_burn_in",
        help="in a run shorter than the cfg's max_batches, give burn_in the same share of this run (a stock cfg's "
             "burn_in=1000 would otherwise keep a short fine-tune's learning rate near 0, as in Darknet; default: the "
             "hyperparameter scale_burn_in, false)")
    decode: Optional[str] = setting_decode_train()
    progress: bool = progress_setting()

    def __post_init__(self):
        """The types the tool's flags give, and their ranges, for the same settings given from Python: a
        ``TypeError`` (wrong type) or ``ValueError`` (out of range) naming the setting."""
        for name in ("cfg", "data", "weights", "resume"):
            check_path(name, getattr(self, name))
        check_path("project", self.project, optional=False)
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str (the run folder's name), got {type(self.name).__name__} "
                            f"{self.name!r}")
        if not isinstance(self.hyp, (str, Path, Mapping, type(None))):
            raise TypeError(f"hyp must be a YAML path (str or pathlib.Path) or a dict of hyperparameters, got "
                            f"{type(self.hyp).__name__} {self.hyp!r}")
        check_device("device", self.device)
        check_optional_number("cutoff", self.cutoff, non_negative_int)
        check_optional_number("epochs", self.epochs, positive_int)
        check_optional_number("batch_size", self.batch_size, positive_int)
        check_optional_number("workers", self.workers, worker_count)
        check_number("freeze", self.freeze, non_negative_int)
        check_number("seed", self.seed, seed_value)
        if self.decode not in (*DECODERS, None):
            raise ValueError(f"unknown decode {self.decode!r}: use 'opencv' or 'stb'")

    def hyp_overrides(self) -> Dict[str, Any]:
        """``{hyperparameter: value}`` for the settings that override one (declared with ``overrides=``:
        ``--epochs``, ``--batch-size``, ``--img-size``, ...); None where not given (the hyperparameter stands)."""
        return {flag.overrides: getattr(self, field.name) for field, flag in declared(type(self)) if flag.overrides}

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        if isinstance(d.get("img_size"), tuple):
            d["img_size"] = list(d["img_size"])
        return d


__all__ = ["TrainOptions"]
