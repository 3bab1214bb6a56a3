"""Timing several callables fairly on a shared machine: interleaved round by round (the order rotating each
round), so that load from other work hits every one alike, and summarized by the median (robust to spikes)."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Mapping, Optional

__all__ = ["time_interleaved", "median_ms", "interleaved_medians", "round_seconds"]


def time_interleaved(tasks: Mapping[str, Callable[[], object]], rounds: int, warmup: int = 0,
                     sync: Optional[Callable[[], None]] = None) -> Dict[str, List[float]]:
    """Run every task ``warmup`` times untimed, then ``rounds`` rounds of one timed call each, the order
    rotating by one task per round.

    ``sync`` (e.g. ``torch.cuda.synchronize``) runs after each call, inside its timing, so that
    asynchronous work is counted. Returns task name -> the ``rounds`` durations in seconds.
    """
    names = list(tasks)
    for _ in range(warmup):
        for name in names:
            tasks[name]()
            if sync is not None:
                sync()
    times: Dict[str, List[float]] = {name: [] for name in names}
    for i in range(rounds):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            t0 = time.perf_counter()
            tasks[name]()
            if sync is not None:
                sync()
            times[name].append(time.perf_counter() - t0)
    return times


def median_ms(seconds: List[float]) -> float:
    """The median of durations in seconds, in milliseconds."""
    return statistics.median(seconds) * 1e3


def interleaved_medians(tasks: Mapping[str, Callable[[], object]], rounds: int, warmup: int = 0,
                        sync: Optional[Callable[[], None]] = None) -> Dict[str, float]:
    """:func:`time_interleaved`, summarized: task name -> median milliseconds per call."""
    return {name: median_ms(t) for name, t in time_interleaved(tasks, rounds, warmup, sync).items()}


def round_seconds(tasks: Mapping[str, Callable[[], object]], sync: Optional[Callable[[], None]] = None) -> float:
    """One round of every task (a warm-up round that also says what a round costs): its seconds."""
    t0 = time.perf_counter()
    for task in tasks.values():
        task()
        if sync is not None:
            sync()
    return time.perf_counter() - t0
