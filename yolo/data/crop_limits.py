"""Which crop settings the augmentation pipelines can draw from: ``jitter`` and ``resize`` (of a cfg's last
``[yolo]``, or ``augment:`` in ``--hyp``) checked against what Darknet's src/data.c computes with them, so that a
value that cannot work is refused up front, at its cfg line or hyp key, instead of failing in a loader worker."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from yolo.counts import MAX_IMAGE_SIDE

# The largest side of a crop margin Darknet keeps in a C int (src/data.c: int min_rdw = ow*(1 - 1/resize)/2) for
# an image of the largest side: a zoom past it overflows the int (undefined in C) and cannot work.
MAX_ZOOM = float(np.float32(2 ** 31 / (MAX_IMAGE_SIDE / 2)))


def crop_problem(pipeline: str, jitter: float, resize: float) -> Optional[Tuple[str, str]]:
    """``(key, problem)`` for crop settings the pipeline cannot draw from, else None.

    ``resize`` zooms the crop out to ``1/resize`` or in to ``resize`` times the image side: as a float32 it must
    be a positive number whose zoom fits :data:`MAX_ZOOM`. In Darknet's build without OpenCV (the ``darknet``
    pipeline) each side of the crop moves in by up to ``jitter`` times the image side plus the zoom's
    ``(1 - 1/resize) / 2``: from ``2 * jitter + 1 - 1/resize >= 1`` on, a crop of no pixels can be drawn, which
    that build cannot load (``crop_image`` of a size <= 0; its OpenCV build draws the whole image instead, as
    the ``darknet_opencv`` pipeline does)."""
    r32 = float(np.float32(resize))
    if not (r32 > 0 and 1 / r32 <= MAX_ZOOM and r32 <= MAX_ZOOM):
        return "resize", (f"resize={resize:g} is not a zoom a crop can take: between {1 / MAX_ZOOM:.3g} and "
                          f"{MAX_ZOOM:.0f} (as a float32, its crop margins in a C int)")
    zoom_in = max(r32, 1.0)
    if pipeline == "darknet" and 2 * jitter + 1 - 1 / zoom_in >= 1:
        limit = 1 / (2 * zoom_in)
        return "jitter", (f"jitter={jitter:g} (with resize={resize:g}) can draw a crop of no pixels, which Darknet's "
                          f"build without OpenCV cannot load: it must be below {limit:g} (or train with Darknet's "
                          "OpenCV pipeline, augment: {pipeline: darknet_opencv}, which takes the whole image then)")
    return None


__all__ = ["MAX_ZOOM", "crop_problem"]
