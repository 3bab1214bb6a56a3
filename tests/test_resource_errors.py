"""When the machine runs short (memory, open files) or the reader of the output leaves (``| head``), every tool ends
with one line (or quietly, status 141, for a closed pipe), never a traceback or a hang.

The limits are real (``resource.setrlimit`` in the tool's process) but small: nothing here allocates gigabytes.
"""
import errno
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from helpers import REPO, one_line_error, run_tool, tool_parser
from training_helpers import write_one_head_model, write_one_head_training
from yolo.cli.args import run_tool as run_main
from yolo.cli.resource_errors import EXIT_CLOSED_PIPE

ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A one-head model (``tiny.pt``) and its training setup (8 + 2 shapes images, ``data.yaml``, ``hyp.yaml``)."""
    folder = tmp_path_factory.mktemp("resources")
    write_one_head_training(folder)
    write_one_head_model(folder)
    return folder


def _one_line(proc, *words):
    """``proc`` ended with status 2 and one ``error:`` line on stderr holding ``words``."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert lines[-1].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for word in words:
        assert word in lines[-1], lines[-1]
    return lines[-1]


@pytest.mark.parametrize("exc", [
    MemoryError(),
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                 "tried to allocate 1610612736 bytes. Error code 12 (Cannot allocate memory)"),
    torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                                "7.79 GiB of which 1.2 GiB is free."),
    RuntimeError("Caught RuntimeError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
                 "  File ...\nRuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 512 "
                 "bytes."),
])
def test_out_of_memory_is_one_line_naming_what_to_reduce(capsys, exc):
    def main(_args):
        raise exc

    with pytest.raises(SystemExit) as info:
        run_main(main, None, reduce="--img-size or --batch-size")
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: out of ") and "\n" not in err, err
    assert err.endswith("reduce --img-size or --batch-size")
    if "allocate" in str(exc):
        assert "bytes" in err or "GiB" in err


def test_other_runtime_errors_still_raise():
    def main(_args):
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        run_main(main, None)


# A tool run with its address space limited to what it uses once its modules are loaded plus EXTRA bytes: the limit
# set inside the tool's process, after the imports (their size differs from one installation to another).
LIMITED = """
import resource, sys
sys.path.insert(0, {tools!r})
import _launch, yolo.cli.{tool} as tool
used = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (used + {extra}, resource.getrlimit(resource.RLIMIT_AS)[1]))
tool.cli(sys.argv[1:])
"""


def run_limited(tool: str, extra: int, *args) -> subprocess.CompletedProcess:
    code = LIMITED.format(tools=str(REPO / "tools"), tool=tool, extra=extra)
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_benchmark_with_a_batch_no_memory_holds_is_one_line(tiny):
    # 100000 images of 64x64: 4.9 GB for the input alone
    proc = run_limited("benchmark", 1 << 29, "--cfg", tiny / "tiny.cfg", "--batch-size", "100000", "--iters", "1",
                       "--warmup", "0", "--no-opencv")
    _one_line(proc, "out of CPU memory", "--batch-size")


@pytest.mark.slow
def test_eval_out_of_memory_in_a_loader_worker_ends_with_one_line(tiny):
    # 8192x8192: 200 MB an image as uint8, 800 MB as floats in the worker, which has 512 MB. Before, a traceback
    # and then the main process waited for its worker forever (multiprocessing's exit sends SIGTERM, which the
    # workers ignore).
    proc = run_limited("eval", 1 << 29, "--weights", tiny / "tiny.pt", "--data", tiny / "data.yaml", "--img-size",
                       "8192", "--workers", "1", "--batch-size", "2", "--project", tiny / "eval", "--no-progress")
    _one_line(proc, "out of CPU memory", "--img-size")


@pytest.mark.slow
def test_a_tool_that_fails_while_its_workers_wait_ends(tmp_path):
    # the workers ignore SIGTERM (they leave the stop signals to the main process); the main one ends with an error
    script = tmp_path / "fails.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        from yolo.cli.args import run_tool
        from yolo.data.loader import create_dataloader

        class Items(torch.utils.data.Dataset):
            img_size = (8, 8)
            def __len__(self):
                return 64
            def __getitem__(self, i):
                if i == 0:
                    raise MemoryError()
                return torch.zeros(3, 8, 8), torch.zeros(0, 6), {}

        def main(args):
            for _ in create_dataloader(Items(), batch_size=1, num_workers=2):
                pass
        run_tool(main, None, reduce="--batch-size")
    """))
    proc = subprocess.run([sys.executable, str(script)], env=ENV, capture_output=True, text=True, timeout=60)
    _one_line(proc, "out of CPU memory (a data loader worker)", "--batch-size")


@pytest.mark.slow
def test_too_few_open_files_for_the_workers_is_one_line(tiny):
    # before: a worker's feeder thread failed ("Too many open files") and the main process waited forever
    proc = run_tool("eval", "--weights", tiny / "tiny.pt", "--data", tiny / "data.yaml", "--workers", "2",
                    "--project", tiny / "eval", "--no-progress", env=ENV, timeout=120,
                    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (20, 20)))
    _one_line(proc, "ulimit -n", "--workers")


def _closed_pipes(cmd, close_stderr: bool):
    """Run ``cmd`` with its standard output (and error, with ``close_stderr``) a pipe whose reader has already
    gone; returns ``(status, stderr text or "")``."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE if close_stderr else subprocess.PIPE)
    proc.stdout.close()
    if close_stderr:
        proc.stderr.close()
        return proc.wait(timeout=300), ""
    err = proc.stderr.read().decode()
    return proc.wait(timeout=300), err


@pytest.mark.slow
def test_detect_into_a_closed_pipe_ends_quietly_with_141(tiny):
    status, err = _closed_pipes([sys.executable, str(REPO / "tools" / "detect.py"), "--weights", str(tiny / "tiny.pt"),
                                 "--source", str(tiny / "data" / "images" / "val"), "--project", str(tiny / "det")],
                                close_stderr=False)
    assert status == EXIT_CLOSED_PIPE, err
    assert "Traceback" not in err and "Error" not in err, err


@pytest.mark.slow
def test_training_whose_reader_left_finishes_the_run_and_exits_141(tiny, tmp_path):
    # ``train ... 2>&1 | head -2``: the run goes on to its end (its output discarded), then says it in its status
    status, _ = _closed_pipes([sys.executable, str(REPO / "tools" / "train.py"), "--cfg", str(tiny / "tiny.cfg"),
                               "--data", str(tiny / "data.yaml"), "--hyp", str(tiny / "hyp.yaml"), "--epochs", "2",
                               "--device", "cpu", "--project", str(tmp_path), "--name", "run"], close_stderr=True)
    assert status == EXIT_CLOSED_PIPE
    rows = (tmp_path / "run" / "results.csv").read_text().splitlines()
    assert len(rows) == 3  # the header and both epochs
    assert torch.load(tmp_path / "run" / "last.pt", weights_only=True)["train"]["epoch"] == 2


@pytest.mark.parametrize("tool, args", [("benchmark", ["--cfg", "x.cfg"]), ("export", ["--weights", "x.pt"])])
def test_a_thread_count_no_machine_has_is_refused_by_the_flag(capsys, tool, args):
    # before: --threads 100000 was taken, and the runtime tried to start that many threads
    parser = tool_parser(tool)
    err = one_line_error(capsys, lambda: parser.parse_args([*args, "--threads", "100000"]))
    assert "--threads: 100000 is out of range" in err and "1024" in err


@pytest.mark.slow
def test_every_tool_turns_file_system_errors_and_ctrl_c_into_one_line(capsys):
    from yolo.cli.args import run_tool

    def raising(exc):
        def main(args):
            raise exc
        return lambda: run_tool(main, None)

    err = one_line_error(capsys, raising(OSError(errno.ENOSPC, "No space left on device", "runs/x/labels/a.txt")))
    assert err.startswith("error: runs/x/labels/a.txt: cannot write: the disk is full"), err
    err = one_line_error(capsys, raising(PermissionError(errno.EACCES, "Permission denied", "my.cfg")))
    assert err == "error: my.cfg: Permission denied", err
    with pytest.raises(SystemExit) as info:
        raising(KeyboardInterrupt())()
    assert info.value.code == 130 and capsys.readouterr().err == "interrupted (Ctrl-C): stopped\n"
    with pytest.raises(ZeroDivisionError):  # a bug stays a bug
        raising(ZeroDivisionError())()
