"""Export in one of the formats and check the written file at once, removing it when the check fails:
what ``tools/export.py`` runs."""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import torch

from yolo.errors import ExportError
from yolo.files.overwrite import same_file
from yolo.export.darknet import export_darknet, verify_darknet
from yolo.export.nms import NMSOptions
from yolo.export.onnx import DEFAULT_OPSET, export_onnx, verify_onnx
from yolo.export.openvino import export_openvino, verify_openvino, weights_path
from yolo.export.torchscript import export_torchscript, verify_torchscript

# format -> file suffix
SUFFIXES = {"onnx": ".onnx", "torchscript": ".torchscript", "darknet": ".weights", "openvino": ".xml"}
# what runs the check
RUNTIMES = {"onnx": "onnxruntime", "torchscript": "torch.jit", "darknet": "OpenCV DNN", "openvino": "OpenVINO"}

INSTALL_EXPORT = 'pip install "yolo-darknet[export]" (in a clone: pip install -e ".[export]")'
INSTALL_OPENVINO = 'pip install "yolo-darknet[openvino]" (in a clone: pip install -e ".[openvino]")'


def missing_package(fmt: str, verify: bool = True, benchmark: bool = False, int8: bool = False) -> Optional[str]:
    """A one-line message when a package that exporting as ``fmt`` needs is not installed, else None.

    ONNX is written with ``onnx`` (``torch.onnx.export`` needs it too); ``onnxruntime`` runs the check
    (``verify``) and the timing (``benchmark``). OpenVINO needs ``onnx`` and ``openvino`` (and ``nncf`` with
    ``int8``). TorchScript and Darknet need only the package's dependencies.
    """
    if fmt == "openvino":  # written through ONNX, converted and run by OpenVINO, quantized by NNCF
        for package, extra in (("onnx", INSTALL_EXPORT), ("openvino", INSTALL_OPENVINO), ("nncf", INSTALL_OPENVINO)):
            if importlib.util.find_spec(package) is None and (package != "nncf" or int8):
                return f"{package} is not installed: OpenVINO export{' with --int8' if package == 'nncf' else ''} " \
                       f"needs it: {extra}"
        return None
    if fmt != "onnx":
        return None
    if importlib.util.find_spec("onnx") is None:
        return f"onnx is not installed: ONNX export needs it: {INSTALL_EXPORT}"
    if (verify or benchmark) and importlib.util.find_spec("onnxruntime") is None:
        use = "--benchmark times the file in it" if benchmark else \
            "it runs the check of the written file (--no-verify writes the file unchecked)"
        return f"onnxruntime is not installed: {use}: {INSTALL_EXPORT}"
    return None


@dataclass
class CheckedExport:
    """What :func:`export_checked` wrote and how it compared."""

    files: List[Path]  # the written files (Darknet: the weights, and the cfg when one was written)
    cfg: Optional[Path] = None  # Darknet: the cfg that goes with the weights
    max_difference: Optional[float] = None  # largest difference to the PyTorch model; None when not checked
    checked_on: List[torch.Size] = field(default_factory=list)  # the input shapes of the check


def export_checked(model, fmt: str, output: Path, inputs: Sequence[torch.Tensor], verify: bool = True,
                   dynamic: bool = False, half: bool = False, nms: Optional[NMSOptions] = None,
                   opset: int = DEFAULT_OPSET, names: Optional[Sequence[str]] = None,
                   source_cfg: Optional[Path] = None) -> CheckedExport:
    """Write ``model`` as ``fmt`` (a key of :data:`SUFFIXES`) to ``output``, traced on ``inputs[0]``, and with
    ``verify`` run the file on every input ``Float[N, C, H, W]`` (Darknet: the first two) in its own runtime.

    Darknet writes the cfg beside the weights (``output`` with ``.cfg``) unless that is ``source_cfg``, the
    model's own cfg file, which is then used as it is. A failed check removes the written files and raises
    :class:`ExportError`.
    """
    files, cfg = [output], None
    if fmt == "onnx":
        export_onnx(model, output, inputs[0].shape[-2:], dynamic=dynamic, half=half, nms=nms, opset=opset,
                    names=names, example=inputs[0])
        check = lambda: verify_onnx(output, model, inputs, nms=nms)  # noqa: E731
    elif fmt == "torchscript":
        export_torchscript(model, output, inputs[0].shape[-2:], half=half, names=names, example=inputs[0])
        check = lambda: verify_torchscript(output, model, inputs)  # noqa: E731
    elif fmt == "openvino":
        export_openvino(model, output, inputs[0].shape[-2:], dynamic=dynamic, names=names, example=inputs[0],
                        opset=opset)
        files.append(weights_path(output))
        check = lambda: verify_openvino(output, model, inputs)  # noqa: E731
    elif fmt == "darknet":
        cfg = output.with_suffix(".cfg")
        size = tuple(int(v) for v in inputs[0].shape[-2:])
        if source_cfg is not None and same_file(cfg, source_cfg):
            if size != tuple(model.input_size):
                raise ExportError(f"{cfg}: the written cfg would be --cfg itself, which stays at its "
                                  f"{model.input_size[0]}x{model.input_size[1]}; give another --output to write "
                                  f"the cfg at {size[0]}x{size[1]}")
            export_darknet(model, output)  # the cfg is already there, unchanged
            cfg = source_cfg
        else:
            export_darknet(model, output, cfg, input_size=size)  # Darknet runs at its cfg's size
            files.append(cfg)
        inputs = inputs[:2]
        check = lambda: verify_darknet(output, cfg, model, inputs)  # noqa: E731
    else:
        raise ValueError(f"unknown export format {fmt!r}: one of {', '.join(SUFFIXES)}")
    result = CheckedExport(files=files, cfg=cfg)
    if verify:
        try:
            result.max_difference = check()
        except ExportError:
            for p in result.files:  # the written file: where a link at the path led, the link left as it is
                Path(os.path.realpath(p)).unlink(missing_ok=True)
            raise
        result.checked_on = [x.shape for x in inputs]
    return result
