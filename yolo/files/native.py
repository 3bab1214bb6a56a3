"""C code the package carries, compiled on first use: :func:`build_library` builds C sources with the system
compiler (``$CC``, else ``cc``, else ``gcc``) into the user cache folder
(:func:`yolo.files.cache_dir.user_cache_dir`) and loads the library with ``ctypes``.

The library is named by a hash of the sources, the flags and the platform (system and architecture), so a changed
source or flag builds anew and a library is never loaded by a machine it was not built for (no ``-march``: any
machine of the architecture runs it); it is written to a temporary
name and renamed into place (atomic), so processes that compile at the same time each load a complete library.
A compiler is needed only once per cache folder. Each library is loaded once per process.

Users: :mod:`yolo.files.stb_decode` (Darknet's stb_image decode) and :mod:`yolo.ops.darknet_resize_kernel`
(Darknet's resize). Failures are :class:`yolo.errors.NativeBuildError`, whose message each user rewords or
swallows (the resize has a Python path of the same bits).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Dict, Sequence

from yolo.errors import NativeBuildError
from yolo.files.cache_dir import user_cache_dir

__all__ = ["build_library", "compiler"]

_LOCK = threading.Lock()
_LOADED: Dict[Path, ctypes.CDLL] = {}


def compiler() -> str:
    """The C compiler to build with: ``$CC``, else ``cc``, else ``gcc`` on the ``PATH``
    (:class:`NativeBuildError` with ``reason="no compiler"`` when none is found)."""
    for name in (os.environ.get("CC"), "cc", "gcc"):
        found = shutil.which(name) if name else None
        if found:
            return found
    raise NativeBuildError("no C compiler found (install gcc, or set CC)", reason="no compiler")


def library_path(name: str, sources: Sequence[Path], flags: Sequence[str]) -> Path:
    """Where the library ``name`` of these sources (every file that goes in, headers too) and flags for this
    platform is kept: ``<cache>/<name>/<name>-<hash>.so``."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(Path(source).read_bytes())
    digest.update(" ".join([*flags, platform.system(), platform.machine()]).encode())
    return user_cache_dir() / name / f"{name}-{digest.hexdigest()[:16]}.so"


def _compile(compiler_path: str, source: Path, flags: Sequence[str], target: Path) -> None:
    """Compile ``source`` into ``target``: written under a temporary name beside it, then renamed (atomic)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=".so", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise NativeBuildError(f"{target.parent}: cannot write there ({exc.strerror or exc})",
                               reason="cache folder", folder=target.parent, why=str(exc.strerror or exc)) from None
    try:
        run = subprocess.run([compiler_path, *flags, "-fPIC", "-shared", "-o", temporary, str(source)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["no message"])[-1]
            raise NativeBuildError(f"{compiler_path} could not build {source}: {last}", reason="compile",
                                   compiler=compiler_path, source=source, why=last)
        os.chmod(temporary, 0o755)  # mkstemp's 0600: a shared cache folder serves other users too
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def build_library(name: str, source: Path, flags: Sequence[str], depends: Sequence[Path] = ()) -> ctypes.CDLL:
    """The library ``name`` compiled from the C file ``source`` (which includes ``depends``) with ``flags``
    (``-fPIC -shared`` are added), built into the cache folder when it is not there yet, loaded once per process.

    Raises :class:`yolo.errors.NativeBuildError` (``reason``: ``"no compiler"``, ``"cache folder"`` or
    ``"compile"``) when the library is not built and cannot be."""
    with _LOCK:
        path = library_path(name, [source, *depends], flags)
        if path not in _LOADED:
            if not path.is_file():  # a compiler is needed only once per cache folder
                _compile(compiler(), source, flags, path)
            _LOADED[path] = ctypes.CDLL(str(path))
        return _LOADED[path]
