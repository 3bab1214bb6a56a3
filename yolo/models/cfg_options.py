"""Every training option of Darknet's ``[net]``, ``[yolo]``, ``[region]`` and ``[detection]`` sections, and what we
do with it.

Darknet reads these keys in src/parser.c (``parse_net_options``, ``parse_yolo``, ``parse_region``,
``parse_detection``); its
detector training (src/detector.c ``train_detector``, src/data.c ``load_data_detection``) uses them. Each key
has one of three fates here:

* ``TRAINED``: used by our training with Darknet's meaning (``where`` names the code);
* ``INERT``: Darknet reads it but it cannot change a detector's training result (GPU memory knobs,
  classifier-only keys, chart settings, inference-only keys); accepted;
* ``REFUSED``: not reproduced. Training stops at start with
  ``cfg:line: [net] option 'blur=1' is not implemented for training: <what to do>`` unless the value is
  neutral (the key's Darknet default or one of ``neutral``). Some refused keys have a replacement of ours,
  different from Darknet, that the user opts into by naming it in ``--hyp`` (``opt_in``); the key is then
  accepted and the replacement is what runs.

Inference never consults this table: a cfg with ``mosaic=1`` still detects.

The model's list of known keys (``yolo.models.model.TRAINING_OPTIONS``) is derived from these tables, so a key that
appears nowhere here gets the "unused option" warning.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from yolo.errors import CfgError
from yolo.models.head_sections import TRAINED_HEADS

TRAINED, INERT, REFUSED = "trained", "inert", "refused"


@dataclass(frozen=True)
class CfgOption:
    """One Darknet key: its fate, why, and (for refused keys) the neutral values and the advice."""

    fate: str
    why: str
    neutral: Tuple[str, ...] = ()
    advice: str = ""
    opt_in: Tuple[str, ...] = ()  # --hyp path whose presence selects our own replacement

    def is_neutral(self, raw: str) -> bool:
        value = raw.strip()
        for n in self.neutral:
            if value == n:
                return True
            try:
                if float(value) == float(n):
                    return True
            except ValueError:
                pass
        return False


def _t(why: str) -> CfgOption:
    return CfgOption(TRAINED, why)


def _i(why: str) -> CfgOption:
    return CfgOption(INERT, why)


def _r(why: str, neutral: Sequence[str], advice: str, opt_in: Sequence[str] = ()) -> CfgOption:
    return CfgOption(REFUSED, why, tuple(neutral), advice, tuple(opt_in))


_SCHEDULE = "learning-rate schedule: yolo.engine.schedule (Darknet's get_current_rate)"
_OPTIMIZER = "optimizer: yolo.engine.optimizer.build_optimizer (Darknet's SGD / Adam update)"
_AUGMENT = "augmentation: yolo.data.transforms, Darknet pipeline (load_data_detection)"
_OPENCV = ("augmentation: Darknet's OpenCV build (yolo.data.darknet_opencv_augment), selected when the cfg sets "
           "it")
_LOSS = "loss: yolo.losses.yolo_head_loss (Darknet's yolo_layer deltas)"
_REGION_LOSS = "loss: yolo.losses.region_loss (Darknet's region_layer deltas)"
_DETECTION_LOSS = "loss: yolo.losses.detection_loss (Darknet's detection_layer deltas)"
_MODEL = "model: yolo.models.layer_types builds the layer from it"
_REMOVE = "remove it from [net] (or set it to 0)"

NET_OPTIONS: Dict[str, CfgOption] = {
    # size and batching
    "batch": _t("images per update: yolo.engine.config / trainer"),
    "subdivisions": _t("gradient accumulation steps: yolo.engine.config / trainer"),
    "width": _t("network input width"), "height": _t("network input height"), "channels": _t(_MODEL),
    "inputs": _i("size of non-image inputs; image networks use width x height x channels"),
    "max_batches": _t(_SCHEDULE),
    # optimizer and schedule
    "learning_rate": _t(_SCHEDULE), "momentum": _t(_OPTIMIZER), "decay": _t(_OPTIMIZER),
    "adam": _t(_OPTIMIZER), "B1": _t(_OPTIMIZER), "B2": _t(_OPTIMIZER), "eps": _t(_OPTIMIZER),
    "policy": _t(_SCHEDULE), "burn_in": _t(_SCHEDULE), "power": _t(_SCHEDULE), "steps": _t(_SCHEDULE),
    "scales": _t(_SCHEDULE), "step": _t(_SCHEDULE), "scale": _t(_SCHEDULE), "gamma": _t(_SCHEDULE),
    "learning_rate_min": _t(_SCHEDULE), "sgdr_cycle": _t(_SCHEDULE), "sgdr_mult": _t(_SCHEDULE),
    "seq_scales": _r("scales the mini-batch along the steps (sequential_subdivisions)", (),
                     "remove seq_scales (a fixed batch/subdivisions is used)"),
    "sequential_subdivisions": _r("changes subdivisions along the steps (with seq_scales)", (),
                                  "remove sequential_subdivisions"),
    # augmentation (load_data_detection)
    "flip": _t(_AUGMENT + ": mirror with probability 1/2"),
    "hue": _t(_AUGMENT + ": distort_image hue shift"),
    "saturation": _t(_AUGMENT + ": distort_image, rand_scale"),
    "exposure": _t(_AUGMENT + ": distort_image, rand_scale"),
    "letter_box": _t(_AUGMENT + ": crop widened to the network's aspect ratio"),
    "mosaic": _t(_OPENCV + ": half of the batches are mosaics of four augmented images"),
    "mosaic_bound": _t(_OPENCV + ": mosaic truths clipped to their quadrant (blend_truth_mosaic)"),
    "cutmix": _t(_OPENCV + ": Darknet's detector ignores cutmix (load_data_detection prints that it is not "
                 "supported), but parser.c maps it over mixup, so mixup=1 with it does nothing; the build "
                 "without OpenCV refuses it"),
    "mixup": _t(_AUGMENT + ": half of the images (of the batches, in the OpenCV pipeline) averaged with "
                "another one, truths of both"),
    "blur": _t(_OPENCV + ": background (1) or whole-image (> 1) Gaussian blur on a third of the images each"),
    "gaussian_noise": _t(_OPENCV + ": non-negative uint8 noise on half of the images"),
    "angle": _i("used by classifier data only; the detector loader ignores it"),
    "aspect": _i("used by classifier data only"), "min_crop": _i("used by classifier data only"),
    "max_crop": _i("used by classifier data only"),
    "label_smooth_eps": _i("classifier data only ([yolo] has its own label_smooth_eps)"),
    "contrastive": _r("contrastive learning", ("0",), _REMOVE),
    "contrastive_jit_flip": _r("contrastive learning", ("0",), _REMOVE),
    "contrastive_color": _r("contrastive learning", ("0",), _REMOVE),
    "unsupervised": _r("unsupervised contrastive learning", ("0",), _REMOVE),
    # multi-scale, sequences, robustness tricks
    "resize_step": _t("size step of the random multi-scale sizes (yolo.data.darknet_multiscale)"),
    "dynamic_minibatch": _r("changes the batch with the input size under random=1", ("0",), _REMOVE),
    "track": _r("sequence (video) training", ("0",), _REMOVE),
    "time_steps": _r("recurrent sequence training", ("1",), "set time_steps=1"),
    "augment_speed": _i("used only with track=1 (refused)"),
    "try_fix_nan": _r("rescues NaN batch-norm statistics", ("0",), "remove it; training stops on a non-finite loss"),
    "weights_reject_freq": _r("rejects weight updates", ("0",), _REMOVE),
    "equidistant_point": _r("bad-label rejection", ("0",), _REMOVE),
    "badlabels_rejection_percentage": _r("bad-label rejection", ("0",), _REMOVE),
    "num_sigmas_reject_badlabels": _r("bad-label rejection", ("0",), _REMOVE),
    "adversarial_lr": _r("adversarial training", ("0",), _REMOVE),
    "attention": _r("attention maps during training", ("0",), _REMOVE),
    "ema_alpha": _r("Darknet's EMA of the weights", ("0",),
                    "remove ema_alpha; this framework's EMA is set by 'ema'/'ema_decay' in --hyp"),
    # speed, memory and display: no effect on the result
    "loss_scale": _i("GPU half-precision loss scaling; the update is divided back"),
    "optimized_memory": _i("GPU memory layout"), "workspace_size_limit_MB": _i("cuDNN workspace"),
    "use_cuda_graph": _i("GPU kernel launching"), "max_chart_loss": _i("loss chart display"),
}

_HEAD_LOSS_KEYS = ("ignore_thresh", "truth_thresh", "iou_thresh", "iou_thresh_kind", "iou_normalizer",
                   "obj_normalizer", "cls_normalizer", "delta_normalizer", "iou_loss", "max_delta",
                   "counters_per_class", "label_smooth_eps", "focal_loss", "objectness_smooth")

YOLO_OPTIONS: Dict[str, CfgOption] = {
    **{key: _t(_LOSS) for key in _HEAD_LOSS_KEYS},
    "classes": _t(_MODEL), "num": _t(_MODEL), "mask": _t(_MODEL), "anchors": _t(_MODEL),
    "scale_x_y": _t(_MODEL + " (decode) and the loss"), "new_coords": _t(_MODEL + " (decode) and the loss"),
    "max": _t(_AUGMENT + ": at most max truths per image, a random subset (fill_truth_detection)"),
    "jitter": _t(_AUGMENT + ": crop jitter (the last layer's, as train_detector)"),
    "resize": _t(_AUGMENT + ": random zoom of the crop (the last layer's)"),
    "random": _t("multi-scale: a size drawn every 10 updates by Darknet's rule, images loaded at it "
                 "(yolo.data.darknet_multiscale; the last head's; 'multi_scale' in --hyp overrides)"),
    "nms_kind": _i("detection only: yolo.inference.postprocess.nms"), "beta_nms": _i("detection only: yolo.inference.postprocess.nms"),
    "show_details": _i("console output"),
    "map": _r("class remapping for the loss", (), "remove map"),
    "embedding_layer": _r("tracking embeddings", (), "remove embedding_layer"),
    "track_history_size": _i("tracking at inference only"), "sim_thresh": _i("tracking at inference only"),
    "dets_for_track": _i("tracking at inference only"), "dets_for_show": _i("tracking at inference only"),
    "track_ciou_norm": _i("tracking at inference only"),
}

REGION_OPTIONS: Dict[str, CfgOption] = {
    **{key: _t(_REGION_LOSS) for key in ("coord_scale", "object_scale", "noobject_scale", "class_scale",
                                         "thresh", "rescore", "bias_match", "classfix", "focal_loss", "max",
                                         "absolute", "tree", "map")},
    "classes": _t(_MODEL), "num": _t(_MODEL), "coords": _t(_MODEL), "anchors": _t(_MODEL),
    "softmax": _t(_MODEL), "log": _r("log-space box targets", ("0",), "remove log"),
    "sqrt": _r("sqrt box targets", ("0",), "remove sqrt"),
    "mask_scale": _i("mask heads only (coords > 4, refused by the model)"),
    "jitter": _t(_AUGMENT + ": crop jitter (the last layer's)"),
    "resize": _t(_AUGMENT + ": random zoom of the crop (the last layer's)"),
    "random": YOLO_OPTIONS["random"],
}

DETECTION_OPTIONS: Dict[str, CfgOption] = {
    **{key: _t(_DETECTION_LOSS) for key in ("coord_scale", "object_scale", "noobject_scale", "class_scale",
                                            "rescore", "forced")},
    "classes": _t(_MODEL), "num": _t(_MODEL), "side": _t(_MODEL), "coords": _t(_MODEL),
    "softmax": _t(_MODEL + " and the loss"), "sqrt": _t(_MODEL + " (decode) and the loss"),
    "random": _r("Darknet picks the responsible box with C rand() while fewer than 64000 images are seen",
                 ("0",), "set random=0"),
    "reorg": _i("read by Darknet, its use is commented out (detection_layer.c)"),
    "max": _i("not read by Darknet's YOLOv1 training (load_data_region fills one truth per cell)"),
    "jitter": _t(_AUGMENT + ": crop jitter (the last layer's; Darknet's yolo training crops similarly in "
                 "load_data_region, not compared)"),
    "resize": _t(_AUGMENT + ": random zoom of the crop (the last layer's)"),
}

OPTIONS_BY_SECTION: Dict[str, Dict[str, CfgOption]] = {
    "net": NET_OPTIONS, "network": NET_OPTIONS, "yolo": YOLO_OPTIONS, "region": REGION_OPTIONS,
    "detection": DETECTION_OPTIONS,
}


def _has_path(mapping: Optional[Mapping[str, Any]], path: Sequence[str]) -> bool:
    node: Any = mapping or {}
    for key in path:
        if not isinstance(node, Mapping) or key not in node or node[key] is None:
            return False
        node = node[key]
    return True  # named explicitly, whatever the value (multi_scale: false also decides)


def _neutral_int(raw: Optional[str]) -> bool:
    """A missing or zero integer option (Darknet reads them with ``option_find_int_quiet``, default 0)."""
    try:
        return raw is None or int(float(raw.strip())) == 0
    except ValueError:
        return False


def refusals(sections: Sequence, user_hyp: Optional[Mapping[str, Any]] = None) -> list:
    """The :class:`CfgError` for every refused option set to a non-neutral value, in cfg order.

    ``sections`` are :class:`yolo.models.cfg.Section` objects (``[net]``, heads; other types are skipped);
    ``user_hyp`` is the user's ``--hyp`` mapping (its keys may opt into our replacements).
    """
    errors = []
    for section in sections:
        if section.type in ("net", "network") and not _neutral_int(section.options.get("mosaic")) \
                and not _neutral_int(section.options.get("letter_box")):
            line = section.option_lines.get("mosaic", section.line)
            errors.append(CfgError("[net] options 'letter_box' and 'mosaic' together are not supported for training: "
                                   "Darknet refuses the combination too (load_data_detection); set one of them to 0",
                                   section.source, line))
        table = OPTIONS_BY_SECTION.get(section.type)
        if table is None:
            continue
        for key, raw in section.options.items():
            option = table.get(key)
            if option is None or option.fate != REFUSED or option.is_neutral(raw):
                continue
            if option.opt_in and _has_path(user_hyp, option.opt_in):
                continue
            line = section.option_lines.get(key, section.line)
            errors.append(CfgError(f"[{section.type}] option '{key}={raw.strip()}' is not implemented for "
                                   f"training: {option.advice}", section.source, line))
    return errors


def check_training_options(sections: Sequence, user_hyp: Optional[Mapping[str, Any]] = None) -> None:
    """Raise the first :func:`refusals` error (call at training start, never for inference)."""
    errors = refusals(sections, user_hyp)
    if errors:
        raise errors[0]


def last_head(sections: Sequence):
    """The section Darknet's ``train_detector`` (``train_yolo`` for YOLOv1) reads ``jitter``/``resize``/``max``
    from: the last layer, when it is a ``[yolo]``/``[region]``/``[detection]`` head (else the last such head),
    or ``None``."""
    heads = [s for s in sections if s.type in TRAINED_HEADS]
    return heads[-1] if heads else None


def known_keys(section_type: str) -> frozenset:
    """Every key of a section type's table (trained, inert or refused): the keys the model does not warn about."""
    return frozenset(OPTIONS_BY_SECTION.get(section_type, {}))


__all__ = ["CfgOption", "DETECTION_OPTIONS", "INERT", "NET_OPTIONS", "OPTIONS_BY_SECTION", "REFUSED", "REGION_OPTIONS",
           "TRAINED", "TRAINED_HEADS", "YOLO_OPTIONS", "check_training_options", "known_keys", "last_head", "refusals"]
