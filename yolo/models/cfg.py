"""Darknet ``.cfg`` text -> a list of :class:`Section` objects, each with its line numbers.

No torch here: this module only reads text and gives typed access to options. Everything it
raises is a :class:`CfgError` that names the file, the line and what is wrong.

Darknet's own reader strips every space and tab from a line, skips lines that start with
``#`` or ``;``, and keeps the *first* value when a key repeats; we do the same (and warn).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union
from yolo.errors import CfgError, shown
from yolo.files.paths import special_file

logger = logging.getLogger(__name__)

_MISSING = object()


@dataclass
class Section:
    """One ``[type]`` block of a cfg.

    ``options`` maps key -> raw string value; ``option_lines`` maps key -> its line number.
    ``index`` is the Darknet layer index (``[net]`` is -1, the first layer after it is 0).
    """

    type: str
    line: int
    source: str = "<cfg>"
    options: Dict[str, str] = field(default_factory=dict)
    option_lines: Dict[str, int] = field(default_factory=dict)
    index: int = -1
    used: set = field(default_factory=set, repr=False)

    # ----------------------------------------------------------------- errors
    def error(self, message: str, key: Optional[str] = None) -> CfgError:
        """A :class:`CfgError` located at ``key``'s line (or the section header)."""
        line = self.option_lines.get(key, self.line) if key else self.line
        return CfgError(f"[{self.type}] (layer {self.index}): {message}", self.source, line)

    # ------------------------------------------------------------ typed access
    def has(self, key: str) -> bool:
        return key in self.options

    def _raw(self, key: str, default):
        self.used.add(key)
        if key in self.options:
            return self.options[key]
        if default is _MISSING:
            raise self.error(f"missing required option '{key}'")
        return None

    def get_str(self, key: str, default=_MISSING) -> str:
        raw = self._raw(key, default)
        return default if raw is None else raw

    def get_int(self, key: str, default=_MISSING) -> int:
        raw = self._raw(key, default)
        if raw is None:
            return default
        try:
            # Darknet reads ints with atoi, which accepts "1.0"-style values only up to the dot.
            return int(raw) if "." not in raw else int(float(raw))
        except ValueError:
            raise self.error(f"option '{key}={raw}' is not an integer", key) from None

    def get_count(self, key: str, default, high: int, low: int = 1) -> int:
        """An integer count (``num``, ``classes``) in ``[low, high]``, checked before anything is allocated with
        it (limits: :mod:`yolo.counts`)."""
        value = self.get_int(key, default)
        if not low <= value <= high:
            raise self.error(f"'{key}={value}' is out of range: it must be between {low} and {high:,}", key)
        return value

    def get_float(self, key: str, default=_MISSING) -> float:
        raw = self._raw(key, default)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise self.error(f"option '{key}={raw}' is not a number", key) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise self.error(f"option '{key}={raw}' is not a finite number", key)
        return value

    def _items(self, key: str, raw: str) -> List[str]:
        """The comma-separated items of ``raw`` (none for an empty value). An empty item between commas or after
        the last one is a cfg error: Darknet's parser reads it as a 0 (atoi/atof of an empty string), which
        for ``layers`` names layer 0, for ``mask`` adds anchor 0, for ``anchors`` gives a zero size."""
        if raw == "":
            return []
        items = raw.split(",")
        if "" in items:
            raise self.error(f"option '{key}={raw}' has an empty value between commas or at the end (Darknet "
                             "reads it as 0)", key)
        return items

    def get_ints(self, key: str, default=_MISSING) -> List[int]:
        raw = self._raw(key, default)
        if raw is None:
            return list(default) if default is not None else default
        items = self._items(key, raw)
        try:
            return [int(v) for v in items]
        except ValueError:
            raise self.error(f"option '{key}={raw}' must be a comma-separated list of integers", key) from None

    def get_floats(self, key: str, default=_MISSING) -> List[float]:
        raw = self._raw(key, default)
        if raw is None:
            return list(default) if default is not None else default
        items = self._items(key, raw)
        try:
            values = [float(v) for v in items]
        except ValueError:
            raise self.error(f"option '{key}={raw}' must be a comma-separated list of numbers", key) from None
        if any(v != v or v in (float("inf"), float("-inf")) for v in values):
            raise self.error(f"option '{key}={raw}' has a value that is not finite", key)
        return values

    def unused_options(self) -> List[str]:
        """Options present in the cfg that no builder read."""
        return [k for k in self.options if k not in self.used]


CfgSource = Union[str, Path]


def parse_cfg(path: CfgSource) -> List[Section]:
    """Read a cfg file. A missing or unreadable file is a :class:`CfgError`."""
    path = Path(path)
    special = special_file(path)
    if special is not None:  # a FIFO would block the read, /dev/zero never end it
        raise CfgError(f"cannot read cfg file ({special})", str(path))
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise CfgError("cfg file not found", str(path)) from None
    except (IsADirectoryError, PermissionError, OSError) as exc:
        raise CfgError(f"cannot read cfg file ({exc.strerror or exc})", str(path)) from None
    return parse_cfg_text(text, source=str(path))


def parse_cfg_text(text: str, source: str = "<cfg>") -> List[Section]:
    """Parse cfg text into sections. The first section must be ``[net]`` (or ``[network]``).

    Section and option names are lower-cased keys as Darknet writes them; values stay raw strings.
    A UTF-8 byte order mark (which some Windows editors write) at the start is skipped.
    """
    sections: List[Section] = []
    if text.startswith("\ufeff"):
        text = text[1:]
    for lineno, raw_line in enumerate(text.splitlines(), start=1):
        # Darknet strips all whitespace (and NULs) from a line before reading it.
        line = "".join(ch for ch in raw_line if not ch.isspace() and ch != "\0")
        if not line or line[0] in "#;":
            continue
        if line[0] == "[":
            if not line.endswith("]") or len(line) < 3:
                raise CfgError(f"malformed section header '{shown(raw_line.strip())}'", source, lineno)
            name = line[1:-1].lower()
            if not name.replace("_", "").isalnum():
                raise CfgError(f"malformed section header '{shown(raw_line.strip())}'", source, lineno)
            sections.append(Section(type=name, line=lineno, source=source))
            continue
        if "=" not in line:
            raise CfgError(f"expected 'key=value' or '[section]', got '{shown(raw_line.strip())}'", source, lineno)
        if not sections:
            raise CfgError(f"option '{shown(raw_line.strip())}' comes before any [section]", source, lineno)
        key, value = line.split("=", 1)
        if "#" in value:  # a trailing comment; Darknet would keep it glued to the value
            value = value.split("#", 1)[0]
        if not key:
            raise CfgError(f"option without a name: '{shown(raw_line.strip())}'", source, lineno)
        section = sections[-1]
        if key in section.options:
            logger.warning("%s:%d: option '%s' repeats in [%s]; keeping the first value (as Darknet does)",
                           source, lineno, key, section.type)
            continue
        section.options[key] = value
        section.option_lines[key] = lineno

    if not sections:
        raise CfgError("no sections found: this is not a Darknet cfg", source, None)
    if sections[0].type not in ("net", "network"):
        raise CfgError(f"the first section must be [net], got [{sections[0].type}]", source, sections[0].line)
    for i, section in enumerate(sections):
        section.index = i - 1
    for section in sections[1:]:
        if section.type in ("net", "network"):
            raise CfgError("[net] may appear only once, as the first section", source, section.line)
    if len(sections) == 1:
        raise CfgError("the cfg has a [net] section but no layers", source, sections[0].line)
    return sections


def sections_to_text(sections: Sequence[Section]) -> str:
    """Write sections back as cfg text (used when a cfg is rebuilt from a checkpoint)."""
    out = []
    for section in sections:
        out.append(f"[{section.type}]")
        out.extend(f"{k}={v}" for k, v in section.options.items())
        out.append("")
    return "\n".join(out)
