"""The GPU report's schedule: its measurements run one after another within a time budget, each figure shown the
moment it exists, and a stop (Ctrl-C, SIGTERM) that keeps what was measured.

- A :class:`Measurement` is one piece of work (``"yolov3 detection fp16"``): the figures it fills, its expected
  cost at full length (``estimate_s``), its importance, and ``run(allotment)`` that measures within the seconds
  it is given, shortening its rounds or updates (:meth:`Allotment.rounds`, from the time of its first rounds).
- :func:`run_schedule` gives each measurement its share of what is left of the :class:`Budget` (in proportion
  to the estimates); when even the shortest runs of what is left no longer fit, the least important
  measurements are left out with a note. What the first measurements cost at full length, against their
  estimates, corrects the estimates of the rest.
- Before each measurement a progress line says what runs next and for how long; each figure is printed and
  appended to the output file at once (:class:`RowStream`).
- :func:`stop_on_signals`: SIGINT and SIGTERM raise :class:`ReportStopped`; the schedule ends there and every
  figure not measured reads "not measured (stopped)". While the tables are written, a signal only waits its turn.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple

__all__ = ["ReportStopped", "SignalStop", "stop_on_signals", "Budget", "Allotment", "Measurement", "RowStream",
           "ScheduleResult", "run_schedule", "process_age", "SHORTEST"]

Figures = Dict[str, Dict[str, float]]

SHORTEST = 0.25  # the shortest run of a measurement, as a fraction of its estimate at full length
STOPPED = "stopped"
BUDGET = "budget"


class ReportStopped(BaseException):
    """A stop was asked for (``why``: the signal's name, e.g. ``SIGTERM``); the report ends with what it has. Not an
    :class:`Exception`, so that no "one measurement failed" handler takes it for a failure."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class SignalStop:
    """While armed, SIGINT (Ctrl-C) and SIGTERM raise :class:`ReportStopped`; once :meth:`disarm` ed (the tables
    being written), they are only kept in :attr:`received`, so that what was measured is still written out."""

    def __init__(self):
        self.armed = True
        self.received: Optional[str] = None

    def handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        self.received = self.received or name
        if self.armed:
            raise ReportStopped(name)

    def disarm(self) -> None:
        self.armed = False


@contextmanager
def stop_on_signals() -> Iterator[SignalStop]:
    """While inside: SIGINT and SIGTERM handled by a :class:`SignalStop` (on the main thread; elsewhere nothing
    changes); the previous handlers come back after."""
    stop = SignalStop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, stop.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def process_age() -> float:
    """Seconds since this process started (Linux: from ``/proc/self/stat``; 0 where that cannot be read), so that
    a budget counts Python's start and imports too."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time after boot, in clock ticks
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


class Budget:
    """``seconds`` of wall time from ``start`` (default: now; ``clock``: :func:`time.monotonic`, or a fake one in
    tests), of which the last ``reserve`` seconds are kept for what follows the measuring (the tables, the exit)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic, start: Optional[float] = None,
                 reserve: float = 0.0):
        self.seconds, self.clock, self.reserve = float(seconds), clock, float(reserve)
        self.start = clock() if start is None else start

    def spent(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        """Seconds left for measuring."""
        return self.seconds - self.reserve - self.spent()


class Allotment:
    """The seconds one measurement may take. :meth:`rounds` fits a count of rounds into what is left of it and
    keeps account of what the shortening saved, so that :attr:`full_cost` (the cost the measurement would have had
    at full length) can correct the estimates of the measurements after it."""

    def __init__(self, seconds: float, clock: Callable[[], float]):
        self.seconds, self.clock, self.start = seconds, clock, clock()
        self.saved = 0.0

    def left(self) -> float:
        return self.seconds - (self.clock() - self.start)

    def rounds(self, seconds_per_round: float, most: int, least: int = 2, share: float = 1.0) -> int:
        """How many rounds of ``seconds_per_round`` (measured on the first ones) fit into ``share`` of what is
        left: at most ``most``, at least ``least``."""
        fit = int(max(self.left(), 0.0) * share / max(seconds_per_round, 1e-9))
        n = max(least, min(most, fit))
        self.saved += max(most - n, 0) * seconds_per_round
        return n

    @property
    def full_cost(self) -> float:
        return self.clock() - self.start + self.saved


@dataclass
class Measurement:
    """One piece of work of the report: ``what`` (the progress line's words), the ``model`` and the figure
    ``keys`` it fills, ``run(allotment) -> {key: value}``, its expected cost at full length, its importance (1
    first; the budget leaves out the highest numbers first) and ``ready()`` (False while it cannot start yet, e.g.
    Darknet's build is not finished)."""

    what: str
    model: str
    keys: Tuple[str, ...]
    run: Callable[[Allotment], Dict[str, float]]
    estimate_s: float
    importance: int = 1
    ready: Callable[[], bool] = lambda: True


def _label(key: str) -> str:
    return key


class RowStream:
    """Each figure printed (``print_fn``) and appended to ``output`` the moment it exists, as one markdown row
    ``| model | what | figure |``; progress lines are printed only. ``label(key)`` and ``value(key, v)`` make
    the cells' words."""

    HEADER = "| model | measured | figure |\n|---|---|---|\n"

    def __init__(self, output: Optional[Path] = None, print_fn: Callable[[str], None] = print,
                 label: Callable[[str], str] = _label, value: Callable[[str, float], str] = lambda k, v: f"{v:.4g}"):
        self.output, self.print_fn, self.label, self.value = output, print_fn, label, value
        self._file: Optional[TextIO] = None
        self.rows = 0

    def begin(self, title: str) -> None:
        self.print_fn(title)
        self.print_fn(self.HEADER.rstrip("\n"))
        if self.output is not None:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.output, "w", encoding="utf-8")
            self._write(f"{title}\n\n{self.HEADER}")

    def _write(self, text: str) -> None:
        if self._file is not None:
            self._file.write(text)
            self._file.flush()

    def progress(self, text: str) -> None:
        self.print_fn(text)

    def figure(self, model: str, key: str, value: float) -> None:
        row = f"| {model} | {self.label(key)} | {self.value(key, value)} |"
        self.rows += 1
        self.print_fn(row)
        self._write(row + "\n")

    def end(self, text: str) -> None:
        """The final tables and notes: printed and appended after the rows."""
        self.print_fn("\n" + text.rstrip("\n"))
        self._write("\n" + text)
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass
class ScheduleResult:
    figures: Figures
    missing: Dict[Tuple[str, str], str] = field(default_factory=dict)  # (model, key) -> "stopped" / "budget"
    notes: List[str] = field(default_factory=list)
    stopped: Optional[str] = None  # the signal's name when a stop was asked for


def _drop_to_fit(pending: List[Measurement], left: float, scale: float) -> List[Measurement]:
    """The least important measurements of ``pending`` (the last of equal importance first) that must be left out
    so that the shortest runs of the others fit into ``left`` seconds."""
    kept, dropped = list(pending), []
    while kept and sum(m.estimate_s * scale * SHORTEST for m in kept) > left:
        worst = max(range(len(kept)), key=lambda i: (kept[i].importance, i))
        dropped.append(kept.pop(worst))
    return dropped


def run_schedule(measurements: Sequence[Measurement], budget: Budget, stream: RowStream,
                 attempt: Callable[[str, Callable[[], Dict[str, float]]], Optional[Dict[str, float]]],
                 sleep: Callable[[float], None] = time.sleep) -> ScheduleResult:
    """Run ``measurements`` in order (the first ready one each time) within ``budget``; ``attempt(what, fn)`` runs
    one and returns its figures, or None when it failed (it keeps the note). A :class:`ReportStopped` raised
    inside ends the schedule: that measurement and the rest read "stopped"."""
    result = ScheduleResult(figures={})
    pending = list(measurements)
    done, waiting = 0, False
    estimated, actual = 0.0, 0.0  # estimates and full-length costs of the measurements done
    try:
        while pending:
            scale = actual / estimated if estimated > 0 else 1.0
            for m in _drop_to_fit(pending, budget.left(), scale):
                pending.remove(m)
                result.notes.append(f"left out to keep within the budget ({budget.seconds:.0f} s): {m.what}")
                result.missing.update({(m.model, k): BUDGET for k in m.keys})
            ready = [m for m in pending if m.ready()]
            if not pending:
                break
            if not ready:  # e.g. waiting for Darknet's build while nothing else is left
                if not waiting:
                    stream.progress(f"waiting until they can start (Darknet's build): "
                                    f"{', '.join(p.what for p in pending)} ({budget.left():.0f} s of the budget left)")
                waiting = True
                sleep(0.2)
                continue
            waiting = False
            m = ready[0]
            share = budget.left() * m.estimate_s / sum(p.estimate_s for p in pending)
            share = max(share, m.estimate_s * scale * SHORTEST)
            done += 1
            stream.progress(f"[{done}] next: {m.what}, about {min(share, m.estimate_s * scale):.0f} s "
                            f"({budget.left():.0f} s of the {budget.seconds:.0f} s budget left)")
            allotment = Allotment(share, budget.clock)
            figures = attempt(m.what, lambda: m.run(allotment))
            pending.remove(m)
            estimated += m.estimate_s
            actual += allotment.full_cost
            for key, value in (figures or {}).items():
                result.figures.setdefault(m.model, {})[key] = value
                stream.figure(m.model, key, value)
    except (ReportStopped, KeyboardInterrupt) as stop:  # KeyboardInterrupt: a second Ctrl-C in the trainer
        result.stopped = stop.why if isinstance(stop, ReportStopped) else "SIGINT"
        result.notes.append(f"stopped by {result.stopped} after {budget.spent():.0f} s: what was not measured by "
                            "then reads 'not measured (stopped)'")
        for m in pending:
            result.missing.update({(m.model, k): STOPPED for k in m.keys
                                   if k not in result.figures.get(m.model, {})})
    return result
