"""Class names from a Darknet ``.names`` file, and where to find one for a cfg that comes without."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Union

from yolo.counts import MAX_CLASSES
from yolo.errors import DataError, shown
from yolo.files.paths import special_file
from yolo.files.small_text import read_small_text


def read_names(path: Union[str, "os.PathLike[str]"]) -> List[str]:
    """Class names, one per line, surrounding spaces ignored. Darknet (``get_labels``) reads every line as a class,
    a blank one too, so a blank line before the last name would be a class here and not there, or shift every name
    after it: it is a :class:`DataError` at its line; blank lines after the last name are ignored. A missing file
    is a one-line ``FileNotFoundError`` naming it; a file that is not UTF-8 text (UTF-16, binary) a
    :class:`DataError` naming it; more than :data:`yolo.counts.MAX_CLASSES` names a ``ValueError``."""
    path = Path(path)
    special = special_file(path)
    if special is not None:  # a FIFO would block the read, /dev/zero never end it
        raise DataError(f"cannot read the names file: {special}", path)
    try:
        lines = read_small_text(path, "names file").splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: names file not found") from None
    except UnicodeDecodeError as exc:  # the codec's own message does not say which file
        raise DataError(f"names file is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): "
                        "save it as UTF-8, one name a line", path) from None
    names = [line.strip() for line in lines]
    while names and not names[-1]:
        names.pop()
    if "" in names:
        line = names.index("") + 1
        raise DataError(f"line {line} is blank: Darknet reads it as class {line - 1}, a class without a name; name "
                        "the class, or remove the line if it is none (each line is the class of its number, from 0)",
                        path, line)
    if len(names) > MAX_CLASSES:
        raise ValueError(f"{path}: {len(names):,} class names, more than the {MAX_CLASSES:,} allowed")
    return names


def names_difference(before: List[str], now: List[str]) -> Optional[str]:
    """How the class names ``now`` differ from ``before``, in words (None: the same list): the counts, or the first
    classes whose name moved (``class 0 was 'cat', now 'dog'``), with whether the same names were reordered."""
    before, now = list(before), list(now)
    if before == now:
        return None
    if len(before) != len(now):
        return f"{len(before)} class names before, {len(now)} now"
    moved = [f"class {i} was '{shown(a, 40)}', now '{shown(b, 40)}'" for i, (a, b) in enumerate(zip(before, now))
             if a != b]
    what = "reordered" if sorted(before) == sorted(now) else "changed"
    return f"the class names {what} ({'; '.join(moved[:3])}{'; ...' if len(moved) > 3 else ''})"


def check_names_count(names: List[str], num_classes: int, source: Optional[Union[str, "os.PathLike[str]"]]) -> None:
    """A ``ValueError`` when there are not ``num_classes`` names, naming the names file ``source`` (None: the names
    were given as a list)."""
    if len(names) != num_classes:
        where = f"{source}: " if source is not None else ""
        raise ValueError(f"{where}{len(names)} class names given but the model has {num_classes} classes")


def names_beside_cfg(cfg: Union[str, "os.PathLike[str]"], num_classes: int) -> Optional[Path]:
    """A ``.names`` file for a Darknet cfg that comes without names, or None.

    Looked for where Darknet users keep them: beside the cfg, and in the ``data`` folder next to the cfg's
    folder (Darknet's ``cfg/yolov3.cfg`` with ``data/coco.names``). ``coco.names`` comes first; otherwise the
    one ``.names`` file there with ``num_classes`` names (``voc.names`` for a 20-class VOC cfg). A file whose
    count differs from ``num_classes`` is never taken.
    """
    folder = Path(cfg).resolve().parent
    folders = [folder, folder.parent / "data"]
    fits = []
    for where in folders:
        for path in sorted(where.glob("*.names")) if where.is_dir() else []:
            try:
                count = len(read_names(path))
            except (OSError, UnicodeDecodeError, ValueError):
                continue
            if count == num_classes:
                fits.append(path)
    coco = [p for p in fits if p.name == "coco.names"]
    if coco:
        return coco[0]
    return fits[0] if len(fits) == 1 else None
