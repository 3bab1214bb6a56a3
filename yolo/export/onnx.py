"""ONNX: write a model as an ONNX file (optionally ending in NMS) and check it in onnxruntime.

The file takes ``images`` ``Float[batch, 3, height, width]`` and holds the eval output
``Float[batch, boxes, attributes]`` (attributes = 5 + C, see :class:`yolo.models.model.Darknet`) under the name
``predictions``, or with ``nms`` the detections of :class:`yolo.export.nms.DetectionsWithNMS`. The batch is
always dynamic; with ``dynamic=True`` so are height and width (the head grids are computed from the traced
sizes, and the verification runs a second size to prove it). Every other axis is declared with its size.
Its ``metadata_props`` say how an image becomes the input (:func:`yolo.export.traced.metadata`).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import numpy as np
import torch

from yolo.export.compare import ArrayLike, Reference, as_float32_numpy, check_each_input, detections_difference
from yolo.export.heads import check_nms_supported
from yolo.export.nms import (NMS_OUTPUT_COLUMNS, NMS_OUTPUT_NAMES, DetectionsWithNMS, NMSOptions, nms_metadata,
                             split_detections)
from yolo.export.pooling import one_node_maxpools
from yolo.export.samples import sample_input
from yolo.export.traced import inference_copy, metadata, quiet_tracing, writing_export
from yolo.inference.postprocess import postprocess
from yolo.models.preprocessing import model_input_size
from yolo.ops.sizes import SizeLike

logger = logging.getLogger(__name__)

DEFAULT_OPSET = 17
MIN_OPSET = 17
# The newest opset of the tracing exporter (dynamo=False) in torch 2.11 to 2.14, for a torch that no longer says.
KNOWN_MAX_OPSET = 20
INPUT_NAME = "images"
OUTPUT_NAME = "predictions"


def max_opset() -> int:
    """The newest opset the installed torch's tracing exporter writes: torch names it in a private module,
    else :data:`KNOWN_MAX_OPSET`. A newer one is written with a warning that it is not supported (or fails
    with a graph dump), so it is refused instead."""
    constants = getattr(torch.onnx, "_constants", None)
    return int(getattr(constants, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", KNOWN_MAX_OPSET))


def check_opset(opset: int, what: str = "opset") -> None:
    """A :class:`ValueError` naming ``what`` unless the installed torch exports ``opset``."""
    newest = max_opset()
    if not MIN_OPSET <= opset <= newest:
        raise ValueError(f"{what} {opset} is out of range: this torch ({torch.__version__}) exports ONNX opsets "
                         f"{MIN_OPSET} to {newest}")


def export_onnx(model, path: Union[str, Path], img_size: Optional[SizeLike] = None,
                dynamic: bool = False, half: bool = False, nms: Optional[NMSOptions] = None,
                opset: int = DEFAULT_OPSET, names: Optional[Sequence[str]] = None,
                example: Optional[torch.Tensor] = None) -> Path:
    """Write ``model`` as an ONNX file and return its path.

    Args:
        model: a :class:`yolo.models.model.Darknet` (not changed; a fused CPU copy is traced).
        img_size: input ``(h, w)`` or an int; default the cfg's [net] size.
        dynamic: also dynamic height and width (the batch is always dynamic).
        half: float16 weights and input; the heads decode in float32, so the output is float32.
        nms: bake post-processing in: outputs ``boxes, scores, labels, batch_index`` (see
            :class:`DetectionsWithNMS`) instead of ``output`` Float[N, boxes, 5 + C].
        opset: ONNX opset, at least 17.
        names: class names, stored in the file's metadata.
        example: the tracing input (default: a drawn scene at ``img_size``).

    Input ``images`` Float[N, 3, H, W] (RGB 0..1). Metadata (``metadata_props``) records the image size,
    the input preprocessing (colour order, scale, resize), stride, classes, names, NMS settings and the cfg text.
    """
    import onnx  # optional dependency (the export extra): torch.onnx.export needs it too

    check_opset(opset)
    path = Path(path)
    size = model_input_size(model, img_size, "img_size")
    if nms is not None:
        check_nms_supported(model)
    if dynamic and model.size_fixed_by is not None:
        fixed = model.size_fixed_by
        raise ValueError(f"{fixed.source}:{fixed.line}: [{fixed.type}] ties the weights to the cfg's input size, "
                         "so the ONNX input size cannot be dynamic: export without dynamic")
    net = inference_copy(model, half=half)
    one_node_maxpools(net)  # each [maxpool] one ONNX MaxPool, its asymmetric pads included
    if nms is not None:
        net = DetectionsWithNMS(net, nms).eval()
    x = example if example is not None else sample_input(size, 1, channels=model.input_channels)
    x = x.to(torch.float16 if half else torch.float32)
    spatial = {2: "height", 3: "width"} if dynamic else {}
    if nms is None:
        outputs = [OUTPUT_NAME]
        axes = {INPUT_NAME: {0: "batch", **spatial}, OUTPUT_NAME: {0: "batch", 1: "boxes"} if dynamic else {0: "batch"}}
    else:
        outputs = list(NMS_OUTPUT_NAMES)
        axes = {INPUT_NAME: {0: "batch", **spatial}, **{name: {0: "detections"} for name in outputs}}
    meta = metadata(model, size, half, names, dynamic=str(bool(dynamic)).lower(),
                    nms=nms_metadata(nms) if nms is not None else "none")
    if nms is not None:
        meta["output"] = NMS_OUTPUT_COLUMNS
    with torch.no_grad():
        traced = net(x)
    traced = traced if isinstance(traced, (tuple, list)) else [traced]
    with writing_export(path, "ONNX") as tmp:
        with quiet_tracing(), torch.no_grad():
            # The tracing exporter records the sizes the forward reads (grids, reshapes) as graph
            # values, so one trace serves every batch and (with ``dynamic``) every input size.
            torch.onnx.export(net, (x,), str(tmp), dynamo=False, opset_version=opset, input_names=[INPUT_NAME],
                              output_names=outputs, dynamic_axes=axes, do_constant_folding=True)
        proto = onnx.load(str(tmp))
        _declare_output_axes(proto, [t.shape for t in traced], axes)
        for key, value in meta.items():
            entry = proto.metadata_props.add()
            entry.key, entry.value = key, value
        onnx.checker.check_model(proto)
        onnx.save(proto, str(tmp))
    logger.debug("wrote %s (ONNX opset %d, %.1f MB)", path, opset, path.stat().st_size / 1e6)
    return path


def _declare_output_axes(proto, shapes: Sequence[torch.Size], axes: Dict[str, Dict[int, str]]) -> None:
    """Give every output axis a meaning in ``proto``: the dynamic ones (``axes``) their names, the others the
    size traced in ``shapes`` (the tracing exporter would call them ``Concatoutput_dim_2`` and the like)."""
    for output, shape in zip(proto.graph.output, shapes):
        dims = output.type.tensor_type.shape.dim
        for axis, dim in enumerate(dims):
            name = axes.get(output.name, {}).get(axis)
            if name is not None:
                dim.dim_param = name
            elif axis < len(shape):
                dim.dim_value = int(shape[axis])


def onnxruntime_session(path: Union[str, Path], threads: Optional[int] = None, spinning: bool = True):
    """An onnxruntime CPU session for ``path`` with ``threads`` intra-op threads (default: ORT's).

    ``spinning=False`` stops idle ORT threads from busy-waiting after each run, so that other
    runtimes timed in the same process get the cores.
    """
    import onnxruntime as ort  # optional dependency (the dev extra): only running an ONNX file needs it

    options = ort.SessionOptions()
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _input_dtype(session) -> np.dtype:
    return np.float16 if session.get_inputs()[0].type == "tensor(float16)" else np.float32


def session_feed(session, x: ArrayLike) -> Dict[str, np.ndarray]:
    """The input dict for ``session.run``: ``x`` ``Float[N, 3, H, W]`` as the file's input type (float16 or 32)."""
    return {session.get_inputs()[0].name: as_float32_numpy(x).astype(_input_dtype(session))}


def verify_onnx(path: Union[str, Path], model, inputs: Sequence[torch.Tensor], tol: Optional[float] = None,
                nms: Optional[NMSOptions] = None) -> float:
    """Run ``path`` in onnxruntime on each input ``Float[N, 3, H, W]`` and compare with ``model``'s
    eval output (or with :func:`yolo.inference.postprocess.postprocess` of it when the file has ``nms``); returns the
    largest difference (see :func:`max_difference`, :func:`detections_difference`).

    A float16 file is compared with ``model`` run in float16 (its gap to the float32 model is logged).
    ``tol`` defaults to :data:`TOLERANCE` (:data:`HALF_TOLERANCE` for float16); over it raises
    :class:`ExportError`.
    """
    session = onnxruntime_session(path)
    reference = Reference(model, half=_input_dtype(session) == np.float16)

    def compare(x: torch.Tensor):
        ref = reference(x)
        outs = session.run(None, session_feed(session, x))
        if nms is None:
            return reference.compare(outs[0], ref, x)
        expected = postprocess(ref, nms)
        found = split_detections(*outs, batch_size=x.shape[0])
        return detections_difference(found, expected, tuple(x.shape[-2:])), None

    return check_each_input(f"{Path(path).name} in onnxruntime", inputs, reference.tol if tol is None else tol,
                            compare)
