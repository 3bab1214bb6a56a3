"""What ``tools/convert.py`` takes: :class:`ConvertOptions`, each setting declared once with its flag and help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from yolo.settings.declare import setting
from yolo.settings.values import positive_int


@dataclass
class ConvertOptions:
    """Weights from Darknet ``.weights`` to our ``.pt`` checkpoints or back (the file extensions decide)."""

    cfg: Optional[str] = setting(None, "--cfg", help="Darknet .cfg (needed for .weights input; optional for .pt)")
    weights: str = setting(None, "--weights", required=True, help="input: Darknet .weights or our .pt")
    output: str = setting(None, "--output", required=True,
                          help="output: a .pt/.pth checkpoint, else Darknet .weights")
    cutoff: Optional[int] = setting(None, "--cutoff", type=positive_int,
                                    help="use only layers 0..N-1 (read a partial file / write a partial file)")
    names: Optional[str] = setting(None, "--names", help="optional .names file stored in the .pt")


__all__ = ["ConvertOptions"]
