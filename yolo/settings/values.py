"""How a command-line value is read: checked numbers, and ``--img-size``'s one or two values.

The number readers are argparse ``type`` functions: a bad value is refused while the flags are parsed, with
the flag named (``error: argument --batch-size: 0 is out of range: the value must be at least 1``).
Imports only the standard library and :mod:`yolo.ops.sizes`, so the tools' parsers stay free of torch.
"""
from __future__ import annotations

import argparse
import math
from typing import Callable, Optional, Sequence

from yolo.errors import ConfigError
from yolo.ops.sizes import ImageSize, image_size


def number(kind: Callable = float, low: Optional[float] = None, high: Optional[float] = None,
           what: str = "") -> Callable[[str], float]:
    """An argparse ``type``: a finite ``kind`` (int or float) within ``[low, high]`` (either bound optional)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {'an integer' if kind is int else 'a number'}") \
                from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        if (low is not None and value < low) or (high is not None and value > high):
            if high is None:
                bounds = f"at least {_bound(low)}"
            elif low is None:
                bounds = f"at most {_bound(high)}"
            else:
                bounds = f"between {_bound(low)} and {_bound(high)}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what or 'it'} must be {bounds}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _bound(value: float) -> str:
    """A range's end as a message writes it: an integer in full (4294967295, not 4.29497e+09)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def positive_float(high: float, what: str) -> Callable[[str], float]:
    """An argparse ``type``: a finite float above 0 (0 itself refused) and at most ``high``."""
    finite = number(float, None, high, what)

    def parse(text: str) -> float:
        value = finite(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be above 0 and at most {high:g}")
        return value
    parse.__name__ = "float"
    return parse


# The numeric flags the tools share.
fraction = number(float, 0.0, 1.0, "a threshold")            # --conf-thres, --iou-thres
positive_int = number(int, 1, None, "the value")             # --batch-size, --epochs, --max-det, ...
non_negative_int = number(int, 0, None, "the value")         # --workers, --freeze, --cutoff
image_side = number(int, 1, 8192, "an image side")           # --img-size values
# numpy's legacy seeding takes 32 bits, and the shuffle seeds torch with seed * 1_000_003 + epoch (a long long).
seed_value = number(int, 0, 2**32 - 1, "a seed")             # --seed
# --workers: each loading process holds a copy of the dataset; more than this is a typo, not a machine.
MAX_WORKERS = 64
worker_count = number(int, 0, MAX_WORKERS, "the number of loading processes")
# --threads: compute threads of one process; more than this is a typo, not a machine (each thread reserves its stack).
MAX_THREADS = 1024
thread_count = number(int, 1, MAX_THREADS, "the number of threads")
# --beta-nms: Darknet's DIoU-NMS subtracts (d^2/c^2)^beta_nms (src/box.c box_diounms): at 0 that is 1 and at a
# negative exponent up to infinity, so nothing is ever suppressed; it runs in float32, whose largest value bounds it.
nms_exponent = positive_float(3.4028234e38, "the DIoU-NMS exponent")


def _map_points(text: str) -> int:
    """``--points``: 0 (area under the curve) or N >= 2 recall points (Darknet divides by N - 1: 1 would make every
    AP 0)."""
    value = non_negative_int(text)
    if value == 1:
        raise argparse.ArgumentTypeError("1 is not a number of recall points: use 0 (area under the curve), 11, "
                                         "101 or any N >= 2")
    return value


map_points = _map_points                                     # --points (Darknet's -points)


def size_from_flag(values: Optional[Sequence[int]], flag: str) -> Optional[ImageSize]:
    """``--img-size``'s values (``S``, or ``H W``) as ``(height, width)``; ``None`` (not given) stays ``None``,
    the tool's default. More than two values is a :class:`ConfigError` naming ``flag``."""
    if values is None:
        return None
    if len(values) > 2:
        raise ConfigError(f"{flag} takes one value or two (height width), got {len(values)}")
    return image_size(list(values), flag)


__all__ = ["MAX_WORKERS", "fraction", "image_side", "nms_exponent", "non_negative_int", "number", "positive_float",
           "positive_int", "seed_value", "size_from_flag", "worker_count"]
