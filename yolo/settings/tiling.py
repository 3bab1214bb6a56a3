"""Sliced detection's settings (:class:`yolo.inference.tiling.TiledDetector`): the detect tool's ``--tile`` flags."""
from __future__ import annotations

from dataclasses import dataclass

from yolo.settings.declare import setting
from yolo.settings.values import number

TILE_MERGES = ("nms", "greedy")  # yolo.inference.tiling.MERGE_KINDS


# 1 would never advance; past 0.95 a slice moves by under 5% of its size (hundreds of slices)
tile_overlap = number(float, 0.0, 0.95, "the tile overlap")


@dataclass
class TileOptions:
    """Detection on overlapping slices of the network's input size plus the whole image, merged per class."""

    tile: bool = setting(False, "--tile", action="store_true",
                         help="detect on overlapping slices of the network's input size plus the whole image "
                              "(small objects in large images), merged per class")
    tile_overlap: float = setting(0.2, "--tile-overlap", type=tile_overlap,
                                  help="with --tile: the fraction of a slice shared with its neighbour")
    tile_merge: str = setting("nms", "--tile-merge", choices=list(TILE_MERGES),
                              help="with --tile: how the slices' boxes are merged: nms (the cfg's NMS kind) or "
                                   "greedy (SAHI's greedy merging of boxes cut by a slice's edge)")


__all__ = ["TILE_MERGES", "TileOptions", "tile_overlap"]
