"""Class names from a Darknet ``.names`` file."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Union

from yolo.counts import MAX_CLASSES


def read_names(path: Union[str, "os.PathLike[str]"]) -> List[str]:
    """Class names, one per line; blank lines and surrounding spaces ignored. A missing file is a one-line
    ``FileNotFoundError`` naming it; more than :data:`yolo.counts.MAX_CLASSES` names a ``ValueError``."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: names file not found") from None
    names = [line.strip() for line in lines if line.strip()]
    if len(names) > MAX_CLASSES:
        raise ValueError(f"{path}: {len(names):,} class names, more than the {MAX_CLASSES:,} allowed")
    return names
