"""How a model's inputs are made, recorded in its checkpoint so that every tool feeds it the same way.

A training checkpoint (``best.pt``, ``last.pt``) holds ``preprocessing``::

    {"resize": "letterbox" | "stretch",   # how the trainer's validation resized each image
     "resample": "darknet" | "opencv",    # ... with Darknet's float resize_image or OpenCV's uint8 resize
     "decode": "opencv" | "stb",          # ... each file decoded by OpenCV or stb_image (absent: "opencv")
     "img_size": [height, width],         # the training input size
     "pipeline": "darknet" | "darknet_opencv" | "affine"}   # the training augmentation

The trainer validates with the resize its augmentation trains on (:func:`training_preprocessing`): this
framework's own ``affine`` pipeline letterboxes its crops, Darknet's pipelines letterbox only with the cfg's
``letter_box=1`` and stretch otherwise (as Darknet's ``detector map`` does). ``tools/detect.py`` and
``tools/eval.py`` then use the recorded resize and size unless ``--resize`` / ``--img-size`` are given, so one
model is always measured on one preprocessing. A model without a record (Darknet ``.weights``, a converted
``.pt``) follows its cfg, as Darknet does (:func:`cfg_resize_mode`), with Darknet's resampler.

The resampler (:func:`default_resample`): the trainer validates with Darknet's own ``resize_image``
(``"darknet"``); a checkpoint written before the record had ``resample`` was validated with OpenCV's
``cv2.resize`` and keeps it (``"opencv"``), unless ``--resample`` says otherwise.

The decode (:func:`default_decode`): the trainer reads images with OpenCV (``"opencv"``, also what a record
without ``decode`` means); ``--decode stb`` reads them as Darknet's default build does.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from yolo.counts import MAX_IMAGE_SIDE
from yolo.errors import shown
from yolo.models.layer_types.registry import positive
from yolo.ops.sizes import ImageSize, SizeLike, check_stride, image_size

RESIZE_MODES = ("letterbox", "stretch")
RESAMPLERS = ("darknet", "opencv")  # yolo.ops.letterbox.RESAMPLERS (this module loads no OpenCV)
RECORDLESS_RESAMPLE = "opencv"  # what a record without "resample" (older checkpoints) was validated with
DECODERS = ("opencv", "stb")  # yolo.files.images.DECODERS (this module loads no OpenCV)
RECORDLESS_DECODE = "opencv"  # what a record without "decode" (older checkpoints) was validated with


def cfg_resize_mode(model) -> str:
    """The pre-processing Darknet's ``detector test``/``detector map`` apply for ``model``'s cfg:
    ``"letterbox"`` when its ``[net]`` sets ``letter_box`` (non-zero), else ``"stretch"``."""
    net = getattr(model, "net", None)
    return "letterbox" if net is not None and net.get_int("letter_box", 0) else "stretch"


def training_preprocessing(augment: Mapping[str, Any], img_size: ImageSize, decode: str = "opencv") -> Dict[str, Any]:
    """The record for a run whose resolved augmentation settings are ``augment``
    (:func:`yolo.data.augment_hyp.augment_from_cfg`), whose input is ``img_size`` ``(h, w)`` and whose images
    are decoded by ``decode``."""
    pipeline = str(augment.get("pipeline", "darknet"))
    letterboxed = pipeline == "affine" or bool(float(augment.get("letter_box", 0) or 0))
    return {"resize": "letterbox" if letterboxed else "stretch", "resample": "darknet", "decode": decode,
            "img_size": [int(v) for v in img_size], "pipeline": pipeline}


def recorded_preprocessing(model) -> Optional[Dict[str, Any]]:
    """The record a model was loaded with (``model.preprocessing``, set by
    :func:`yolo.models.model.load_model` from a training checkpoint), or None."""
    record = getattr(model, "preprocessing", None)
    return record if isinstance(record, Mapping) else None


def checked_record(record: Any, where: str) -> Optional[Dict[str, Any]]:
    """A checkpoint's ``preprocessing`` entry checked (None when absent); anything malformed is a ``ValueError``
    naming ``where``."""
    if record is None:
        return None
    size = record.get("img_size") if isinstance(record, Mapping) else None
    if (not isinstance(record, Mapping) or record.get("resize") not in RESIZE_MODES
            or not isinstance(size, (list, tuple)) or len(size) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_IMAGE_SIDE for v in size)
            or record.get("resample", RECORDLESS_RESAMPLE) not in RESAMPLERS
            or record.get("decode", RECORDLESS_DECODE) not in DECODERS):
        raise ValueError(f"{where}: malformed 'preprocessing' entry {shown(repr(record))} (expected resize "
                         f"letterbox/stretch, img_size [height, width], sides 1 to {MAX_IMAGE_SIDE}, and, if given, "
                         "resample darknet/opencv, decode opencv/stb)")
    return {"resize": record["resize"], "resample": record.get("resample", RECORDLESS_RESAMPLE),
            "decode": record.get("decode", RECORDLESS_DECODE),
            "img_size": [int(v) for v in size], "pipeline": record.get("pipeline")}


def default_resize(model) -> str:
    """The resize a tool uses when none is asked for: the recorded one, else the cfg's."""
    record = recorded_preprocessing(model)
    return record["resize"] if record is not None else cfg_resize_mode(model)


def default_resample(model) -> str:
    """The resampler a tool uses when none is asked for: the recorded one (``"opencv"`` for a record written
    before records named it), else Darknet's (``"darknet"``)."""
    record = recorded_preprocessing(model)
    return record.get("resample", RECORDLESS_RESAMPLE) if record is not None else "darknet"


def default_decode(model) -> str:
    """The decode a tool uses when none is asked for: the recorded one, else OpenCV's (``"opencv"``)."""
    record = recorded_preprocessing(model)
    return record.get("decode", RECORDLESS_DECODE) if record is not None else RECORDLESS_DECODE


def default_img_size(model) -> Optional[ImageSize]:
    """The recorded training input ``(h, w)``, or None when the model carries no record."""
    record = recorded_preprocessing(model)
    return image_size(record["img_size"], "preprocessing: img_size") if record is not None else None


FALLBACK_SIZE = 416  # the input side when neither a flag, a checkpoint nor the cfg's [net] gives one


def net_input_size(net) -> Optional[ImageSize]:
    """The cfg's ``[net]`` ``(height, width)`` (a side it omits: 416, as Darknet's parser), or None when it sets
    neither; ``net`` is the cfg's first section (:class:`yolo.models.cfg.Section`). Two integers checked as the model
    checks them (a side below 1 is the cfg's error, naming its line), so already an ``ImageSize``."""
    if not (net.has("height") or net.has("width")):
        return None
    return (positive(net, "height", net.get_int("height", FALLBACK_SIZE)),
            positive(net, "width", net.get_int("width", FALLBACK_SIZE)))


def chosen_input_size(value: Optional[SizeLike], where: str, recorded: Optional[ImageSize],
                      net) -> Tuple[ImageSize, str]:
    """The one rule every tool (detect, the Detector, eval, export, benchmark) picks its input size by:
    ``value`` (the tool's ``--img-size``), else the training size a checkpoint of ours ``recorded``, else the
    cfg's ``[net]`` width/height (``net``, its first section; None: no cfg), else 416.

    Returns ``((height, width), why)`` with ``why`` the words a tool logs: ``"--img-size"``, ``"the checkpoint's
    training size"``, ``"the cfg's [net] width/height"`` or ``"416, the default (the cfg's [net] gives no size)"``.
    """
    if value is not None:
        return image_size(value, where), where
    if recorded is not None:
        return recorded, "the checkpoint's training size"
    from_cfg = net_input_size(net) if net is not None else None
    if from_cfg is not None:
        return from_cfg, "the cfg's [net] width/height"
    return (FALLBACK_SIZE, FALLBACK_SIZE), f"{FALLBACK_SIZE}, the default (the cfg's [net] gives no size)"


def model_input_choice(model, value: Optional[SizeLike], where: str) -> Tuple[ImageSize, str]:
    """:func:`chosen_input_size` for ``model`` (its checkpoint record and cfg), checked: ``((h, w), why)``.

    A size whose sides are not multiples of the network stride is a :class:`~yolo.errors.ConfigError` naming
    ``where`` (:func:`yolo.ops.sizes.check_stride`); one that differs from a size the weights are tied to
    (YOLOv1's ``[connected]``) a ``ValueError`` naming the cfg line (``model.check_input_size``)."""
    size, why = chosen_input_size(value, where, default_img_size(model), getattr(model, "net", None))
    check_stride(size, model.stride, where if value is not None else why)
    model.check_input_size(size, where if value is not None else why)
    return size, why


def model_input_size(model, value: Optional[SizeLike], where: str) -> ImageSize:
    """The input ``(h, w)`` to run ``model`` at (:func:`model_input_choice` without the reason)."""
    return model_input_choice(model, value, where)[0]


__all__ = ["FALLBACK_SIZE", "RESAMPLERS", "RESIZE_MODES", "cfg_resize_mode", "checked_record",
           "chosen_input_size", "default_decode", "default_img_size", "default_resample", "default_resize", "model_input_choice", "model_input_size", "net_input_size",
           "recorded_preprocessing", "training_preprocessing"]
