"""yolo: Darknet cfgs and weights as exact PyTorch models.

Public API::

    from yolo import Darknet, Detector, load_model
    model = load_model("yolov3-tiny.cfg", "yolov3-tiny.weights")
    detector = Detector("yolov3-tiny.cfg", "yolov3-tiny.weights", names="coco.names")

The names below are loaded on first use (PEP 562), so that importing a light module of the package (the
tools' argument parsers, answering ``--help``) does not load torch.
"""
import importlib

from yolo.openmp_wait import set_openmp_defaults

# How torch's idle CPU threads wait (yolo.openmp_wait): only effective before torch's first import, so it is set
# here, before any of the names below loads torch; a process that imported torch first keeps OpenMP's defaults.
set_openmp_defaults()

# public name -> the module that defines it
_PUBLIC = {
    "CfgError": "yolo.errors",
    "Darknet": "yolo.models.model",
    "Detector": "yolo.inference.detector",
    "DetectorOptions": "yolo.settings.detect",
    "WeightsError": "yolo.errors",
    "load_darknet_weights": "yolo.models.weights",
    "load_model": "yolo.models.model",
    "parse_cfg": "yolo.models.cfg",
    "parse_cfg_text": "yolo.models.cfg",
    "read_names": "yolo.files.names",
    "save_darknet_weights": "yolo.models.weights",
}

__all__ = sorted(_PUBLIC)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'yolo' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
