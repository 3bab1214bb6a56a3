"""Where an epoch's training time goes: waiting for data, the step, and everything else.

The trainer marks three moments per mini-batch: the batch arrived from the loader (:meth:`EpochTimes.data_ready`),
the step ended (:meth:`EpochTimes.step_done`: forward, loss, backward and, at an update's last mini-batch,
Darknet's update) and, implicitly, the next wait began. The epoch's wall time then splits into

- ``data``: seconds the loop waited for the loader (host clock: the loop blocks in ``next(batches)``);
- ``step``: seconds of the steps. On the CPU the host clock between the two marks; on CUDA the GPU's own
  clock between two CUDA events recorded at the marks (the host only queues the work, so its clock would
  measure the queueing). The events are read at the end of the epoch, after the epoch's one sync: no sync of
  their own;
- ``other``: the rest of the wall time (EMA, hooks, progress lines, logging), never negative (on CUDA the GPU's
  step may overlap the host's wait for the next batch).

Nothing here makes the loop wait: the host clock is ``time.perf_counter`` and CUDA events are recorded on the
current stream.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, List, Tuple

import torch

DATA_WAIT_WARNING_SHARE = 0.25  # warn when the loop waits for data longer than this share of the epoch


@dataclass(frozen=True)
class EpochTimeSplit:
    """One epoch's wall time (``total`` seconds, its updates only) and its parts, in seconds."""

    total: float
    data: float
    step: float
    other: float

    @property
    def data_share(self) -> float:
        """The share of the epoch spent waiting for data (0 for an empty epoch)."""
        return self.data / self.total if self.total > 0 else 0.0


class EpochTimes:
    """The clock of one epoch (see the module docstring); :meth:`start` it before the first batch is asked
    for, mark each mini-batch, and :meth:`finish` after the last one."""

    def __init__(self, device: torch.device, clock: Callable[[], float] = time.perf_counter):
        self.device = device
        self.cuda = device.type == "cuda"
        self.clock = clock  # seconds, monotonic
        self.start()

    def start(self) -> None:
        """Reset; the epoch starts now (a wait for the first batch counts as data)."""
        self.begin = self.last = self.clock()
        self.data = self.step = 0.0
        self.events: List[Tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._open_event = None

    def data_ready(self) -> None:
        """A batch came from the loader: the time since the last mark was a wait for data."""
        now = self.clock()
        self.data += now - self.last
        self.last = now
        if self.cuda:
            self._open_event = torch.cuda.Event(enable_timing=True)
            self._open_event.record(torch.cuda.current_stream(self.device))  # the model's device, whichever is current

    def step_done(self) -> None:
        """The step on that batch was made (queued, on CUDA)."""
        now = self.clock()
        if self.cuda:
            if self._open_event is not None:
                end = torch.cuda.Event(enable_timing=True)
                end.record(torch.cuda.current_stream(self.device))
                self.events.append((self._open_event, end))
                self._open_event = None
        else:
            self.step += now - self.last
        self.last = now

    def finish(self) -> EpochTimeSplit:
        """The epoch's split. On CUDA this waits for the last step's event: call it where the epoch syncs
        anyway (its losses are read right after)."""
        if self.events:  # first: the epoch's queued GPU work belongs to its total
            self.events[-1][1].synchronize()
        total = self.clock() - self.begin
        step = self.step
        if self.events:
            step = sum(start.elapsed_time(end) for start, end in self.events) / 1e3
            self.events = []
        data = min(self.data, total)
        step = min(step, total - data)
        return EpochTimeSplit(total=total, data=data, step=step, other=max(total - data - step, 0.0))


def data_wait_warning(split: EpochTimeSplit, workers: int, cache_images: bool) -> str:
    """The line that says the loop waited too long for data, and what helps ('' when it did not)."""
    if split.data_share <= DATA_WAIT_WARNING_SHARE:
        return ""
    helps = [f"more --workers (now {workers})"]
    if not cache_images:
        helps.append("--cache-images")
    return (f"the training waited {split.data:.1f} s of the epoch's {split.total:.1f} s for data "
            f"({100 * split.data_share:.0f}%): the loader is slower than the step; " + " or ".join(helps)
            + " may help")


__all__ = ["DATA_WAIT_WARNING_SHARE", "EpochTimeSplit", "EpochTimes", "data_wait_warning"]
