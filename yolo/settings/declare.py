"""How a setting is declared: one dataclass field holds its default, its type, its command-line flag and its help.

::

    @dataclass
    class TrainOptions:
        batch_size: Optional[int] = setting(None, "--batch-size", type=positive_int,
                                            help="images per optimizer update over all processes")

:func:`setting` stores the flag's name, its help and the rest of ``argparse``'s ``add_argument`` arguments
(``type``, ``nargs``, ``choices``, ``action``, ...) in the field's metadata (a :class:`Flag`). The tools' parsers
are generated from these fields and the parsed flags are turned back into the dataclass in one call
(:mod:`yolo.cli.flags.common`): a setting, its flag and its help text are written once, here. A field declared
with ``flag=None`` belongs to the Python API only; it still has its help, which documents it.

Imports only the standard library.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

_KEY = "yolo.setting"


@dataclasses.dataclass(frozen=True)
class Flag:
    """The command-line side of one setting."""

    name: Optional[str]  # "--batch-size"; None: the Python API only
    help: str
    options: Dict[str, Any]  # add_argument's other arguments: type, nargs, choices, action, const, required
    # The parsed value -> the field's value, called as from_flag(value, name); None: the parsed value as it is.
    from_flag: Optional[Callable[[Any, str], Any]] = None
    # The training hyperparameter the setting overrides when given ("batch" for --batch-size); None: none.
    overrides: Optional[str] = None
    short: Optional[str] = None  # a one-letter form of the flag ("-n"), listed with it in --help

    @property
    def option_strings(self) -> Tuple[str, ...]:
        """The flag's spellings, as ``add_argument`` takes them: ``("-n", "--num-of-clusters")``."""
        return tuple(name for name in (self.short, self.name) if name)


def setting(default: Any = dataclasses.MISSING, flag: Optional[str] = None, *, help: str,
            from_flag: Optional[Callable[[Any, str], Any]] = None, overrides: Optional[str] = None,
            short: Optional[str] = None, **options: Any) -> Any:
    """A dataclass field declaring one setting: ``default`` (none: a required setting), its ``flag``
    (``"--batch-size"``; None: no flag), its ``help`` text, and ``options`` for ``argparse``'s
    ``add_argument``. ``from_flag(value, flag)`` turns the parsed value into the field's, where they differ
    (``--img-size 416`` -> ``(416, 416)``). ``overrides``: the hyperparameter a training setting replaces when
    given (``"batch"`` for ``batch_size``). ``short``: a one-letter spelling of the flag too (``"-n"``)."""
    if not help.strip():
        raise ValueError(f"the setting {flag or ''} needs a help text")
    return dataclasses.field(default=default, metadata={_KEY: Flag(flag, help, dict(options), from_flag, overrides,
                                                                   short)})


def declaration(field: dataclasses.Field) -> Flag:
    """The :class:`Flag` a field was declared with (:func:`setting`); a plain field is a ``TypeError``."""
    if _KEY not in field.metadata:
        raise TypeError(f"the field {field.name} is not declared with yolo.settings.declare.setting()")
    return field.metadata[_KEY]


def declared(cls: type) -> Iterator[Tuple[dataclasses.Field, Flag]]:
    """Each field of the settings dataclass ``cls`` with its declaration, in field order."""
    for field in dataclasses.fields(cls):
        yield field, declaration(field)


def with_settings_signature(function: Callable, cls: type) -> Callable:
    """``function``, whose ``**settings`` takes the fields of ``cls``, with a signature that names them: each
    field becomes a keyword-only parameter with its default (what ``help()`` and editors show). Returns
    ``function`` itself."""
    own = inspect.signature(function)
    kept = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    fields = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
              for f in dataclasses.fields(cls)]
    function.__signature__ = own.replace(parameters=kept + fields)
    return function


__all__ = ["Flag", "declaration", "declared", "setting", "with_settings_signature"]
