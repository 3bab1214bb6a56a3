"""``ExportedModel``: an exported file (a :class:`~yolo.backends.base.Backend`) in the place of the PyTorch model,
so that the Detector, evaluation and the benchmark pre- and post-process it exactly as the model it came from.

The file records its cfg text; the Darknet model built from it (its weights unused)
gives what the tools read from a model: the heads and their NMS settings, the classes, the stride, the cfg's
``[net]``. The recorded class names, input size and resize take the place of a checkpoint's.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn

from yolo.backends.base import Backend, recorded_names, recorded_size
from yolo.errors import CfgError, WeightsError
from yolo.models.cfg import parse_cfg_text
from yolo.models.model import Darknet
from yolo.models.preprocessing import DECODERS, RECORDLESS_DECODE, RECORDLESS_RESAMPLE, RESAMPLERS, RESIZE_MODES


class ExportedModel(nn.Module):
    """``backend`` run as a :class:`~yolo.models.model.Darknet` in eval mode: ``model(x)`` maps
    ``Float[N, 3, H, W]`` (RGB 0..1) to ``Float[N, boxes, 5 + C]`` on ``x``'s device (the runtime itself runs on
    the CPU). Its attributes are the recorded cfg's model's; ``preprocessing`` and ``class_names`` are what the
    export recorded. ``fuse()`` does nothing: the file is already what it is."""

    def __init__(self, backend: Backend):
        super().__init__()
        self.backend = backend
        meta, path = backend.metadata, backend.path
        try:
            shell = Darknet(parse_cfg_text(meta["cfg"], source=f"{path}:cfg"))  # its weights are never used
        except CfgError as exc:
            raise WeightsError(f"{path}: the cfg in its metadata does not build: {exc}") from None
        self.shell = [shell]  # a list: not a submodule, so .to() and .parameters() leave it alone
        self.cfg_text = meta["cfg"]
        self.class_names = recorded_names(path, meta)
        if self.class_names is not None and len(self.class_names) != shell.num_classes:
            raise WeightsError(f"{path}: its metadata names {len(self.class_names)} classes but its cfg has "
                               f"{shell.num_classes}")
        resize = meta.get("resize")
        if resize not in RESIZE_MODES:
            raise WeightsError(f"{path}: its metadata gives no resize (letterbox or stretch): {resize!r}")
        # the resize's arithmetic the export recorded; a file written before exports recorded it: OpenCV's
        resample = meta.get("resample", RECORDLESS_RESAMPLE)
        if resample not in RESAMPLERS:
            raise WeightsError(f"{path}: its metadata gives an unknown resample (darknet or opencv): {resample!r}")
        decode = meta.get("decode", RECORDLESS_DECODE)  # written before exports recorded it: OpenCV's
        if decode not in DECODERS:
            raise WeightsError(f"{path}: its metadata gives an unknown decode (opencv or stb): {decode!r}")
        self.img_size = recorded_size(path, meta)
        self.preprocessing = {"resize": resize, "resample": resample, "decode": decode,
                              "img_size": list(self.img_size), "pipeline": meta.get("pipeline")}
        # ONNX and OpenVINO record whether the input size is dynamic; a traced TorchScript file follows any size.
        self.dynamic = meta.get("dynamic", "true" if backend.runtime == "torch.jit" else "false") == "true"
        # What the tools read from a model, set past nn.Module's registry: the heads stay the shell's and
        # .to(device) has nothing to move.
        for name in ("net", "sections", "yolo_layers", "num_classes", "stride", "input_channels", "size_fixed_by"):
            object.__setattr__(self, name, getattr(shell, name))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backend(x)

    def fuse(self) -> "ExportedModel":
        return self

    def check_input_size(self, size_hw: Sequence[int], what: str = "input size") -> None:
        """A ``ValueError`` naming ``what`` for a size the file cannot run: any other than the recorded one,
        unless it was exported with a dynamic input size."""
        size = tuple(int(v) for v in size_hw)
        if not self.dynamic and size != self.img_size:
            h, w = self.img_size
            raise ValueError(f"{what} {size[0]}x{size[1]}: {self.backend.path} was exported for {h}x{w} input only "
                             "(export with --dynamic for other sizes)")
        self.shell[0].check_input_size(size, what)

    def extra_repr(self) -> str:
        return f"{self.backend!r}"
