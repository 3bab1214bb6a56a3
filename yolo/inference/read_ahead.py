"""Reading and decoding ahead of the model, in order.

The detect tool spends as long reading and decoding a JPEG (or a video frame) as a GPU spends on the model for
it, so the next images are decoded on background threads while the model runs on the current batch: OpenCV
releases Python's lock while it decodes, so threads run in parallel, and ``uint8`` frames need no copy between
processes. Results come back in the order of the input, whatever order the threads finish in.
"""
from __future__ import annotations

import itertools
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Deque, Iterable, Iterator, Optional, TypeVar

__all__ = ["map_ahead", "read_ahead"]

T = TypeVar("T")
R = TypeVar("R")


def map_ahead(function: Callable[[T], R], items: Iterable[T], workers: int,
              depth: Optional[int] = None) -> Iterator[R]:
    """``function(item)`` for each of ``items``, in order, computed by ``workers`` threads up to ``depth``
    items (default ``2 * workers``) ahead of the caller.

    ``workers`` 0: each call in the caller's thread when its result is asked for (nothing ahead). An exception
    raised by ``function`` is raised here at its item. Closing the iterator early (a ``break``, an exception in
    the caller, Ctrl-C) waits for the calls already running and starts no other.
    """
    if workers <= 0:
        yield from map(function, items)
        return
    depth = max(1, depth if depth is not None else 2 * workers)
    pool = ThreadPoolExecutor(workers, thread_name_prefix="read-ahead")
    pending: Deque[Future] = deque()
    try:
        for item in items:
            pending.append(pool.submit(function, item))
            if len(pending) > depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def read_ahead(iterable: Iterable[T], depth: int) -> Iterator[T]:
    """The items of ``iterable`` (a video's frames) in order, read by one background thread up to ``depth``
    items ahead. The iterable is advanced by that thread only, one item at a time; closing this iterator early
    waits for the read in progress, so the source may be released right after."""
    source = iter(iterable)
    end = object()
    reads = map_ahead(lambda _: next(source, end), itertools.repeat(None), workers=1, depth=depth)
    try:
        for item in reads:
            if item is end:
                return
            yield item
    finally:
        reads.close()
