"""A model's forward replayed from captured CUDA graphs: one capture per input shape, then each call is one
graph launch instead of a kernel launch per layer from Python (what bounds small batches on a fast GPU).

Only CUDA inputs of at most :data:`GRAPH_MAX_BATCH` images are captured, at most ``max_graphs`` batch sizes
of one image size (height, width, dtype). A graph reads the tensors the model caches per input size (the
heads' cell grids) at the addresses they had at capture; another size replaces those caches, so when one
comes every graph is dropped (and that size is captured anew): a Detector's size is fixed, so this does not
happen there. Any other input, and any shape whose capture fails (an op that syncs with the host, an
unsupported driver), runs the model eagerly, with one warning per failed shape. The outputs are those of
the eager model (the same kernels run in the same order).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import torch

from yolo.counts import GRAPH_MAX_BATCH

__all__ = ["GRAPH_MAX_BATCH", "GraphedForward"]


@dataclass
class _Captured:
    graph: "torch.cuda.CUDAGraph"
    static_input: torch.Tensor
    static_output: torch.Tensor


class GraphedForward:
    """Call ``model(x)`` through CUDA graphs where it can (see the module docstring).

    Args:
        model: a module (or callable) in eval mode whose forward is a fixed sequence of kernels for a given
            input shape (no host syncs, no data-dependent shapes): the prepared detection model.
        max_graphs: most input shapes captured; later new shapes run eagerly.
        warmup: eager runs on a side stream before a capture (cuDNN picks its kernels, caches fill).

    ``graphed(x)``: ``x`` ``Float[N, C, H, W]``; returns what ``model(x)`` returns (a new tensor each call).
    ``captured`` lists the captured ``(shape, dtype)`` keys.
    """

    def __init__(self, model: Callable[[torch.Tensor], torch.Tensor], max_graphs: int = 4, warmup: int = 2):
        self.model = model
        self.max_graphs = int(max_graphs)
        self.warmup = int(warmup)
        self._graphs: Dict[Tuple, Optional[_Captured]] = {}
        self._image_key: Optional[Tuple] = None  # (h, w, dtype, device) of the captured graphs

    @property
    def captured(self):
        return [key[:2] for key, entry in self._graphs.items() if entry is not None]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cuda" or x.shape[0] > GRAPH_MAX_BATCH:
            if x.device.type == "cuda" and self._image_key != (tuple(x.shape[2:]), x.dtype, x.device):
                self._graphs.clear()  # this eager run may replace the caches the graphs read
                self._image_key = None
            return self.model(x)
        key = (tuple(x.shape), x.dtype, x.stride(), x.device)
        if key not in self._graphs:
            image_key = (tuple(x.shape[2:]), x.dtype, x.device)
            if self._image_key != image_key:
                self._graphs.clear()
                self._image_key = image_key
            if len(self._graphs) >= self.max_graphs:
                return self.model(x)
            self._graphs[key] = self._capture(x)
        entry = self._graphs[key]
        if entry is None:
            return self.model(x)
        with torch.cuda.device(x.device):  # replay on the graph's device, whichever is current
            entry.static_input.copy_(x)
            entry.graph.replay()
        # A copy: the next replay overwrites the static output.
        return entry.static_output.clone()

    def _capture(self, x: torch.Tensor) -> Optional[_Captured]:
        static_input = x.clone()  # same shape, dtype and memory format
        try:
            # The input's device made current, and a capture stream of its own: torch.cuda.graph's default
            # stream belongs to whichever device was current when it was first made (cuda:0 for a model on cuda:1).
            with torch.cuda.device(x.device):
                side = torch.cuda.Stream(x.device)
                side.wait_stream(torch.cuda.current_stream(x.device))
                with torch.cuda.stream(side):
                    for _ in range(self.warmup):
                        self.model(static_input)
                torch.cuda.current_stream(x.device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=torch.cuda.Stream(x.device)):
                    static_output = self.model(static_input)
                torch.cuda.synchronize(x.device)
        except Exception as exc:  # any capture failure: this shape runs eagerly from now on
            warnings.warn(f"CUDA graph capture failed for input {tuple(x.shape)} {x.dtype} "
                          f"({type(exc).__name__}: {exc}); running the model eagerly for it", RuntimeWarning)
            torch.cuda.synchronize(x.device)
            return None
        return _Captured(graph, static_input, static_output)
