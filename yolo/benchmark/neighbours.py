"""Other processes competing for the cores while a benchmark times: a controlled load, so that "on a busy machine"
is a figure anyone can reproduce.

``N`` neighbours are N busy-loop processes (each keeps one core busy); ``train`` is a CPU training run of this
project on the built-in shapes data (``tools/train.py``; its data loader workers included). They start before the
timing and are always ended after it: on return, on an error and on Ctrl-C (each in a session of its own, ended with
its children: SIGTERM, then SIGKILL after a few seconds).

    with neighbours("2") as started:   # started: the processes' ids
        ...time something...
    print(load_text())
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

__all__ = ["neighbours", "beside_neighbours", "neighbour_commands", "load_text"]

REPO = Path(__file__).resolve().parent.parent.parent
BUSY_LOOP = "while True:\n    pass"
TRAIN_SETTLE_S = 20.0  # a training run's imports, data scan and first batches before it loads the cores steadily
LOOP_SETTLE_S = 1.0


def neighbour_commands(spec: str, folder: Path) -> List[List[str]]:
    """The command lines ``spec`` starts (``folder``: where a training neighbour writes its run)."""
    if spec == "train":
        configs = REPO / "configs"
        return [[sys.executable, str(REPO / "tools" / "train.py"), "--cfg", str(configs / "yolov3-tiny-shapes.cfg"),
                 "--data", str(configs / "shapes.yaml"), "--hyp", str(configs / "hyp.shapes.yaml"), "--device", "cpu",
                 "--epochs", "1000", "--project", str(folder), "--no-progress"]]
    return [[sys.executable, "-c", BUSY_LOOP] for _ in range(int(spec))]


def _end(procs: List[subprocess.Popen], grace_s: float = 5.0) -> None:
    """SIGTERM each process's session (a training run's loader workers too), SIGKILL what is left after
    ``grace_s``."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)  # the leader may be gone while a child of its session is not
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(2.0)


@contextlib.contextmanager
def neighbours(spec: Optional[str], settle_s: Optional[float] = None) -> Iterator[List[int]]:
    """Run the neighbours ``spec`` (a count or ``train``; None or ``"0"``: none) for the duration of the block;
    yields their process ids. Waits ``settle_s`` (default: 1 s, 20 s for ``train``) before the block so that
    they load the cores when the timing starts. Their output is discarded (a training run's too)."""
    if not spec or spec == "0":
        yield []
        return
    procs: List[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="yolo-neighbour-") as folder:
        try:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
            for command in neighbour_commands(spec, Path(folder)):
                procs.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, start_new_session=True, env=env))
            time.sleep(settle_s if settle_s is not None else TRAIN_SETTLE_S if spec == "train" else LOOP_SETTLE_S)
            yield [p.pid for p in procs]
        finally:
            _end(procs)


@contextlib.contextmanager
def beside_neighbours(spec: Optional[str]) -> Iterator[None]:
    """:func:`neighbours` for a tool: says which ones run beside the block and prints the load average before they
    end (``tools/benchmark.py --neighbours``)."""
    with neighbours(spec) as pids:
        if pids:
            what = "a CPU training run" if spec == "train" else f"{len(pids)} busy-loop process(es)"
            print(f"beside {what} (pid {', '.join(map(str, pids))}); {load_text()}")
        yield
        if pids:
            print(f"before ending them: {load_text()}")


def load_text() -> str:
    """The load average (1, 5, 15 minutes) and the processes running right now, from ``/proc/loadavg`` (empty
    where there is none)."""
    try:
        fields = Path("/proc/loadavg").read_text().split()
    except OSError:
        return ""
    return f"load average {fields[0]} {fields[1]} {fields[2]} (1/5/15 min), {fields[3].split('/')[0]} running now"
