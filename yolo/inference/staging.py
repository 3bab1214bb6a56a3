"""One host buffer the images of every batch are gathered in before their upload, kept from call to call.

Page-locked (pinned) host memory lets a copy to the GPU run asynchronously, but allocating it is slow (the
driver maps the pages: milliseconds for a batch of images) and would stall every call. So a
:class:`HostStaging` allocates once, grows only when a batch needs more bytes than any before, and is
reused: before its bytes are written again, it waits for the upload that last read them (a CUDA event), so
a batch never overwrites the pixels of the one still being copied.

On the CPU nothing is pinned (``pin=False``) and there is nothing to wait for; the reuse is the same, which
is what the CPU tests check (:attr:`HostStaging.allocations`).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import torch

__all__ = ["HostStaging"]


class HostStaging:
    """A reusable ``uint8`` host buffer for uploads.

    Args:
        pin: page-locked memory (for asynchronous copies to CUDA); default: when CUDA is available.

    :meth:`borrow` gives a view of the buffer of the shape asked; :meth:`upload` copies such a view to a device
    and remembers the copy, so that the next :meth:`borrow` waits for it. ``allocations`` counts the buffers
    allocated so far (1 after the first call, more only when a larger batch comes), ``capacity`` is the
    buffer's size in bytes.
    """

    def __init__(self, pin: Optional[bool] = None):
        self.pin = torch.cuda.is_available() if pin is None else bool(pin)
        self.allocations = 0
        self._buffer: Optional[torch.Tensor] = None
        self._last_upload: Optional["torch.cuda.Event"] = None

    @property
    def capacity(self) -> int:
        return 0 if self._buffer is None else self._buffer.numel()

    def borrow(self, shape: Sequence[int]) -> torch.Tensor:
        """A ``UInt8[*shape]`` view of the buffer (its first bytes), valid until the next ``borrow``. Waits for
        the last upload from the buffer to finish; allocates a larger buffer when this one is too small."""
        if self._last_upload is not None:
            self._last_upload.synchronize()
            self._last_upload = None
        size = math.prod(shape)
        if size > self.capacity:
            self._buffer = torch.empty(size, dtype=torch.uint8, pin_memory=self.pin)
            self.allocations += 1
        return self._buffer[:size].view(*shape)

    def upload(self, view: torch.Tensor, device: Union[str, torch.device]) -> torch.Tensor:
        """``view`` (from :meth:`borrow`) on ``device``: an asynchronous copy from pinned memory to CUDA (the
        next ``borrow`` waits for it), else an ordinary copy. On the CPU the result is a copy too, never the
        buffer itself, so the next batch cannot change it."""
        device = torch.device(device)
        if device.type != "cuda":
            return view.clone()
        on_device = view.to(device, non_blocking=self.pin)
        if self.pin:
            self._last_upload = torch.cuda.Event()
            self._last_upload.record(torch.cuda.current_stream(device))
        return on_device
