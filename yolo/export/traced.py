"""What the traced exports (ONNX and TorchScript) share: the traced copy of the model,
quiet tracing, the file's metadata, and the atomic write that turns any failure into :class:`ExportError`."""
from __future__ import annotations

import copy
import json
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence

import torch

from yolo.errors import ExportError
from yolo.export.heads import keep_heads_float32, output_columns
from yolo.files.atomic import atomic_path
from yolo.inference.preprocess import LETTERBOX_FILL
from yolo.models.preprocessing import default_decode, default_resample, default_resize
from yolo.ops.sizes import ImageSize

def inference_copy(model, half: bool = False, fuse: bool = True):
    """A CPU eval copy of ``model`` for tracing: BatchNorm folded, optionally float16 with float32 heads."""
    net = copy.deepcopy(model).cpu().eval()
    for p in net.parameters():
        p.requires_grad_(False)
    if fuse:
        net.fuse()
    if half:
        net.half()
        keep_heads_float32(net)
    return net


@contextmanager
def quiet_tracing() -> Iterator[None]:
    """Silence the tracer's notes (constants such as the head strides are meant to be constant) and
    the deprecation notes of the tracing exporters."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*[Cc]onstant folding.*")
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        warnings.filterwarnings("ignore", message=".*will be removed.*")
        yield


def preprocessing_metadata(model) -> Dict[str, str]:
    """How an image becomes the file's input, for a runtime that has none of this package: BGR files to RGB,
    resized (the resize the model was trained and validated with, :func:`yolo.models.preprocessing.default_resize`;
    letterbox borders filled with 0.5), HWC to NCHW, multiplied by ``scale`` (1/255), no mean or std; ``resample``
    names the resize's arithmetic (:func:`yolo.models.preprocessing.default_resample`: ``darknet``, Darknet's
    ``resize_image`` on the 0..1 floats; ``opencv``, ``cv2.resize`` bilinear on the bytes); ``decode`` how image
    files became pixels (:func:`yolo.models.preprocessing.default_decode`: ``opencv``, libjpeg/libpng through
    ``cv2.imdecode``; ``stb``, stb_image, as Darknet's default build)."""
    resize = default_resize(model)
    meta = {"color_order": "RGB", "layout": "NCHW", "scale": repr(1 / 255), "resize": resize,
            "resample": default_resample(model), "decode": default_decode(model)}
    if resize == "letterbox":
        meta["letterbox_fill"] = repr(LETTERBOX_FILL)  # on the scaled 0..1 input
    return meta


def metadata(model, img_size: ImageSize, half: bool, names: Optional[Sequence[str]], **extra) -> Dict[str, str]:
    """The string key/value pairs stored in an exported file: format, input size ``[h, w]``, the input
    preprocessing (:func:`preprocessing_metadata`), stride, classes, what the output rows hold, float16 or not,
    the cfg text, the class names (JSON list) when given, and ``extra`` (JSON unless a string)."""
    meta = {
        "format": "yolo-darknet-export/1",
        "img_size": json.dumps(list(img_size)),
        **preprocessing_metadata(model),
        "stride": str(int(model.stride)),
        "num_classes": str(int(model.num_classes)),
        "output": output_columns(model),
        "half": str(bool(half)).lower(),
        "cfg": model.cfg_text,
    }
    if names is not None:
        meta["names"] = json.dumps(list(names))
    meta.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in extra.items()})
    return meta


@contextmanager
def writing_export(path: Path, kind: str) -> Iterator[Path]:
    """Yield a temporary path to write the ``kind`` file (e.g. ``"ONNX"``) to; on success it replaces
    ``path``. Any failure leaves ``path`` untouched and is raised as a one-line :class:`ExportError`."""
    try:
        with atomic_path(path) as tmp:
            yield tmp
    except ExportError:
        raise
    except Exception as exc:
        raise ExportError(f"{path}: {kind} export failed: {str(exc).strip().splitlines()[0][:300]}") from exc
