"""Our ``.pt`` files: a dict of plain types (tensors, str, int, lists), so ``weights_only=True`` loads them.

A checkpoint holds at least ``model`` (state_dict), ``cfg`` (the cfg text), ``num_classes`` and
``darknet_header``; training checkpoints add optimizer, scheduler, EMA, epoch and RNG state.
Files are written atomically (temp file + rename), so an interrupted save never leaves a broken file.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import torch

from yolo.errors import WeightsError
from yolo.files.atomic import atomic_path

FORMAT = "yolo-darknet/1"


def model_checkpoint(model, names: Optional[Sequence[str]] = None, **extra: Any) -> Dict[str, Any]:
    """The portable part of a checkpoint for ``model`` (a :class:`yolo.models.model.Darknet`)."""
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}  # NCHW, even from channels_last
    ckpt = {
        "format": FORMAT,
        "model": state,
        "cfg": model.cfg_text,
        "num_classes": int(model.num_classes),
        "input_size": [int(v) for v in model.input_size],
        "darknet_header": [int(v) for v in model.darknet_header],
    }
    if names is not None:
        ckpt["names"] = list(names)
    ckpt.update(extra)
    return ckpt


def save_checkpoint(ckpt: Dict[str, Any], path: Union[str, Path]) -> Path:
    """Write ``ckpt`` to ``path`` atomically; returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        torch.save(ckpt, tmp)
    return path


def check_finite_state(state: Dict[str, torch.Tensor], path: Union[str, Path]) -> None:
    """Refuse a state_dict read from ``path`` whose floating tensors hold a NaN or an infinity, naming the first
    such tensor: the model would give no detections, or NaN everywhere, without a word."""
    for key, value in state.items():
        if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            raise WeightsError(f"{path}: {key} holds {bad:,} NaN or infinite value(s): the checkpoint is damaged "
                               "or was saved by a training that diverged")


def load_checkpoint_file(path: Union[str, Path]) -> Dict[str, Any]:
    """Read one of our ``.pt`` files safely (``weights_only=True``); clear errors for anything else."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"{path}: checkpoint not found")
    if path.stat().st_size == 0:
        raise WeightsError(f"{path}: empty file, not a checkpoint")
    with open(path, "rb") as f:
        head = f.read(4)
    # torch.save writes a zip archive (older versions a pickle stream, which opens with PROTO, 0x80).
    if head != b"PK\x03\x04" and head[:1] != b"\x80":
        raise WeightsError(f"{path}: not a PyTorch checkpoint (it is neither a zip archive nor a pickle, "
                           "the two formats torch.save writes)")
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols say nothing about our files
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types here (pickle, zip, unsafe global)
        raise WeightsError(f"{path}: {_load_failure(exc)}") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise WeightsError(f"{path}: not a yolo checkpoint (expected a dict with a 'model' state_dict)")
    return ckpt


def _load_failure(exc: Exception) -> str:
    """Our one-line reason for a failed ``torch.load(weights_only=True)`` (torch's own texts run to many
    lines and advise turning the safe loader off, which we never do)."""
    text = str(exc)
    if "Weights only load failed" in text:
        return ("holds Python objects besides tensors and plain values, so it is not a checkpoint written by "
                "this project; such files are not read, because loading them can run arbitrary code (save its "
                "state_dict as a plain dict of tensors, or convert the model to Darknet .weights)")
    if isinstance(exc, PermissionError):
        return "cannot be read (permission denied)"
    # A cut-off zip archive fails in torch's reader either with its own text or as a bare OSError.
    if "zip archive" in text or "PytorchStreamReader" in text or isinstance(exc, OSError):
        return "truncated or damaged checkpoint (its zip archive cannot be read): write or copy it again"
    return f"damaged checkpoint: its content cannot be read ({type(exc).__name__})"
