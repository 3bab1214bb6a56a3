"""Reading the YAML files a user gives (dataset configs, hyperparameters): safe, and bounded.

``yaml.safe_load`` builds no objects, but it follows aliases: nine levels of ``&a [*b, *b, ...]`` in ten lines
expand to billions of values once anything walks them (a 312 MB error line, gigabytes of memory). None of our
files needs an alias, so :func:`load_yaml` refuses them, with the line; and it refuses a file over
:data:`MAX_YAML_BYTES` before parsing it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

import yaml

MAX_YAML_BYTES = 16 << 20  # 16 MiB: a names list of 100,000 classes takes about 2 MiB


class _NoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases (``*name``)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} refused: write the values out "
                                              "(aliases are not accepted in this file)", event.start_mark)
        return super().compose_node(parent, index)


def load_yaml(path: Union[str, "os.PathLike[str]"]) -> Any:
    """The YAML document in ``path``, without aliases. Raises ``yaml.YAMLError`` (with ``problem_mark`` giving
    the line) for bad YAML or an alias, and ``ValueError`` for a file over :data:`MAX_YAML_BYTES`."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_YAML_BYTES:
        raise ValueError(f"{path}: {size:,} bytes, more than the {MAX_YAML_BYTES:,} a settings file may have")
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_NoAliasLoader)  # noqa: S506 (a SafeLoader)


__all__ = ["MAX_YAML_BYTES", "load_yaml"]
