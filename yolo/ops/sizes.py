"""Network input sizes: one type, one normaliser, one stride check.

A size is always ``(height, width)`` in pixels (:data:`ImageSize`). Users write it several ways: ``416``
(square), ``[416]``, ``[320, 416]`` / ``(320, 416)`` (height, width), or nothing (the caller's default: the size a
checkpoint records, else the cfg's ``[net]`` size). :func:`image_size` turns each into ``(height, width)``;
:func:`check_stride` refuses a size the network cannot take (a side that is not a positive multiple of its
stride, 32 for YOLOv3). Errors are one line naming where the value came from (a flag, a file and key).

Imports nothing but the standard library, so the command-line parsers can use it without loading torch.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

from yolo.errors import ConfigError

__all__ = ["ImageSize", "SizeLike", "image_size", "check_stride", "checked_image_size"]

ImageSize = Tuple[int, int]  # (height, width) in pixels
SizeLike = Union[int, Sequence[int]]  # 416, [416], [h, w], (h, w)


def _is_int(value) -> bool:
    """An integer side (``numpy`` integers too, not ``bool``)."""
    return not isinstance(value, bool) and hasattr(value, "__index__")


def image_size(value: Optional[SizeLike], where: str, default: Optional[ImageSize] = None) -> ImageSize:
    """``value`` as ``(height, width)``; ``None`` gives ``default`` (itself ``None`` -> :class:`ConfigError`).

    Args:
        value: ``416``, ``[416]``, ``[h, w]`` or ``(h, w)``; sides are positive integers.
        where: what the value is, for the error (``"--img-size"``, ``"hyp.yaml: img_size"``).
        default: the size to use when ``value`` is ``None``.
    """
    if value is None:
        if default is None:
            raise ConfigError(f"{where}: no image size given")
        value = default
    if _is_int(value):
        sides: Tuple = (value, value)
    elif isinstance(value, (list, tuple)) and len(value) in (1, 2) and all(_is_int(v) for v in value):
        sides = (value[0], value[-1])
    else:
        raise ConfigError(f"{where}: an image size is one integer or two (height width), got {value!r}")
    size = (int(sides[0]), int(sides[1]))
    if min(size) <= 0:
        raise ConfigError(f"{where}: image sides must be positive, got {size[0]}x{size[1]}")
    return size


def check_stride(size: ImageSize, stride: int, where: str) -> ImageSize:
    """``size`` unchanged when both sides are multiples of the network's ``stride``, else :class:`ConfigError`."""
    if size[0] % stride or size[1] % stride:
        raise ConfigError(f"{where}: {size[0]}x{size[1]} must be a multiple of the network stride {stride} "
                          f"(e.g. {_nearest(size[0], stride)}x{_nearest(size[1], stride)})")
    return size


def checked_image_size(value: Optional[SizeLike], stride: int, where: str,
                       default: Optional[ImageSize] = None) -> ImageSize:
    """:func:`image_size` then :func:`check_stride`: the usual call for a network's input."""
    return check_stride(image_size(value, where, default), stride, where)


def _nearest(side: int, stride: int) -> int:
    """The multiple of ``stride`` nearest ``side`` (at least ``stride``)."""
    return max(stride, int(round(side / stride)) * stride)
