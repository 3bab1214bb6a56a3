"""Reading the YAML files a user gives (dataset configs, hyperparameters): safe, and bounded.

``yaml.safe_load`` builds no objects, but it follows aliases: nine levels of ``&a [*b, *b, ...]`` in ten lines
expand to billions of values once anything walks them (a 312 MB error line, gigabytes of memory). None of our
files needs an alias, so :func:`load_yaml` refuses them, with the line; and it refuses a file over
:data:`MAX_YAML_BYTES` before parsing it. It also refuses, with the line, what PyYAML lets through: nesting deeper
than :data:`MAX_YAML_DEPTH` (PyYAML composes recursively: 5,000 ``[`` were a ``RecursionError``) and a key given
twice in one mapping (PyYAML keeps the last without a word).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Tuple, Union

import yaml

MAX_YAML_BYTES = 16 << 20  # 16 MiB: a names list of 100,000 classes takes about 2 MiB
MAX_YAML_DEPTH = 50  # our files nest 3 levels (augment: {...}); far below Python's recursion limit


class _NoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases (``*name``), nesting deeper than :data:`MAX_YAML_DEPTH` and a key
    repeated in a mapping."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} refused: write the values out "
                                              "(aliases are not accepted in this file)", event.start_mark)
        depth = getattr(self, "_depth", 0)
        if depth >= MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_YAML_DEPTH} levels deep: not a "
                                              "settings file", self.peek_event().start_mark)
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first_line = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first_line.get(key)
                except TypeError:  # an unhashable key: the base constructor says so
                    continue
                if earlier is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice (first at line {earlier}): keep one",
                        key_node.start_mark)
                first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def yaml_problem(exc: yaml.YAMLError) -> Tuple[str, Optional[int]]:
    """A YAML error as one line: what is wrong (PyYAML's ``problem``, without its multi-line position text) and
    the 1-based line it is at (None when unknown)."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None)
    text = f"{context}: {problem}" if context else problem
    return text, (mark.line + 1 if mark is not None else None)


def load_yaml(path: Union[str, "os.PathLike[str]"]) -> Any:
    """The YAML document in ``path``, without aliases. Raises ``yaml.YAMLError`` (with ``problem_mark`` giving
    the line) for bad YAML or an alias, and ``ValueError`` for a file over :data:`MAX_YAML_BYTES`."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_YAML_BYTES:
        raise ValueError(f"{path}: {size:,} bytes, more than the {MAX_YAML_BYTES:,} a settings file may have")
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_NoAliasLoader)  # noqa: S506 (a SafeLoader)


__all__ = ["MAX_YAML_BYTES", "MAX_YAML_DEPTH", "load_yaml", "yaml_problem"]
