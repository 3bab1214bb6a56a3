"""A compiler cache for the Darknet builds of the tests: one object file per distinct preprocessed source.

The suite builds Darknet three ways (plain, its OpenCV build, the CUDA-training patches), each from scratch: 73
files with the same code-generation flags. Most of them preprocess to the same text in all three (only the files
that read ``OPENCV`` or carry a patch differ), so their objects are the same. Make calls this script as its C and
C++ compiler (see :func:`compiler_overrides`); for ``-c SOURCE -o OBJECT`` it hashes the compiler, the flags other
than ``-D``/``-I`` (those act in preprocessing only, which is hashed) and the preprocessed source, then copies the
object from the cache or compiles and stores it. Any other call (a link) runs the compiler as given. This is
ccache's preprocessor mode in brief: an object is reused only when the compiler would see the same input.

    python object_cache.py COMPILER CACHE_FOLDER [COMPILER FLAGS...] ARGS...
"""
from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence

# Flags that only steer the preprocessor, in their joined form (-DOPENCV, -Iinclude/): left out of the key.
PREPROCESSOR_ONLY = ("-D", "-I")
# Spellings the key cannot judge (a separate argument after -D/-I, forced includes): compiled without the cache.
UNCACHEABLE = {"-D", "-I", "-U", "-include", "-imacros", "-isystem", "-MD", "-MMD", "-MF"}


def compiler_version(compiler: str) -> str:
    """``COMPILER --version``'s text: part of the cache folder's name, so an upgraded compiler starts afresh."""
    run = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    return run.stdout if run.returncode == 0 else ""


def compiler_overrides(folder: Path, cache: Path) -> Dict[str, str]:
    """Environment for ``make`` (through MAKEFLAGS, which overrides the Makefile's ``CC=gcc``/``CPP=g++``): two
    small scripts in ``folder`` that run this cache with ``gcc`` and ``g++ -std=c++11`` (the Makefile's CPP)."""
    digest = hashlib.sha256((compiler_version("gcc") + compiler_version("g++")).encode()).hexdigest()[:12]
    objects = cache / f"objects-{digest}"
    objects.mkdir(parents=True, exist_ok=True)
    scripts = {}
    for variable, compiler in (("CC", ["gcc"]), ("CPP", ["g++", "-std=c++11"])):
        script = folder / f"cached-{compiler[0]}"
        command = [sys.executable, str(Path(__file__).resolve()), compiler[0], str(objects), *compiler[1:]]
        script.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in command) + ' "$@"\n')
        script.chmod(0o755)
        scripts[variable] = str(script)
    if any(ch.isspace() or ch == "\\" for path in scripts.values() for ch in path):
        return {}  # MAKEFLAGS cannot carry such a path: build without the cache
    return {"MAKEFLAGS": " ".join(f"{variable}={path}" for variable, path in scripts.items())}


def _object_key(compiler: str, args: Sequence[str], preprocessed: bytes) -> str:
    digest = hashlib.sha256()
    for part in [compiler, *(a for a in args if not a.startswith(PREPROCESSOR_ONLY))]:
        digest.update(part.encode() + b"\0")
    digest.update(preprocessed)
    return digest.hexdigest()


def main(argv: List[str]) -> int:
    compiler, objects, args = argv[1], Path(argv[2]), argv[3:]
    if "-c" not in args or args.count("-o") != 1 or UNCACHEABLE.intersection(args):
        return subprocess.call([compiler, *args])
    at = args.index("-o")
    output, rest = args[at + 1], args[:at] + args[at + 2:]
    preprocessed = subprocess.run([compiler, *(a for a in rest if a != "-c"), "-E"], capture_output=True)
    if preprocessed.returncode != 0:
        return subprocess.call([compiler, *args])  # its own error message
    stored = objects / _object_key(compiler, rest, preprocessed.stdout)
    if not stored.is_file():
        status = subprocess.call([compiler, *args])
        if status != 0:
            return status
        with tempfile.NamedTemporaryFile(dir=objects, delete=False) as part:  # whole or absent for a parallel make
            part.write(Path(output).read_bytes())
        os.replace(part.name, stored)
        return 0
    Path(output).write_bytes(stored.read_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
