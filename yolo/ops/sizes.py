"""Network input sizes: one type, one normaliser, one stride check.

A size is always ``(height, width)`` in pixels (:data:`ImageSize`), from where it enters (a flag, a YAML key,
a checkpoint's record, the cfg's ``[net]``) to the dataset and the Detector. Users write it several ways:
``416`` (square), ``[416]``, ``[320, 416]`` / ``(320, 416)`` (height, width), or nothing (the caller's default:
the size a checkpoint records, else the cfg's ``[net]`` size). :func:`image_size` turns each into
``(height, width)``; :func:`check_stride` refuses a size the network cannot take (a side that is not a
multiple of its stride, 32 for YOLOv3). Errors are one :class:`~yolo.errors.ConfigError` line (a
``ValueError``) naming where the value came from (``--img-size``, ``hyp.yaml: img_size``).

The tools print a size width first (:func:`size_text`: ``416x320``), as Darknet and OpenCV users write it. An
error about a value the user gave (``--img-size``, a YAML ``img_size``) shows it in the order it is written
there, height first, so that its suggestion can be typed back in.

Records written to YAML or a checkpoint hold the same two numbers as a list ``[height, width]`` (YAML's safe
dumper has no tuples); :func:`image_size` reads them back.

Imports nothing but the standard library and :mod:`yolo.errors`, so the command-line parsers can use it
without loading torch.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

from yolo.errors import ConfigError

__all__ = ["ImageSize", "SizeLike", "SIZE_RULE", "image_size", "check_stride", "checked_image_size", "size_text"]

ImageSize = Tuple[int, int]  # (height, width) in pixels
SizeLike = Union[int, Sequence[int]]  # 416, [416], [h, w], (h, w)

# How every tool picks its input size when none is given (yolo.models.preprocessing.chosen_input_size), in the
# words of the --img-size help.
SIZE_RULE = "the training size a checkpoint of ours records, else the cfg's [net] width/height, else 416"


def _is_int(value) -> bool:
    """An integer side (``numpy`` integers too; not ``bool``, not ``float``)."""
    return not isinstance(value, bool) and hasattr(value, "__index__")


def size_text(size: ImageSize) -> str:
    """``size`` ``(height, width)`` as every tool prints it: width first, ``f"{width}x{height}"``.

    Darknet and OpenCV users write sizes width by height (``416x416``; Darknet's cfg says ``width=`` before
    ``height=``), so the tools' lines do too, although the size is held height first.

    Example: ``size_text((320, 416)) == "416x320"``.
    """
    return f"{size[1]}x{size[0]}"


def image_size(value: Optional[SizeLike], where: str, default: Optional[SizeLike] = None) -> ImageSize:
    """``value`` as ``(height, width)``; ``None`` gives ``default`` (itself ``None``: :class:`ConfigError`).

    Args:
        value: ``416``, ``[416]``, ``[h, w]`` or ``(h, w)``; sides are positive integers.
        where: what the value is, for the error (``"--img-size"``, ``"hyp.yaml: img_size"``).
        default: the size to use when ``value`` is ``None`` (any form ``value`` may take).

    Example: ``image_size(416, "--img-size") == (416, 416)``; ``image_size([320, 416], "x") == (320, 416)``.
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
    """``size`` ``(h, w)`` unchanged when both sides are multiples of the network's ``stride``, else
    :class:`ConfigError` naming ``where`` and the nearest size that would do."""
    if int(stride) < 1:
        raise ConfigError(f"{where}: the network stride must be positive, got {stride}")
    if size[0] % stride or size[1] % stride:
        raise ConfigError(f"{where}: {size[0]}x{size[1]} must be a multiple of the network stride {stride} "
                          f"(e.g. {_nearest(size[0], stride)}x{_nearest(size[1], stride)})")
    return size


def checked_image_size(value: Optional[SizeLike], stride: int, where: str,
                       default: Optional[SizeLike] = None) -> ImageSize:
    """:func:`image_size` then :func:`check_stride`: the usual call for a network's input."""
    return check_stride(image_size(value, where, default), stride, where)


def _nearest(side: int, stride: int) -> int:
    """The multiple of ``stride`` nearest ``side`` (halfway: the larger; at least ``stride``)."""
    return max(stride, (side + stride // 2) // stride * stride)
