"""What a tool meets when the machine, not the input, runs short, said in one line: memory (Python's
``MemoryError``, torch's allocator errors on the CPU and CUDA) and a closed output pipe (``detect ... | head -1``).

A closed pipe is how a reader says it has read enough: the tool then ends quietly, as a Unix tool killed by
SIGPIPE does (exit status 141 = 128 + SIGPIPE, as a shell reports it), with nothing more written anywhere.
"""
from __future__ import annotations

import re
import signal

from yolo.output_pipe import discard_output

# torch's words for an allocation that failed: the CPU allocator ("DefaultCPUAllocator: can't allocate memory:
# you tried to allocate N bytes"), CUDA's caching allocator ("CUDA out of memory. Tried to allocate ..."), and
# the words other back ends and cuDNN/cuBLAS use; numpy's MemoryError as a loader worker passes it on ("Unable to
# allocate 192. MiB for an array ...", re-raised as a RuntimeError).
_OOM_WORDS = ("can't allocate memory", "out of memory", "Unable to allocate", "CUBLAS_STATUS_ALLOC_FAILED",
              "CUDNN_STATUS_ALLOC_FAILED", "Cannot allocate memory")

# how much torch's message says was asked: "you tried to allocate 1610612736 bytes", "Tried to allocate 2.00 GiB"
_ASKED = re.compile(r"(?:you tried to allocate|Tried to allocate|Unable to allocate) ([0-9.]+ ?(?:bytes|[KMGTP]i?B))")

EXIT_CLOSED_PIPE = 128 + int(getattr(signal, "SIGPIPE", 13))


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says that memory ran out: a ``MemoryError``, or torch's ``RuntimeError`` (CUDA's
    ``OutOfMemoryError`` among them) from an allocation that failed, also when a loader worker met it."""
    if isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(words in str(exc) for words in _OOM_WORDS)


def out_of_memory_message(exc: BaseException, reduce: str) -> str:
    """The one line for ``exc`` (:func:`is_out_of_memory`): how much was asked when torch says it, and what to
    reduce (``reduce``: the tool's flags that set the memory it needs)."""
    text = str(exc)
    found = _ASKED.search(text)
    asked = found.group(1) if found else ""
    where = " (a data loader worker)" if "DataLoader worker" in text else ""
    on = "GPU" if "CUDA" in text or "cuda" in text else "CPU"
    tried = f" allocating {asked}" if asked else ""
    advice = f"reduce {reduce}" if reduce else "free memory or use smaller inputs"
    return f"out of {on} memory{tried}{where}: {advice}"


def exit_on_closed_pipe() -> None:
    """End the process quietly after a write to a closed pipe: standard output and error point to /dev/null from
    here on (Python's flush at exit would otherwise fail again and say so), exit status 141."""
    discard_output()
    raise SystemExit(EXIT_CLOSED_PIPE)


__all__ = ["EXIT_CLOSED_PIPE", "exit_on_closed_pipe", "is_out_of_memory", "out_of_memory_message"]
