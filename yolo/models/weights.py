"""Darknet ``.weights`` files: read into and write from a :class:`yolo.models.model.Darknet`.

Layout: int32 major, int32 minor, int32 revision, then ``seen`` (images trained on) as 8 bytes when
major*10 + minor >= 2, else 4 bytes; then float32 values for every layer that has weights, in cfg order.
Each layer type stores its own tensors in its own order, given by its module's ``darknet_weights()``
(see :func:`layer_tensors`). A ``[convolutional]`` layer stores biases[n] (the BN beta when batch_normalize=1),
then with BN scales[n], rolling mean[n], rolling variance[n], then weights[n * c/groups * k * k] (OIHW order).

``cutoff=N`` limits reading/writing to layers 0..N-1 (how partial files such as ``darknet53.conv.74``
are made and used). Without a cutoff the file must hold exactly the floats the cfg needs.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple, Union

import numpy as np
import torch
import torch.nn as nn

from yolo.errors import WeightsError
from yolo.files.atomic import atomic_path
from yolo.files.paths import special_file


@dataclass(frozen=True)
class DarknetHeader:
    major: int = 0
    minor: int = 2
    revision: int = 0
    seen: int = 0

    @property
    def seen_bytes(self) -> int:
        """8 for version 0.2 and later (size_t ``seen``), 4 for older files."""
        return 8 if (self.major * 10 + self.minor) >= 2 and self.major < 1000 and self.minor < 1000 else 4

    @property
    def nbytes(self) -> int:
        return 12 + self.seen_bytes

    def to_bytes(self) -> bytes:
        fmt = "<iiiQ" if self.seen_bytes == 8 else "<iiiI"
        return struct.pack(fmt, self.major, self.minor, self.revision, self.seen)


def read_header(path: Union[str, Path]) -> DarknetHeader:
    """Read and check the header of a ``.weights`` file."""
    path = Path(path)
    special = special_file(path)
    if special is not None and not path.is_dir():  # a FIFO would block the read until a writer comes
        raise WeightsError(f"{path}: cannot read the weights file: {special}")
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except FileNotFoundError:
        raise WeightsError(f"{path}: weights file not found") from None
    except IsADirectoryError:
        raise WeightsError(f"{path}: is a folder, not a weights file") from None
    if len(head) < 12:
        raise WeightsError(f"{path}: {len(head)} bytes is too short for a Darknet weights header (needs 16 or 20)")
    major, minor, revision = struct.unpack("<iii", head[:12])
    if not (0 <= major < 1000 and 0 <= minor < 1000 and revision >= 0):
        raise WeightsError(f"{path}: not a Darknet weights file (header version {major}.{minor}.{revision} "
                           f"is implausible{'; it looks like a zip/.pt file' if head[:2] == b'PK' else ''})")
    header = DarknetHeader(major, minor, revision, 0)
    if len(head) < header.nbytes:
        raise WeightsError(f"{path}: {len(head)} bytes is too short for a version {major}.{minor} header "
                           f"({header.nbytes} bytes)")
    fmt = "<Q" if header.seen_bytes == 8 else "<I"
    seen = struct.unpack(fmt, head[12:header.nbytes])[0]
    return DarknetHeader(major, minor, revision, seen)


def layer_tensors(model: nn.Module, cutoff: Optional[int] = None) -> List[Tuple[int, List[torch.Tensor]]]:
    """(layer index, tensors in file order) for each layer with weights, layers 0..cutoff-1.

    The protocol: a module that has weights in a ``.weights`` file defines ``darknet_weights()``, returning
    its tensors in Darknet's file order (e.g.
    :meth:`yolo.models.layer_types.convolutional.ConvBNAct.darknet_weights`); modules without it hold nothing in
    the file. A module may raise ``ValueError`` when it cannot be written
    (a fused conv).
    """
    n_layers = len(model.module_list) if cutoff is None else cutoff
    if not 0 <= n_layers <= len(model.module_list):
        raise WeightsError(f"cutoff={cutoff} is outside 0..{len(model.module_list)} (the cfg has "
                           f"{len(model.module_list)} layers)")
    out = []
    for index, module in enumerate(model.module_list[:n_layers]):
        method = getattr(module, "darknet_weights", None)
        if method is None:
            continue
        try:
            tensors = list(method())
        except ValueError as exc:
            raise WeightsError(f"layer {index}: {exc}") from None
        if tensors:
            out.append((index, tensors))
    return out


def float_count(model: nn.Module, cutoff: Optional[int] = None) -> int:
    """Number of float32 values a weights file holds for layers 0..cutoff-1."""
    return sum(t.numel() for _, tensors in layer_tensors(model, cutoff) for t in tensors)


def load_darknet_weights(model: nn.Module, path: Union[str, Path], cutoff: Optional[int] = None) -> DarknetHeader:
    """Copy a ``.weights`` file into ``model`` (every shape checked); returns the header.

    Raises :class:`WeightsError` naming expected and actual float counts when the file does not fit.
    """
    path = Path(path)
    header = read_header(path)
    payload = path.stat().st_size - header.nbytes
    if payload % 4:
        raise WeightsError(f"{path}: {payload} bytes after the header is not a whole number of float32 values "
                           "(the file is truncated or not a Darknet weights file)")
    actual = payload // 4
    layers = layer_tensors(model, cutoff)
    expected = sum(t.numel() for _, tensors in layers for t in tensors)
    if actual < expected or (actual > expected and cutoff is None):
        raise WeightsError(_mismatch_message(model, path, layers, expected, actual, cutoff))

    data = np.fromfile(path, dtype="<f4", count=expected, offset=header.nbytes)
    values = torch.from_numpy(data)
    check_finite(values, layers, path)
    offset = 0
    with torch.no_grad():
        for _, tensors in layers:
            for t in tensors:
                n = t.numel()
                t.copy_(values[offset: offset + n].view_as(t))
                offset += n
    model.darknet_header = (header.major, header.minor, header.revision, header.seen)
    return header


def check_finite(values: torch.Tensor, layers: List[Tuple[int, List[torch.Tensor]]], path: Path) -> None:
    """Refuse ``values`` (the file's floats, in the order of ``layers``) when one is NaN or infinite, naming
    the first layer that holds one: such weights give no detections, or NaN everywhere, without a word."""
    if math.isfinite(float(values.sum())):  # NaN and infinities carry into the sum: one fast pass for the usual case
        return
    offset = 0
    for index, tensors in layers:
        n = sum(t.numel() for t in tensors)
        bad = int((~torch.isfinite(values[offset: offset + n])).sum())
        if bad:
            raise WeightsError(f"{path}: layer {index} holds {bad:,} NaN or infinite value(s) of {n:,}: the file is "
                               "damaged or was saved by a training that diverged")
        offset += n


def _mismatch_message(model, path, layers, expected, actual, cutoff) -> str:
    scope = f"layers 0..{cutoff - 1} of " if cutoff is not None else ""
    msg = (f"{path}: {scope}cfg {model.cfg_path} needs {expected} float32 values after the header, "
           f"the file has {actual}")
    if actual < expected:
        # A file cut on a layer boundary is a partial file: say which cutoff explains it.
        total = 0
        for index, tensors in layers:
            total += sum(t.numel() for t in tensors)
            if total == actual and cutoff is None:
                return msg + (f": it holds exactly layers 0..{index}; pass cutoff={index + 1} to load a partial file")
            if total > actual:
                return msg + f": the file ends inside layer {index} (truncated, or weights for another cfg)"
    return msg + f": {actual - expected} values too many (weights for another cfg?)"


def save_darknet_weights(model: nn.Module, path: Union[str, Path], cutoff: Optional[int] = None,
                         header: Optional[DarknetHeader] = None) -> None:
    """Write ``model`` (layers 0..cutoff-1) as a Darknet ``.weights`` file, atomically.

    The header is the one the model was loaded with (so load -> save is byte-identical), else
    version 0.2.0 with an 8-byte ``seen``, which Darknet and OpenCV read back correctly.
    """
    path = Path(path)
    if header is None:
        header = DarknetHeader(*model.darknet_header)
    with atomic_path(path) as tmp, open(tmp, "wb") as file:
        file.write(header.to_bytes())
        for _, tensors in layer_tensors(model, cutoff):
            for t in tensors:
                # each tensor's memory as it is (no copy when it is already float32 little-endian on the CPU):
                # a 250 MB file is written in a quarter of the time of joining copies first
                file.write(np.ascontiguousarray(t.detach().to("cpu", torch.float32).numpy(), dtype="<f4").data)


def randomize_weights(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Fill ``model`` in place with random, well-scaled values so that activations neither vanish nor
    overflow through a deep network: conv weights ~ N(0, 1/fan_in), conv biases ~ N(0, 0.01), BN gamma and
    running variance ~ U(0.5, 1.5), beta and running mean ~ U(-0.1, 0.1). Deterministic in ``seed``; used to
    time or check a cfg without trained weights. Returns ``model``."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / m.weight[0].numel() ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            elif isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                m.bias.copy_((torch.rand(m.bias.shape, generator=g) - 0.5) * 0.2)
                m.running_mean.copy_((torch.rand(m.running_mean.shape, generator=g) - 0.5) * 0.2)
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
    return model
