"""The augmentation's hyperparameters: their defaults (:data:`DEFAULT_AUGMENT`), their check
(:func:`augment_config`) and what a Darknet cfg sets (:func:`augment_from_cfg`); the pipelines themselves are in
:mod:`yolo.data.transforms`.

Hyperparameters (a dict, see :data:`DEFAULT_AUGMENT` and :func:`augment_config`) use Darknet's
names where Darknet has the knob:

=============  ==================================================================================
``hue``        hue shift drawn from ``[-hue, hue]`` (fraction of the hue circle), Darknet ``hue``
``saturation`` saturation factor in ``[1/s, s]`` (Darknet ``rand_scale``), Darknet ``saturation``
``exposure``   brightness (HSV value) factor in ``[1/e, e]``, Darknet ``exposure``
``jitter``     Darknet crop jitter: each side of the crop moves by ``U(-j, j)`` times the image side
``scale``      extra zoom factor drawn from ``[1 - scale, 1 + scale]``
``translate``  shift drawn from ``[-t, t]`` times the input width/height
``degrees``    rotation drawn from ``[-degrees, degrees]``
``flip``       probability of a horizontal flip (Darknet ``flip=1`` is 0.5)
``mosaic``     probability of a 4-image mosaic
``min_visible`` keep a box when at least this fraction of its (transformed) area stays in the image
``min_side``   ... and both its sides are at least this many pixels
``fill``       border gray level (Darknet pads with 0.5: 128)
``pipeline``   ``"darknet"`` or ``"affine"`` (above)
``resize``     Darknet pipeline: random zoom of the crop, ``[yolo] resize`` (1: none)
``letter_box`` Darknet pipeline: widen the crop to the network's aspect ratio, ``[net] letter_box``
``max_boxes``  Darknet pipeline: at most this many truths per image (a random subset), ``[yolo] max``
``mixup``      Darknet pipeline: 1 averages half of the images with another one, ``[net] mixup``
``mosaic_bound`` OpenCV pipeline: clip mosaic truths to their quadrant, ``[net] mosaic_bound``
``blur``       OpenCV pipeline: ``[net] blur`` (1: background blur, > 1: kernel size hint)
``gaussian_noise`` OpenCV pipeline: ``[net] gaussian_noise`` (noise standard deviation in levels)
=============  ==================================================================================

In the ``darknet_opencv`` pipeline ``mosaic`` is Darknet's ``[net] mosaic`` (0 or 1: half of the batches are
mosaics), and ``mixup`` / ``mosaic`` already follow parser.c's mapping (``cutmix`` cancels ``mixup``, ``mosaic``
overrides it).

``scale``, ``translate``, ``degrees``, ``mosaic``, ``min_visible``, ``min_side`` and ``fill`` belong to the
affine pipeline; ``resize``, ``letter_box``, ``max_boxes`` and ``mixup`` to the Darknet ones; ``mosaic_bound``, ``blur`` and
``gaussian_noise`` to the OpenCV one. Setting one for the other
pipeline is an error, never silently ignored.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Dict, Mapping, Optional, Sequence

from yolo.errors import shown
from yolo.ops.letterbox import LETTERBOX_FILL_UINT8
from yolo.data.crop_limits import crop_problem
from yolo.data.darknet_opencv_augment import effective_mixup

logger = logging.getLogger(__name__)

PIPELINES = ("affine", "darknet", "darknet_opencv")
AFFINE_ONLY = ("scale", "translate", "degrees", "mosaic", "min_visible", "min_side", "fill")
DARKNET_ONLY = ("resize", "letter_box", "max_boxes", "mixup")
OPENCV_ONLY = ("mosaic_bound", "blur", "gaussian_noise")
OPENCV_CFG_KEYS = ("mosaic", "cutmix", "blur", "gaussian_noise")  # a cfg setting one selects darknet_opencv

DEFAULT_AUGMENT: Dict[str, Any] = {
    "pipeline": "affine",
    "resize": 1.0,
    "letter_box": 0.0,
    "max_boxes": 200.0,
    "mixup": 0.0,
    "mosaic_bound": 0.0,
    "blur": 0.0,
    "gaussian_noise": 0.0,
    "hue": 0.1,
    "saturation": 1.5,
    "exposure": 1.5,
    "jitter": 0.0,
    "scale": 0.25,
    "translate": 0.1,
    "degrees": 0.0,
    "flip": 0.5,
    "mosaic": 0.0,
    "min_visible": 0.1,
    "min_side": 2.0,
    "fill": float(LETTERBOX_FILL_UINT8),
}

NO_AUGMENT: Dict[str, float] = {**DEFAULT_AUGMENT, "hue": 0.0, "saturation": 1.0, "exposure": 1.0,
                                "scale": 0.0, "translate": 0.0, "flip": 0.0}


def augment_config(overrides: Optional[Mapping[str, Any]] = None, **kwargs) -> Dict[str, float]:
    """:data:`DEFAULT_AUGMENT` updated with ``overrides`` and ``kwargs``; unknown keys or bad values raise.

    ``None`` values are ignored (so a trainer can pass ``cfg.get(...)`` results straight through).
    """
    hyp = dict(DEFAULT_AUGMENT)
    given = {**(overrides or {}), **kwargs}
    for key, value in given.items():
        if key not in DEFAULT_AUGMENT:
            raise ValueError(f"unknown augmentation key {key!r}; known: {', '.join(DEFAULT_AUGMENT)}")
        if value is not None:
            hyp[key] = str(value) if key == "pipeline" else _augment_number(key, value)
    if hyp["pipeline"] not in PIPELINES:
        raise ValueError(f"augmentation pipeline={hyp['pipeline']!r}; known: {', '.join(PIPELINES)}")
    if hyp["resize"] <= 0 or hyp["max_boxes"] < 1:
        raise ValueError(f"augmentation resize={hyp['resize']} must be > 0 and max_boxes={hyp['max_boxes']} >= 1")
    problem = crop_problem(hyp["pipeline"], hyp["jitter"], hyp["resize"])
    if problem is not None:
        raise ValueError(f"augmentation {problem[1]}")
    for key in ("saturation", "exposure"):
        if hyp[key] < 1.0:
            # Darknet's rand_scale(s) ranges over [s, 1/s] for s < 1 (its bounds are ordered): the range of 1/s.
            hyp[key] = 1.0 / hyp[key] if hyp[key] > 0 else 1.0
    for key in ("hue", "jitter", "scale", "translate", "degrees", "min_visible", "min_side"):
        if hyp[key] < 0:
            raise ValueError(f"augmentation {key}={hyp[key]} must be >= 0")
    if hyp["mixup"] not in (0.0, 1.0):
        raise ValueError(f"augmentation mixup={hyp['mixup']:g} must be 0 or 1 (Darknet's [net] mixup)")
    for key in OPENCV_ONLY:
        if hyp[key] < 0 or hyp[key] != int(hyp[key]):
            raise ValueError(f"augmentation {key}={hyp[key]:g} must be a whole number >= 0 (Darknet's [net] {key})")
    if hyp["pipeline"] == "darknet_opencv":
        if hyp["mosaic"] not in (0.0, 1.0):
            raise ValueError(f"augmentation mosaic={hyp['mosaic']:g} must be 0 or 1 in Darknet's OpenCV pipeline "
                             "([net] mosaic: half of the batches are mosaics)")
        if hyp["mosaic"] and hyp["letter_box"]:
            raise ValueError("letter_box=1 with mosaic=1 is not supported by Darknet (load_data_detection refuses it)")
    elif any(hyp[key] for key in OPENCV_ONLY):
        raise ValueError(f"augment {[k for k in OPENCV_ONLY if hyp[k]]} belong to Darknet's OpenCV pipeline: add "
                         "'pipeline: darknet_opencv' to 'augment'")
    for key in ("flip", "mosaic"):
        if not 0.0 <= hyp[key] <= 1.0:
            raise ValueError(f"augmentation {key}={hyp[key]} is a probability and must be in [0, 1]")
    if hyp["scale"] >= 1.0:
        raise ValueError(f"augmentation scale={hyp['scale']} must be < 1 (zoom is drawn from [1-s, 1+s])")
    if hyp["min_visible"] > 1.0:
        raise ValueError(f"augmentation min_visible={hyp['min_visible']} must be in [0, 1] (the fraction of a box's "
                         "area that must stay in the image: above 1 drops every box)")
    if hyp["translate"] >= 1.0:
        raise ValueError(f"augmentation translate={hyp['translate']} must be < 1 (the shift is drawn from [-t, t] "
                         "times the input side: 1 or more moves the image out of the input)")
    return hyp


def _augment_number(key: str, value: Any) -> float:
    """An augmentation setting as a finite float; the error names it as ``augment.KEY``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"augment.{key}={shown(repr(value))} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"augment.{key}={number} is not a finite number")
    return number


def augment_from_cfg(net, heads: Sequence = (), mosaic_prob: float = 0.5,
                     overrides: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Augmentation hyperparameters from a Darknet cfg, then ``overrides`` (e.g. a training YAML).

    The cfg selects the ``darknet`` pipeline, or ``darknet_opencv`` when it sets ``mosaic``, ``cutmix``,
    ``blur`` or ``gaussian_noise`` (said in one log line), unless ``overrides`` names the pipeline.

    Args:
        net: the ``[net]`` section (anything with ``get_float(key, default)`` / ``get_int``):
            ``saturation``, ``exposure``, ``hue`` (Darknet defaults 1, 1, 0), ``flip`` (default 1:
            mirror half of the images), ``letter_box`` (0/1).
        heads: ``[yolo]``/``[region]`` sections; the *last* one gives ``jitter`` (default 0.2), ``resize`` and
            ``max`` (Darknet's train_detector reads them from the network's last layer).
        mosaic_prob: the affine pipeline's mosaic probability when the cfg sets ``mosaic=1`` (accepted for
            training only when ``--hyp`` opts in, see :mod:`yolo.models.cfg_options`).
        overrides: final say, same keys as :data:`DEFAULT_AUGMENT`.
    """
    overrides = dict(overrides or {})
    cfg_opencv = {key: net.get_int(key, 0) for key in OPENCV_CFG_KEYS + ("mosaic_bound",)}
    opencv_set = [f"{key}={cfg_opencv[key]}" for key in OPENCV_CFG_KEYS if cfg_opencv[key]]
    pipeline = str(overrides.get("pipeline") or ("darknet_opencv" if opencv_set else "darknet"))
    if opencv_set and not overrides.get("pipeline"):
        logger.info("the cfg sets %s, which only Darknet's OpenCV build trains: augmentation is Darknet's OpenCV "
                    "pipeline (augment: {pipeline: darknet_opencv})", ", ".join(opencv_set))
    hyp: Dict[str, Any] = {
        "pipeline": pipeline,
        "saturation": net.get_float("saturation", 1.0),
        "exposure": net.get_float("exposure", 1.0),
        "hue": net.get_float("hue", 0.0),
        "flip": 0.5 if net.get_int("flip", 1) else 0.0,
        "jitter": 0.0,
    }
    cfg_darknet_only = {"letter_box": float(net.get_int("letter_box", 0)), "mixup": float(net.get_int("mixup", 0))}
    if heads:
        last = list(heads)[-1]
        hyp["jitter"] = last.get_float("jitter", 0.2)
        cfg_darknet_only["resize"] = last.get_float("resize", 1.0)
        if not ({"jitter", "resize", "pipeline"} & {k for k, v in overrides.items() if v is not None}):
            problem = crop_problem(pipeline, hyp["jitter"], cfg_darknet_only["resize"])
            if problem is not None:  # the cfg's own values: said at their line
                raise last.error(problem[1], problem[0])
        cfg_darknet_only["max_boxes"] = float(last.get_int("max", 200))
    # A key of the other pipeline is an error unless it has its no-op value (a saved hyp.yaml lists them all).
    neutral = {**DEFAULT_AUGMENT, "scale": 0.0, "translate": 0.0, "degrees": 0.0, "mosaic": 0.0}
    if pipeline in ("darknet", "darknet_opencv"):
        own = ("mosaic",) if pipeline == "darknet_opencv" else ()
        wrong = [key for key in AFFINE_ONLY if key in overrides and overrides[key] is not None
                 and key not in own and float(overrides[key]) != neutral[key]]
        if wrong:
            raise ValueError(f"augment {wrong} belong to this framework's own pipeline: add 'pipeline: affine' "
                             "to 'augment' (Darknet's pipeline, the default with a cfg, has no such setting)")
        hyp.update(cfg_darknet_only)
        hyp.update({"scale": 0.0, "translate": 0.0, "degrees": 0.0, "mosaic": 0.0})
        if pipeline == "darknet" and opencv_set:
            raise ValueError(f"the cfg sets {', '.join(opencv_set)}, which only Darknet's OpenCV build trains (the "
                             "build without OpenCV refuses them): remove 'pipeline: darknet' from --hyp")
        if pipeline == "darknet_opencv":
            # parser.c: mosaic (with or without cutmix) -> mosaic, cutmix alone -> nothing, else [net] mixup
            mode = effective_mixup(int(cfg_darknet_only["mixup"]), cfg_opencv["mosaic"], cfg_opencv["cutmix"])
            hyp.update({"mixup": float(mode == 1), "mosaic": float(mode == 3),
                        **{key: float(cfg_opencv[key]) for key in OPENCV_ONLY}})
    else:
        wrong = [key for key in DARKNET_ONLY if key in overrides and overrides[key] is not None
                 and float(overrides[key]) != neutral[key]]
        if wrong:
            raise ValueError(f"augment {wrong} belong to Darknet's pipeline: remove them or 'pipeline: affine'")
        changed = [f"{k}={v:g}" for k, v in {**cfg_darknet_only, **{k: float(cfg_opencv[k]) for k in OPENCV_ONLY}
                                              }.items() if v != DEFAULT_AUGMENT[k]]
        if changed:
            raise ValueError(f"the cfg sets {', '.join(changed)}, which only Darknet's pipeline applies: remove "
                             "them from the cfg or 'pipeline: affine' from --hyp")
        hyp.update({"mosaic": mosaic_prob if net.get_int("mosaic", 0) else 0.0, "scale": 0.0, "translate": 0.0})
    return augment_config({**hyp, **overrides})
