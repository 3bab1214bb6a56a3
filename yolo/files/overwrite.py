"""No tool writes over its own input: an output path is compared with every input by real path and by file
identity (device and inode), so ``a.pt`` given as ``./a.pt``, ``../x/a.pt``, a symbolic link or a hard link
to it is the same file."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether ``a`` and ``b`` name one file: the same resolved path (links followed), or, when both exist,
    the same device and inode (a hard link)."""
    a, b = Path(a), Path(b)
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): then they are different files
        return False


def refuse_overwriting_inputs(output: PathLike, inputs: Mapping[str, Optional[PathLike]],
                              flag: str = "--output") -> None:
    """Raise ``ValueError`` when ``output`` is one of ``inputs`` (``{"--weights": path, ...}``; None values
    are skipped), naming both: writing would destroy the input."""
    for what, path in inputs.items():
        if path is not None and same_file(output, path):
            raise ValueError(f"{output}: {flag} is the input {what} {path} (the same file); writing it would "
                             f"destroy the input: choose another {flag}")


__all__ = ["refuse_overwriting_inputs", "same_file"]
