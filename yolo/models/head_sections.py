"""The section names of Darknet's detection heads, as a parsed cfg spells them (lower case, :mod:`yolo.models.cfg`),
each group written once. The head modules themselves are layer types (:mod:`yolo.models.layer_types`)."""
from __future__ import annotations

__all__ = ["CLASS_COUNT_HEADS", "LOSS_GAIN_HEADS", "MULTISCALE_HEADS", "NMS_HEADS", "TRAINED_HEADS"]

# Heads whose nms_kind / beta_nms Darknet's detector applies (those of the network's last layer, src/parser.c).
NMS_HEADS = ("yolo", "gaussian_yolo")

# Heads whose class count --adapt-classes changes, with the filters of the [convolutional] before them.
CLASS_COUNT_HEADS = ("yolo", "region")

# Heads whose options the trainer reads (yolo.models.cfg_options).
TRAINED_HEADS = ("yolo", "region", "detection")

# Heads whose random=1 turns on Darknet's multi-scale training.
MULTISCALE_HEADS = ("yolo", "region", "gaussian_yolo")

# Heads with Darknet's iou_normalizer, obj_normalizer and cls_normalizer (parse_yolo, parse_gaussian_yolo): the
# loss gains a hyperparameter search scales (yolo.engine.tune_gains).
LOSS_GAIN_HEADS = ("yolo", "gaussian_yolo")
