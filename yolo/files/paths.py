"""The type check of a path given from Python (a setting, a ``load_model`` argument): one message everywhere."""
from __future__ import annotations

import os
from typing import Any

__all__ = ["check_path"]


def check_path(name: str, value: Any, optional: bool = True) -> None:
    """A file or folder argument ``name``: a ``str`` or an ``os.PathLike`` (``None`` too where ``optional``);
    anything else is a ``TypeError`` naming it."""
    if value is None and optional:
        return
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type(value).__name__} {value!r}")
