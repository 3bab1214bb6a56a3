"""The settings several tools share, declared once, so each flag has one name, one default and one help text
wherever it appears: ``--device``, ``--verbose``, ``--no-progress``, and ``--img-size`` (one declaration; each
tool words its default).

The settings classes of train, detect and eval declare their fields with :func:`device_setting` and
:func:`progress_setting`; the tools whose settings have no Python API (benchmark, export, anchors, convert, the
demo, the GPU report) take these flags from :class:`ToolOptions` (:func:`yolo.cli.flags.common.add_common_flags`).

Imports only the standard library, :mod:`yolo.settings.declare` and :mod:`yolo.settings.values`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from yolo.settings.declare import setting
from yolo.settings.values import image_side, size_from_flag

DEVICE_HELP = "cpu, cuda, cuda:N or a GPU index (default: cuda if available)"
PROGRESS_HELP = "no progress bars (always off when stderr is not a terminal)"
VERBOSE_HELP = "debug logging"


def device_setting() -> Any:
    """``--device``: where the model runs (None: CUDA when present, else the CPU)."""
    return setting(None, "--device", help=DEVICE_HELP)


def progress_setting() -> Any:
    """``--no-progress``: the progress bars (True: shown where stderr is a terminal)."""
    return setting(True, "--no-progress", action="store_false", help=PROGRESS_HELP)


def verbose_setting() -> Any:
    """``--verbose``: debug logging."""
    return setting(False, "--verbose", action="store_true", help=VERBOSE_HELP)


RESAMPLERS = ("darknet", "opencv")  # yolo.ops.letterbox.RESAMPLERS (this module imports no OpenCV)


def resample_setting() -> Any:
    """``--resample``: how an image is resampled to the network input (None: the checkpoint's, else Darknet's)."""
    return setting(
        None, "--resample", choices=list(RESAMPLERS),
        help="darknet: Darknet's own resize_image/letterbox_image in float, the input of its detector test and "
             "detector map (its scores to the printed digit); opencv: cv2.resize bilinear on uint8, the input of "
             "OpenCV DNN's blobFromImage (default: how a checkpoint of ours was validated, else darknet)")


DECODERS = ("opencv", "stb")  # yolo.files.images.DECODERS (this module imports no OpenCV)


def setting_decode_train() -> Any:
    """``--decode`` of training: how the train and val images become pixels (None: OpenCV's)."""
    return setting(
        None, "--decode", choices=list(DECODERS),
        help="opencv: cv2.imdecode, as Darknet built with OpenCV reads images; stb: stb_image, as Darknet's default "
             "build (OPENCV=0) reads them, for the training images and every evaluation (recorded in the "
             "checkpoints; compiled with the system C compiler on first use) (default: opencv)")


def decode_setting() -> Any:
    """``--decode``: how an image file becomes pixels (None: the checkpoint's, else OpenCV's)."""
    return setting(
        None, "--decode", choices=list(DECODERS),
        help="opencv: cv2.imdecode, as Darknet built with OpenCV reads images (EXIF rotation applied); stb: "
             "stb_image, as Darknet's default build (OPENCV=0) reads them (its detector test percentages to the "
             "digit; compiled with the system C compiler on first use) (default: a checkpoint's record, else opencv)")


def img_size_setting(help: str, **declaration: Any) -> Any:
    """``--img-size``: the network input, ``S`` (square) or ``H W``, parsed into an
    :data:`~yolo.ops.sizes.ImageSize` (:func:`~yolo.settings.values.size_from_flag`); None, not given: the
    tool's default, which ``help`` words. ``declaration``: more of :func:`~yolo.settings.declare.setting`'s
    arguments (``overrides="img_size"`` for training)."""
    return setting(None, "--img-size", type=image_side, nargs="+", from_flag=size_from_flag, help=help,
                   **declaration)


@dataclass
class ToolOptions:
    """The shared settings, for the tools whose other flags are their own."""

    device: Optional[str] = device_setting()
    verbose: bool = verbose_setting()
    progress: bool = progress_setting()


__all__ = ["DEVICE_HELP", "PROGRESS_HELP", "VERBOSE_HELP", "ToolOptions", "device_setting", "img_size_setting",
           "progress_setting", "verbose_setting"]
