"""What ``tools/anchors.py`` takes: :class:`AnchorsOptions`, each setting declared once with its flag and help.

Imports only the standard library and the settings' own modules (and the counts' bounds).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from yolo.counts import MAX_ANCHORS
from yolo.ops.sizes import ImageSize
from yolo.settings.common import img_size_setting
from yolo.settings.declare import setting
from yolo.settings.values import number, seed_value

# -n: 0 is refused, not read as "not given" (the cfg's count, else 9); the cfg's own count has the same bound.
anchor_count = number(int, 1, MAX_ANCHORS, "the anchor count")


@dataclass
class AnchorsOptions:
    """The anchors tool's settings (Darknet's ``detector calc_anchors``)."""

    data: str = setting(None, "--data", required=True,
                        help="dataset YAML or Darknet .data file (its train split's labels are used)")
    cfg: Optional[str] = setting(
        None, "--cfg", help="Darknet cfg: default input size ([net] width, height) and anchor count ([yolo] num)")
    num_of_clusters: Optional[int] = setting(None, "--num-of-clusters", short="-n", type=anchor_count,
                                             help="number of anchors (default: the cfg's, else 9)")
    img_size: Optional[ImageSize] = img_size_setting("network input: S or H W (default: the cfg's, else 416)")
    split: str = setting("train", "--split", choices=["train", "val"], help="which split's labels")
    seed: int = setting(0, "--seed", type=seed_value, help="seed of the initial draw")
    write: Optional[Path] = setting(None, "--write", type=Path, help="write a copy of --cfg with these anchors here")


__all__ = ["AnchorsOptions", "anchor_count"]
