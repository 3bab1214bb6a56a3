"""Saving results behind the model: drawing the boxes and encoding an annotated JPEG or video frame takes as long
as the model's work for that image on a GPU, so it runs on background threads while the next batch is detected.

What decides a result's file name and what is kept in memory for ``results.json`` stays in the caller's thread,
in order; only the self-contained saves (one annotated image to its own file, or the frames of one video, in
order on a single thread) are handed over.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Deque, Optional

__all__ = ["WriteBehind"]


class WriteBehind:
    """Run calls on ``threads`` background threads (0: at once, in the caller's thread), at most ``limit``
    (default ``4 * threads``) waiting, so frames kept for writing stay bounded. With one thread the calls run in
    the order given (a video's frames).

    An exception raised by a call (an :class:`yolo.errors.OutputError`: the disk is full) is raised again by
    the next :meth:`submit` or by :meth:`wait`; use as a context manager, whose exit waits for every call
    (and raises their first error unless an exception is already on its way).
    """

    def __init__(self, threads: int, limit: Optional[int] = None):
        self.threads = max(0, int(threads))
        self.limit = max(1, limit if limit is not None else 4 * self.threads)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="write-behind") if self.threads else None
        self._pending: Deque[Future] = deque()

    def submit(self, function: Callable[..., None], *args) -> None:
        """Call ``function(*args)`` (now when there is no thread)."""
        if self._pool is None:
            function(*args)
            return
        while self._pending and (self._pending[0].done() or len(self._pending) >= self.limit):
            self._pending.popleft().result()  # raises a finished call's error
        self._pending.append(self._pool.submit(function, *args))

    def wait(self) -> None:
        """Wait for every call given so far; raises the first error among them."""
        while self._pending:
            self._pending.popleft().result()

    def __enter__(self) -> "WriteBehind":
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        try:
            if exc_type is None:
                self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)  # every call given ends: no half-written file is left behind
            self._pending.clear()
