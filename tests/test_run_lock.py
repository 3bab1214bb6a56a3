"""The run folder's lock belongs to the training process alone: its forked children (the loader's workers) do not
hold it, so a run killed with SIGKILL can be resumed at once, while its orphaned workers are still ending."""
import os
import signal
import subprocess
import sys

import pytest

from helpers import REPO
from yolo.engine.run_folder import RunFolderLock

# Takes the lock, forks a child that lives on (as a loader worker does for a few seconds after its parent's
# death), writes the child's pid, and dies by SIGKILL.
KILLED = """
import multiprocessing, os, signal, sys, time
from yolo.engine.run_folder import RunFolderLock
lock = RunFolderLock(sys.argv[1])
child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
child.start()
open(sys.argv[2], "w").write(str(child.pid))
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_does_not_keep_the_lock_after_its_parent_is_killed(tmp_path):
    run_dir, pid_file = tmp_path / "run", tmp_path / "child.pid"
    run_dir.mkdir()
    proc = subprocess.run([sys.executable, "-c", KILLED, str(run_dir), str(pid_file)], cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == -signal.SIGKILL
    child = int(pid_file.read_text())
    try:
        os.kill(child, 0)  # the child is alive: before, it held the lock and this resume was refused
        lock = RunFolderLock(run_dir)
        lock.close()
    finally:
        os.kill(child, signal.SIGKILL)


@pytest.mark.slow
def test_a_second_lock_in_another_process_is_still_refused(tmp_path):
    lock = RunFolderLock(tmp_path)
    try:
        code = ("import sys\nfrom yolo.engine.run_folder import RunFolderLock\nfrom yolo.errors import "
                "ConfigError\ntry:\n    RunFolderLock(sys.argv[1])\nexcept ConfigError:\n    sys.exit(7)\n")
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 7
    finally:
        lock.close()
