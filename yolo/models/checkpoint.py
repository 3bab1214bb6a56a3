"""Our ``.pt`` files: a dict of plain types (tensors, str, int, lists), so ``weights_only=True`` loads them.

A checkpoint holds at least ``model`` (state_dict), ``cfg`` (the cfg text), ``num_classes`` and
``darknet_header``; training checkpoints add optimizer, scheduler, EMA, epoch and RNG state.
Files are written atomically (temp file + rename), so an interrupted save never leaves a broken file.
"""
from __future__ import annotations

import warnings
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import torch

from yolo.counts import MAX_IMAGE_SIDE
from yolo.errors import WeightsError
from yolo.files.atomic import atomic_path
from yolo.files.paths import special_file

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


def check_float_weights(state: Dict[str, torch.Tensor], expected: Dict[str, torch.Tensor], path: Union[str, Path]) -> None:
    """Refuse integer or boolean tensors from ``path`` where the model (``expected``, its state_dict) has float
    weights: loading would cast them silently, and the model would detect nothing useful."""
    for key, value in state.items():
        if key in expected and expected[key].is_floating_point() and not value.is_floating_point():
            raise WeightsError(f"{path}: {key} holds {value.dtype} values where the model has float weights: the "
                               "checkpoint is damaged or was not written by this project")


def load_checkpoint_file(path: Union[str, Path]) -> Dict[str, Any]:
    """Read one of our ``.pt`` files safely (``weights_only=True``); clear errors for anything else."""
    path = Path(path)
    special = special_file(path)
    if special is not None and not path.is_dir():
        raise WeightsError(f"{path}: cannot read the checkpoint: {special}")
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
    if head == b"PK\x03\x04":
        _check_zip_crcs(path)
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols say nothing about our files
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types here (pickle, zip, unsafe global)
        raise WeightsError(f"{path}: {_load_failure(exc)}") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise WeightsError(f"{path}: not a yolo checkpoint (expected a dict with a 'model' state_dict)")
    problem = _field_problem(ckpt)
    if problem:
        raise WeightsError(f"{path}: damaged or foreign checkpoint: {problem}")
    return ckpt


def _check_zip_crcs(path: Path) -> None:
    """Refuse a zip checkpoint one of whose members fails its CRC-32 (torch.load does not check them: a byte
    flipped inside a tensor would load without a word and detect differently). One read of the file, at disk
    speed; an archive that cannot be opened is left to torch.load's own error."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError):
        return
    if bad is not None:
        raise WeightsError(f"{path}: damaged checkpoint: the member {bad!r} fails its CRC check (the file's bytes "
                           "changed after it was written): write or copy it again")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field_problem(ckpt: Dict[str, Any]) -> Optional[str]:
    """What is wrong with the fields every reader of a checkpoint uses (None: nothing), so that a hand-edited or
    foreign file is one error here rather than a type error deep in the model, the Detector or the converter."""
    state = ckpt["model"]
    if not isinstance(state, dict) or not all(isinstance(k, str) and torch.is_tensor(v) for k, v in state.items()):
        return "'model' is not a state_dict (a dict of tensor names to tensors)"
    fmt = ckpt.get("format")
    if fmt is not None and not (isinstance(fmt, str) and fmt.startswith(FORMAT.split("/")[0] + "/")):
        return f"'format' is {fmt!r}, not {FORMAT!r}"
    checks = {
        "cfg": (lambda v: isinstance(v, str), "cfg text"),
        "names": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(n, str) for n in v),
                  "a list of class names"),
        "num_classes": (lambda v: _is_int(v) and v >= 0, "a class count"),
        "input_size": (lambda v: isinstance(v, (list, tuple)) and len(v) == 2
                       and all(_is_int(x) and 0 < x <= MAX_IMAGE_SIDE for x in v),
                       f"[height, width], sides 1 to {MAX_IMAGE_SIDE}"),
        "darknet_header": (lambda v: isinstance(v, (list, tuple)) and len(v) == 4
                           and all(_is_int(x) and x >= 0 for x in v), "[major, minor, revision, seen]"),
    }
    for key, (valid, meaning) in checks.items():
        value = ckpt.get(key)
        if value is not None and not valid(value):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            return f"'{key}' is {shown}, not {meaning}"
    return None


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
