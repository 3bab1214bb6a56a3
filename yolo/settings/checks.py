"""A setting given from Python checked as its flag would be: the same ranges (:mod:`yolo.settings.values`), and
the types the tools' parsers guarantee.

The tools pass values their flags have read already; a caller of the Python API (``Detector(conf_thres=...)``,
``TrainOptions(seed=...)``) gets the same refusal, as a ``TypeError`` for a value of the wrong type or a
``ValueError`` for one out of range, each naming the setting. Imports only the standard library, so the
settings stay free of torch.
"""
from __future__ import annotations

import argparse
import numbers
from collections.abc import Iterable
from typing import Any, Callable, Optional


def check_number(name: str, value: Any, parse: Callable[[str], Any]) -> None:
    """``value`` as the flag reader ``parse`` (:func:`yolo.settings.values.number`) would accept its text: an
    integer for an ``int`` reader (a number for a ``float`` one), never a ``bool`` or a string, within its range."""
    integer = parse.__name__ == "int"
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be {'an integer' if integer else 'a number'}, "
                        f"got {type(value).__name__} {value!r}")
    try:
        parse(str(value))  # the flag's own range check, on the text the value prints as
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{name}: {exc}") from None


def check_optional_number(name: str, value: Any, parse: Callable[[str], Any]) -> None:
    """:func:`check_number`, with ``None`` (the setting's default) accepted."""
    if value is not None:
        check_number(name, value, parse)


def check_sequence(name: str, value: Any, what: str) -> None:
    """A setting that takes several values: any iterable but a string (whose characters would be read as the
    values) or bytes; ``what`` says what it holds, for the message."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a sequence of {what}, got {type(value).__name__} {value!r}")


def check_int_sequence(name: str, value: Optional[Iterable]) -> None:
    """``None`` or a non-empty sequence of integers (their range is the caller's: a model's class count)."""
    if value is None:
        return
    check_sequence(name, value, "integers")
    items = list(value)
    if not items:
        raise ValueError(f"{name}: an empty list keeps nothing; give at least one value, or None for all")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral):
            raise TypeError(f"{name} must be a sequence of integers, got {type(item).__name__} {item!r} in it")


def check_device(name: str, value: Any) -> None:
    """``None``, a device name (``cpu``, ``cuda:1``), a GPU index or a ``torch.device``; the name itself is read
    by :func:`yolo.device.parse_device` (this module loads no torch, so a device is known by its type's module)."""
    is_torch_device = type(value).__module__ == "torch" and type(value).__name__ == "device"
    is_index = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not (value is None or isinstance(value, str) or is_index or is_torch_device):
        raise TypeError(f"{name} must be a name (cpu, cuda, cuda:N), a GPU index or a torch.device, "
                        f"got {type(value).__name__} {value!r}")


__all__ = ["check_device", "check_int_sequence", "check_number", "check_optional_number",
           "check_sequence"]
