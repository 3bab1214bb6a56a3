"""yolo: Darknet cfgs and weights as exact PyTorch models.

Public API::

    from yolo import Darknet, Detector, load_model
    model = load_model("yolov3-tiny.cfg", "yolov3-tiny.weights")
    detector = Detector("yolov3-tiny.cfg", "yolov3-tiny.weights", names="coco.names")
"""
from yolo.files.names import read_names
from yolo.models.cfg import parse_cfg, parse_cfg_text
from yolo.errors import CfgError
from yolo.models.model import Darknet, load_model
from yolo.models.weights import load_darknet_weights, save_darknet_weights
from yolo.errors import WeightsError
from yolo.inference.detector import Detector

__all__ = ["CfgError", "Darknet", "Detector", "WeightsError", "load_model", "load_darknet_weights",
           "parse_cfg", "parse_cfg_text", "read_names", "save_darknet_weights"]
__version__ = "0.1.0"
