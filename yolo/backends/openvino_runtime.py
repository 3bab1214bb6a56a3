"""An OpenVINO IR (``NAME.xml`` + ``NAME.bin``) run by OpenVINO's CPU plugin."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import numpy as np

from yolo.backends.base import Backend, require_runtime
from yolo.errors import WeightsError

# The rt_info section an export stores its metadata under (yolo.export.openvino).
RT_INFO_SECTION = "yolo_export"


def read_metadata(model) -> Dict[str, str]:
    """The metadata an :class:`openvino.Model` carries in its rt_info section :data:`RT_INFO_SECTION`."""
    info = model.get_rt_info()
    if RT_INFO_SECTION not in info.keys():
        return {}
    section = info[RT_INFO_SECTION]
    section = section.value if hasattr(section, "value") else section  # an OVAny around a dict, or the dict
    return {str(k): v.astype(str) if hasattr(v, "astype") else str(v) for k, v in dict(section).items()}


def cpu_config(threads: Optional[int] = None) -> Dict[str, object]:
    """The CPU plugin's settings: one stream tuned for latency, float32 arithmetic wherever the file is float32
    (a CPU with bfloat16 units would otherwise default to it), ``threads`` inference threads when given."""
    config: Dict[str, object] = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1", "INFERENCE_PRECISION_HINT": "f32"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = int(threads)
    return config


class OpenVinoBackend(Backend):
    """``path`` (the ``.xml`` of an IR written by :func:`yolo.export.openvino.export_openvino`; its ``.bin``
    beside it) compiled for the CPU with ``threads`` inference threads. float32 and INT8 IRs alike."""

    runtime = "openvino"

    def __init__(self, path: Path, threads: Optional[int] = None):
        require_runtime("openvino", path)
        import openvino as ov  # optional dependency (the openvino extra)

        path = Path(path)
        if not path.with_suffix(".bin").is_file():
            raise WeightsError(f"{path}: the OpenVINO IR's weights {path.with_suffix('.bin').name} are not beside it")
        core = ov.Core()
        try:
            model = core.read_model(str(path))
            self.compiled = core.compile_model(model, "CPU", cpu_config(threads))
        except Exception as exc:  # OpenVINO raises RuntimeError for a file that is not an IR
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise WeightsError(f"{path}: not an OpenVINO IR the runtime can load ({first})") from None
        self.request = self.compiled.create_infer_request()
        self.output = self.compiled.outputs[0]
        super().__init__(path, read_metadata(model))

    def run(self, batch: np.ndarray) -> np.ndarray:
        return self.request.infer({0: batch}, share_inputs=True)[self.output]
