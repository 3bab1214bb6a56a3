"""OpenVINO: write a model as an OpenVINO IR (``NAME.xml`` + ``NAME.bin``) and check it in OpenVINO's runtime.

The IR is converted from this package's ONNX export (:func:`yolo.export.onnx.export_onnx`, written to a temporary
file), so it takes ``images`` ``Float[batch, 3, height, width]`` and gives the eval output ``predictions``
``Float[batch, boxes, 5 + C]``; the batch is dynamic, and so are height and width with ``dynamic=True``. Weights
stay float32 (OpenVINO would otherwise compress them to float16). The ONNX file's metadata is stored in the
model's ``rt_info`` (section :data:`yolo.backends.openvino_runtime.RT_INFO_SECTION`), where
:class:`yolo.backends.openvino_runtime.OpenVinoBackend` reads it back.
"""
from __future__ import annotations

import logging
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence, Union

import torch

from yolo.backends.openvino_runtime import RT_INFO_SECTION, OpenVinoBackend
from yolo.errors import ExportError
from yolo.export.compare import Reference, check_each_input
from yolo.export.onnx import DEFAULT_OPSET, export_onnx
from yolo.export.traced import writing_export
from yolo.ops.sizes import SizeLike

logger = logging.getLogger(__name__)


def weights_path(xml: Union[str, Path]) -> Path:
    """The ``.bin`` an IR's ``.xml`` goes with."""
    return Path(xml).with_suffix(".bin")


def check_output_name(path: Union[str, Path]) -> None:
    """A ``ValueError`` unless ``path`` ends in ``.xml`` (OpenVINO writes ``NAME.xml`` and ``NAME.bin``)."""
    if Path(path).suffix.lower() != ".xml":
        raise ValueError(f"{path}: an OpenVINO IR is written as NAME.xml (and NAME.bin beside it): give --output "
                         "a name ending in .xml")


def onnx_metadata(path: Path) -> dict:
    """The ``metadata_props`` of the ONNX file ``path``."""
    import onnx  # optional dependency (the export extra)

    return {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}


def save_ir(model, path: Path, metadata: Mapping[str, str]) -> None:
    """Write the ``openvino.Model`` ``model`` with ``metadata`` in its rt_info to ``path`` (``.xml``) and its
    ``.bin``, both atomically (each replaces an existing file only once written)."""
    import openvino as ov  # optional dependency (the openvino extra)

    for key, value in metadata.items():
        model.set_rt_info(str(value), [RT_INFO_SECTION, str(key)])
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".ir-") as tmp:
        staged = Path(tmp) / "model.xml"
        ov.save_model(model, str(staged), compress_to_fp16=False)
        with writing_export(weights_path(path), "OpenVINO") as bin_tmp:
            staged.with_suffix(".bin").replace(bin_tmp)
        with writing_export(path, "OpenVINO") as xml_tmp:
            staged.replace(xml_tmp)


@contextmanager
def onnx_beside(path: Path, model, img_size: Optional[SizeLike], dynamic: bool, names: Optional[Sequence[str]],
                example: Optional[torch.Tensor], opset: int) -> Iterator[Path]:
    """This package's ONNX export of ``model`` in a temporary folder beside ``path``, removed afterwards."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".onnx-") as tmp:
        onnx_path = Path(tmp) / "model.onnx"
        export_onnx(model, onnx_path, img_size, dynamic=dynamic, names=names, example=example, opset=opset)
        yield onnx_path


def export_openvino(model, path: Union[str, Path], img_size: Optional[SizeLike] = None, dynamic: bool = False,
                    names: Optional[Sequence[str]] = None, example: Optional[torch.Tensor] = None,
                    opset: int = DEFAULT_OPSET) -> Path:
    """Write ``model`` as an OpenVINO IR at ``path`` (``NAME.xml``; ``NAME.bin`` beside it) and return ``path``.

    Arguments as :func:`yolo.export.onnx.export_onnx` (no float16 or NMS: OpenVINO picks its own precision per
    CPU, and the tools post-process the eval rows). The metadata is the ONNX file's.
    """
    import openvino as ov  # optional dependency (the openvino extra)

    path = Path(path)
    check_output_name(path)
    with onnx_beside(path, model, img_size, dynamic, names, example, opset) as onnx_path:
        try:
            ir = ov.convert_model(str(onnx_path))
        except Exception as exc:
            raise ExportError(f"{path}: OpenVINO conversion failed: {str(exc).strip().splitlines()[0][:300]}") from exc
        save_ir(ir, path, onnx_metadata(onnx_path))
    logger.debug("wrote %s (OpenVINO IR, %.1f MB weights)", path, weights_path(path).stat().st_size / 1e6)
    return path


def verify_openvino(path: Union[str, Path], model, inputs: Sequence[torch.Tensor], tol: Optional[float] = None) -> float:
    """Run the IR ``path`` in OpenVINO's CPU runtime on each input ``Float[N, 3, H, W]`` and compare with
    ``model``'s eval output; returns the largest difference (over ``tol``, default :data:`TOLERANCE`, raises
    :class:`ExportError`)."""
    backend = OpenVinoBackend(Path(path))
    reference = Reference(model, half=False)

    def compare(x: torch.Tensor):
        ref = reference(x)
        return reference.compare(backend(x), ref, x)

    return check_each_input(f"{Path(path).name} in OpenVINO", inputs, reference.tol if tol is None else tol, compare)
