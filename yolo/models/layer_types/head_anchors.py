"""The anchors of a ``[yolo]``, ``[Gaussian_yolo]`` or ``[region]`` head, read as Darknet's parser reads them.

Darknet (src/parser.c parse_yolo, parse_gaussian_yolo, parse_region) allocates ``2 * num`` anchor values, fills
them with 0.5 (make_yolo_layer, make_gaussian_yolo_layer, make_region_layer) and copies the values the
``anchors`` list gives over the first ones, without comparing the two counts:

* a list shorter than ``2 * num`` (an odd count among them: a dangling half pair) leaves the missing values at
  0.5 pixels ([region]: 0.5 cells). Darknet ships a cfg with such a list (cspx-p7-mish_hp.cfg: a missing comma
  glues two values), so it is accepted with a warning naming the file, line and counts, and Darknet's 0.5;
* a longer list: [yolo] and [region] stop reading at ``2 * num`` (the extra values are unused; warning), while
  [Gaussian_yolo] writes them past its buffer (a heap overflow in Darknet): refused;
* a [yolo] ``mask`` index at or beyond ``num`` makes Darknet read past its anchors (whatever memory follows).
  Refused, unless the list itself gives that anchor: cspx-p7-mish.cfg lists 20 anchors for num=16 and masks
  up to 19; such a head takes the listed values (with a warning that Darknet's are undefined there).
"""
from __future__ import annotations

import logging
from typing import List, Sequence

from yolo.models.cfg import Section
from yolo.models.layer_types.registry import positive_anchors

logger = logging.getLogger(__name__)

MISSING_ANCHOR_VALUE = 0.5  # what Darknet's make_*_layer leaves in the anchor values a cfg does not give


def head_anchors(section: Section, num: int, mask: Sequence[int], overflow_refused: bool = False) -> List[float]:
    """The flat anchor values (w0, h0, w1, h1, ...) of a head with ``num`` anchors and ``mask``, as Darknet has
    them after parsing (module docstring): ``2 * num`` values, or more for a [yolo] mask beyond ``num`` whose
    anchors the list gives. ``overflow_refused``: a list longer than ``2 * num`` is an error ([Gaussian_yolo]).

    The caller has checked that ``anchors`` is present (or supplies Darknet's default) and that every mask
    index is >= 0. Errors are :class:`yolo.errors.CfgError` at the ``anchors`` or ``mask`` line.
    """
    given = positive_anchors(section, section.get_floats("anchors", []))
    where = f"{section.source}:{section.option_lines.get('anchors', section.line)}"
    need = 2 * num
    if len(given) > need and overflow_refused:
        raise section.error(f"'anchors' has {len(given)} values but num={num} takes {need} ({num} w,h pairs): "
                            "Darknet writes the extra values past its anchors", "anchors")
    beyond = sorted({m for m in mask if m >= num})
    if beyond:
        unlisted = [m for m in beyond if 2 * m + 1 >= len(given)]
        if unlisted:
            raise section.error(f"mask {unlisted} refers to anchors outside 0..{num - 1} (num={num}, "
                                f"{len(given)} anchor values): Darknet reads past its anchors there", "mask")
        logger.warning("%s: [%s] mask %s is beyond num=%d: using the listed anchors (Darknet reads past its "
                       "%d anchor values there)", where, section.type, beyond, num, need)
        need = 2 * (max(beyond) + 1)
    if len(given) < 2 * num:
        missing = list(range(len(given) // 2, num))
        logger.warning("%s: [%s] 'anchors' has %d values, num=%d takes %d: anchor%s %s get%s Darknet's %g for "
                       "the missing values", where, section.type, len(given), num, 2 * num,
                       "s" if len(missing) > 1 else "", ", ".join(map(str, missing)),
                       "" if len(missing) > 1 else "s", MISSING_ANCHOR_VALUE)
    elif len(given) > need:
        logger.warning("%s: [%s] 'anchors' has %d values, num=%d takes %d: the last %d are unused, as in Darknet",
                       where, section.type, len(given), num, 2 * num, len(given) - need)
    return (given + [MISSING_ANCHOR_VALUE] * need)[:need]
