"""What the tools' parsers share beyond :mod:`yolo.cli.args`: the flags generated from a settings dataclass, the
parsed flags turned back into it, and hidden aliases for renamed flags."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Iterable, Optional, Type, TypeVar

from yolo.cli.args import ToolParser, fail
from yolo.errors import ConfigError
from yolo.settings.common import ToolOptions
from yolo.settings.declare import declared

S = TypeVar("S")


def add_setting_flags(parser: argparse.ArgumentParser, cls: type, only: Optional[Iterable[str]] = None) -> None:
    """One flag for each field of the settings dataclass ``cls`` declared with one
    (:func:`yolo.settings.declare.setting`), in field order: its name, help, default and ``add_argument``
    options as declared; the parsed value goes to the field's name (``--agnostic-nms`` -> ``agnostic``).
    ``only``: the names of the fields to add (default: all)."""
    for field, flag in declared(cls):
        if flag.name is None or (only is not None and field.name not in only):  # None: the Python API only
            continue
        default = None if field.default is dataclasses.MISSING else field.default
        parser.add_argument(*flag.option_strings, dest=field.name, default=default, help=flag.help, **flag.options)


def add_common_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """The shared flags ``names`` (``"device"``, ``"verbose"``, ``"progress"``) as every tool declares them
    (:class:`yolo.settings.common.ToolOptions`)."""
    unknown = set(names) - {f.name for f in dataclasses.fields(ToolOptions)}
    if unknown:
        raise ValueError(f"no shared flag {sorted(unknown)}")
    add_setting_flags(parser, ToolOptions, only=names)


def parse_declared(parser: argparse.ArgumentParser, argv: Optional[Iterable[str]], *classes: type
                   ) -> argparse.Namespace:
    """``parser``'s flags parsed from ``argv``, each declared setting of ``classes`` as its field holds it (through
    the declaration's ``from_flag``: ``--img-size 416`` -> ``(416, 416)``), for the tools that read the parsed
    flags themselves. A value the declaration refuses (``--img-size 1 2 3``) is the tool's one-line error."""
    args = parser.parse_args(argv)
    try:
        for cls in classes:
            for field, flag in declared(cls):
                if flag.name is not None and flag.from_flag is not None:
                    setattr(args, field.name, flag.from_flag(getattr(args, field.name), flag.name))
    except ConfigError as exc:
        fail(str(exc))
    return args


def settings_from(args: argparse.Namespace, cls: Type[S], **given: Any) -> S:
    """The settings dataclass ``cls`` from parsed flags, in one call: each field with a flag from its value
    (through the declaration's ``from_flag``), the fields in ``given`` as they are, the others their defaults.
    A value the declaration refuses (``--img-size 1 2 3``) is the tool's one-line error."""
    values = dict(given)
    try:
        for field, flag in declared(cls):
            if field.name in values or flag.name is None:
                continue
            value = getattr(args, field.name)
            values[field.name] = value if flag.from_flag is None else flag.from_flag(value, flag.name)
        return cls(**values)
    except ConfigError as exc:
        fail(str(exc))


def hidden_alias(parser: ToolParser, old: str, dest: str, **kwargs) -> None:
    """Accept ``old``, a flag's former spelling, as the flag that stores into ``dest``, without listing it in
    ``--help``. ``kwargs`` are the flag's own (``type``, ``nargs``, ...); it has no default of its own, so the
    new flag's default stands."""
    parser.add_argument(old, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)
