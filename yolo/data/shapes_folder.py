"""The shapes generator's folder: it deletes only what it made, and knows what it made.

A dataset YAML's ``path:`` may name a folder of the user's. The generator's marker ``shapes.json`` lists every
file it wrote with a hash of its bytes; before it regenerates a folder (other parameters), every file there must
be one it listed, unchanged, or a label cache of the scan (``labels/train.cache.json``); anything else (a photo,
a label file edited since, a folder without that list) is a :class:`yolo.errors.DataError` and nothing is deleted.

A folder is drawn in a temporary sibling ``.NAME.tmp-PID`` and renamed into place. SIGTERM or SIGHUP while it is
drawn ends the process (exit status 128 + the signal) after removing it; one left by a process that was killed
outright (SIGKILL) is removed by the next generation: it holds :data:`IN_PROGRESS`, written before anything else.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from yolo.errors import DataError, shown

MARKER = "shapes.json"
IN_PROGRESS = ".shapes-generating"
SPLITS = ("train", "val")
# the folders the generator makes, deepest first (the order they are removed in)
FOLDERS = tuple(f"{kind}/{split}" for kind in ("images", "labels") for split in SPLITS) + ("images", "labels")
# the label scan's caches for the two splits (yolo.data.yolo_layout._cache_file): made here too, stale after a change
LABEL_CACHES = tuple(f"labels/{split}.cache.json" for split in SPLITS)


def digest(data: bytes) -> str:
    """The hash a generated file is listed with."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_marker(root: Path) -> Optional[dict]:
    """``root/shapes.json`` as a mapping, or None (missing, unreadable, not JSON, not a mapping)."""
    try:
        data = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def marker_params(marker: Optional[dict]) -> Optional[dict]:
    """The generator parameters a marker records (its file list left out), or None."""
    return None if marker is None else {k: v for k, v in marker.items() if k != "files"}


def _is_label_cache(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and set(data) == {"key", "entries"}


def _walk(root: Path) -> Iterator[Path]:
    """Every entry under ``root``, a folder before what it holds; a link (to a folder too) is not followed."""
    for folder, subfolders, names in os.walk(root):
        here = Path(folder)
        yield from (here / name for name in sorted(subfolders + names))
        subfolders[:] = [name for name in subfolders if not (here / name).is_symlink()]


def _made_here(path: Path, rel: str, listed: Dict[str, str]) -> Optional[bool]:
    """Whether the generator made ``path`` (``rel`` under its root): True; False: made, but changed since (or
    unreadable); None: not made by it."""
    if path.is_symlink():
        return None
    if path.is_dir():
        return True if rel in FOLDERS else None
    if rel in LABEL_CACHES and path.is_file() and _is_label_cache(path):
        return True
    if rel not in listed or not path.is_file():
        return None
    try:
        return digest(path.read_bytes()) == listed[rel]
    except OSError:
        return False


def generated_files(root: Path, marker: Optional[dict]) -> List[Path]:
    """Every file and folder under ``root`` (files first, then folders deepest first, the marker between), after
    checking that the generator made each one; a :class:`DataError` naming ``root`` and the first one it did not
    make otherwise (a marker without its file list is not the generator's: its folder is not known to be)."""
    listed = marker.get("files") if marker is not None else None
    listed = listed if isinstance(listed, dict) else None
    made, foreign, changed = [], [], []
    for path in _walk(root):
        rel = path.relative_to(root).as_posix()
        ours = True if rel == MARKER and listed is not None else _made_here(path, rel, listed or {})
        if ours:
            made.append(path)
        else:
            (changed if ours is False else foreign).append(rel + ("/" if path.is_dir() else ""))
    if foreign or changed:
        why = "did not make" if foreign else "made, but that were changed since"
        hint = "" if listed is not None else " (no list of its files there: a folder of yours, or an older version's)"
        raise DataError(f"holds {len(foreign) + len(changed):,} file(s) that the shapes generator {why} (first: "
                        f"{shown((foreign or changed)[0])}){hint}: refusing to overwrite them; move them or "
                        "delete the folder yourself, or choose another 'path:'", root)
    folders = sorted((p for p in made if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
    files = [p for p in made if not p.is_dir() and p.relative_to(root).as_posix() != MARKER]
    return files + [root / MARKER] + folders


def remove_generated(root: Path, marker: Optional[dict]) -> None:
    """Delete what the generator made in ``root`` (the marker last, so an interrupted removal is resumed by the
    next one), then ``root`` itself when nothing else is left; :func:`generated_files` checks first."""
    for path in generated_files(root, marker):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink(missing_ok=True)
    root.rmdir()


def temp_folder(root: Path) -> Path:
    """Where ``root`` is drawn before its rename: ``.NAME.tmp-PID`` beside it."""
    return root.parent / f".{root.name}.tmp-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove_stale_temp_folders(root: Path) -> List[Path]:
    """Delete the temporary folders of ``root`` left by generations whose process is gone (killed outright): only
    ``.NAME.tmp-PID`` folders that hold :data:`IN_PROGRESS`. Returns them."""
    removed = []
    for path in root.parent.glob(f".{root.name}.tmp-*") if root.parent.is_dir() else []:
        pid = path.name.rsplit("-", 1)[-1]
        if (pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)) and not path.is_symlink()
                and (path / IN_PROGRESS).is_file()):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class _Terminated(SystemExit):
    """SIGTERM or SIGHUP while a folder is drawn: the process exits with 128 + the signal, after cleaning up."""


@contextmanager
def exit_on_termination() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`SystemExit` (128 + the signal) where they would end the
    process at once (their default handler, on the main thread), so the ``finally`` blocks run; outside, the
    handlers are as they were."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = [sig for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None))
               if sig is not None and signal.getsignal(sig) == signal.SIG_DFL]

    def terminate(signum, frame):
        raise _Terminated(128 + signum)

    previous = {sig: signal.signal(sig, terminate) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["FOLDERS", "IN_PROGRESS", "LABEL_CACHES", "MARKER", "digest", "exit_on_termination", "generated_files",
           "marker_params", "read_marker", "remove_generated", "remove_stale_temp_folders", "temp_folder"]
