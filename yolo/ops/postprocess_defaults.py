"""The defaults of post-processing, written once: every tool, setting and function that thresholds or suppresses
detections takes its default from here (:class:`yolo.inference.postprocess.PostprocessOptions` gathers them into
one value). This module loads no torch: the tools' flag declarations (:mod:`yolo.settings`) read it too.

Detection draws what Darknet's ``detector test`` draws (``thresh`` 0.25 on ``objectness * class probability``,
NMS at IoU 0.45); evaluation keeps nearly everything (0.001, NMS at IoU 0.6, every class above the threshold per
box) so that the precision-recall curve reaches low scores, as COCO-style mAP needs.
"""
from __future__ import annotations

__all__ = ["BETA_NMS", "CONFUSION_MATCH_IOU", "DETECT_CONF_THRES", "DETECT_IOU_THRES", "EVAL_CONF_THRES",
           "EVAL_IOU_THRES", "MAX_DET", "NMS_KINDS"]

# Detection (the Detector, tools/detect.py, the benchmark, an exported graph's NMS, training's sample pictures).
DETECT_CONF_THRES = 0.25  # keep a (box, class) scoring objectness * class probability above this
DETECT_IOU_THRES = 0.45  # NMS suppresses a box whose IoU with a better one of its class is above this

# Evaluation (tools/eval.py, the evaluation during training): COCO-style mAP.
EVAL_CONF_THRES = 0.001
EVAL_IOU_THRES = 0.6

MAX_DET = 300  # most detections kept per image

# The confusion matrix of an evaluation counts the detections a user would see (DETECT_CONF_THRES) and pairs one
# with a truth of at least this IoU.
CONFUSION_MATCH_IOU = 0.45

# Darknet's NMS variants, named as in a [yolo] section's ``nms_kind`` (:func:`yolo.ops.nms.nms`), and the
# DIoU-NMS exponent a section without ``beta_nms`` gets (src/parser.c parse_yolo).
NMS_KINDS = ("default", "greedynms", "diounms")
BETA_NMS = 0.6
