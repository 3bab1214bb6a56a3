"""An ONNX export run by onnxruntime on the CPU."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from yolo.backends.base import Backend, require_runtime
from yolo.errors import WeightsError
from yolo.openmp_wait import idle_threads_sleep


def session_options(threads: Optional[int] = None):
    """onnxruntime's ``SessionOptions``: every graph optimization, warnings silenced, ``threads`` intra-op threads
    (and one inter-op) when given; its idle threads sleep where torch's do (:func:`yolo.openmp_wait.idle_threads_sleep`:
    its pool spins between runs otherwise, taking the cores other processes need)."""
    import onnxruntime as ort  # optional dependency (the export extra)

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if idle_threads_sleep():
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    return options


class OnnxRuntimeBackend(Backend):
    """``path`` (an ``.onnx`` file of :func:`yolo.export.onnx.export_onnx`) in an onnxruntime CPU session with
    ``threads`` intra-op threads (default: onnxruntime's own choice; :func:`session_options`). A float16 file gets
    its input as float16."""

    runtime = "onnxruntime"

    def __init__(self, path: Path, threads: Optional[int] = None):
        require_runtime("onnxruntime", path)
        import onnxruntime as ort  # optional dependency (the export extra)

        options = session_options(threads)
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own classes for a file that is not a model
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            raise WeightsError(f"{path}: not an ONNX model onnxruntime can load ({first})") from None
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.input_dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
        super().__init__(path, self.session.get_modelmeta().custom_metadata_map)

    def run(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: batch.astype(self.input_dtype, copy=False)})[0]
