"""Export a :class:`yolo.models.model.Darknet` to ONNX, TorchScript, OpenVINO or Darknet ``.weights``, and check
each file.

Every exporter writes a file that gives the model's eval output, and every ``verify_*`` function runs
the written file in its own runtime (onnxruntime, ``torch.jit.load``, OpenCV DNN) on a real input and
returns the largest difference to the PyTorch model, raising :class:`ExportError` over the tolerance
(the measure and the check are in :mod:`yolo.export.compare`).

ONNX and TorchScript files hold the eval output ``Float[N, boxes, 5 + C]`` (cx, cy, w, h in input
pixels, objectness, class probabilities; see :class:`yolo.models.model.Darknet`). Both are traced: the
batch is always dynamic; the ONNX input size is dynamic with ``dynamic=True``. With ``nms`` the
ONNX graph ends in a ``NonMaxSuppression`` and gives :class:`NMSOptions`-filtered detections instead.

Modules: :mod:`~yolo.export.onnx`, :mod:`~yolo.export.torchscript`, :mod:`~yolo.export.darknet` (one per
format: export and verify), :mod:`~yolo.export.compare` (difference measure, tolerance check),
:mod:`~yolo.export.nms` (NMS in the graph), :mod:`~yolo.export.samples` (inputs),
:mod:`~yolo.export.traced` (what the traced formats share), :mod:`~yolo.export.heads` (what depends on the
head type), :mod:`~yolo.export.latency` (onnxruntime vs PyTorch vs OpenCV timing),
:mod:`~yolo.export.checked` (export, verify, remove on failure: what ``tools/export.py`` runs),
:mod:`~yolo.export.names` (the class names a file stores), :mod:`~yolo.export.openvino` (the OpenVINO IR),
:mod:`~yolo.export.quantize` (NNCF's INT8), :mod:`~yolo.export.int8` (``--int8``: both IRs and their mAP),
:mod:`~yolo.export.accuracy` (a model's mAP as ``tools/eval.py`` computes it), :mod:`~yolo.export.pooling` (each
``[maxpool]`` one ONNX node). The files run as models again through :mod:`yolo.backends`.
"""
from yolo.errors import ExportError
from yolo.export.compare import HALF_TOLERANCE, TOLERANCE, detections_difference, max_difference
from yolo.export.darknet import export_darknet, verify_darknet
from yolo.export.heads import opencv_reads
from yolo.export.latency import compare_latency, onnxruntime_latency
from yolo.export.nms import DetectionsWithNMS, NMSOptions, split_detections
from yolo.export.onnx import DEFAULT_OPSET, export_onnx, onnxruntime_session, verify_onnx
from yolo.export.samples import sample_input, second_size
from yolo.export.torchscript import export_torchscript, verify_torchscript

__all__ = [
    "ExportError",
    "NMSOptions",
    "DetectionsWithNMS",
    "TOLERANCE",
    "HALF_TOLERANCE",
    "DEFAULT_OPSET",
    "export_onnx",
    "export_torchscript",
    "export_darknet",
    "verify_onnx",
    "verify_torchscript",
    "verify_darknet",
    "opencv_reads",
    "sample_input",
    "second_size",
    "max_difference",
    "detections_difference",
    "split_detections",
    "onnxruntime_session",
    "onnxruntime_latency",
    "compare_latency",
]
