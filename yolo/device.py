"""The one reading of a ``--device`` / ``device=`` setting, for every tool and API."""
from __future__ import annotations

import numbers
import os
from typing import Union

import torch

from yolo.errors import ConfigError


def cpu_threads() -> int:
    """The CPU cores this process may run on (its affinity mask: ``taskset``, a container's cpuset), which can be
    fewer than ``os.cpu_count()``, the machine's; a thread per core and no more."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        return os.cpu_count() or 1


def parse_device(name: Union[str, int, torch.device, None], local_rank: int = 0) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N`` or ``N`` (a CUDA index, as text or an int) as a :class:`torch.device`.

    ``None`` or ``""`` picks CUDA when available, else the CPU. A CUDA device on a machine without CUDA is a
    one-line :class:`ConfigError`, as is a name torch does not know; a value of another type (a float, a list)
    is a ``TypeError``. Under ``torchrun`` (``WORLD_SIZE`` > 1) each process takes ``cuda:LOCAL_RANK``.
    """
    device = name if isinstance(name, torch.device) else named_device(name)
    check_device_type(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"device '{device}': CUDA is not available on this machine")
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            device = torch.device("cuda", local_rank)
    return device


def named_device(name: Union[str, int, None]) -> torch.device:
    """The device a name or a GPU index stands for (no check that it exists); ``None`` or ``""``: CUDA when
    available, else the CPU."""
    if isinstance(name, bool) or not (name is None or isinstance(name, (str, numbers.Integral))):
        raise TypeError(f"device must be a name (cpu, cuda, cuda:N), a GPU index or a torch.device, "
                        f"got {type(name).__name__} {name!r}")
    name = "" if name is None else str(name).strip()  # an index is read as its text: 0 is cuda:0, not "none"
    if not name:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.isdigit():
        name = f"cuda:{name}"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device '{name}' is not one of cpu, cuda, cuda:N or N") from None
    check_device_type(device)
    return device


def check_device_type(device: torch.device) -> None:
    """Refuse a device type other than cpu and cuda: torch knows more (mps, xpu, meta, hip, ...) than this project
    runs on, and they would fail later, deep in the model, with a traceback."""
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"device '{device}': only cpu, cuda, cuda:N or N are supported (not {device.type})")
