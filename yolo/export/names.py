"""The class names an exported file stores in its metadata."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from yolo.files.names import check_names_count, names_beside_cfg, read_names
from yolo.models.checkpoint import load_checkpoint_file


def export_names(names_file: Optional[Path], weights: Path, cfg: Optional[Path],
                 num_classes: int) -> Optional[List[str]]:
    """``names_file`` read, else the names a ``.pt`` checkpoint carries, else a ``.names`` file beside a Darknet
    cfg (:func:`yolo.files.names.names_beside_cfg`), else None. A count other than ``num_classes`` is a
    ``ValueError``."""
    if names_file is not None:
        names = read_names(names_file)
    elif Path(weights).suffix in (".pt", ".pth"):
        names = load_checkpoint_file(weights).get("names")
    else:
        found = names_beside_cfg(cfg, num_classes) if cfg is not None else None
        return read_names(found) if found is not None else None
    if names is not None:
        check_names_count(names, num_classes, names_file if names_file is not None else f"{weights} (its names)")
    return names
