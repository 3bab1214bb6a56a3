"""Label-scan cache: a JSON file keyed per image (size, mtime) and per label file (size, mtime, content hash).

The preferred place is next to the labels (``labels/train2017.cache.json``). When that folder is
read-only, or lies under ``$YOLO_ASSETS`` (shared assets are never written to), the cache goes to
the user cache folder (``$YOLO_CACHE_DIR``, else ``$XDG_CACHE_HOME/yolo``, else ``~/.cache/yolo``);
when that fails too it is kept in memory for the life of the process. Failures are silent (DEBUG log):
a cache is an optimisation, never a reason to stop.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any, Dict, Optional

from yolo.files.atomic import write_text_atomic
from yolo.files.cache_dir import user_cache_dir

logger = logging.getLogger(__name__)

CACHE_VERSION = 3
# A larger cache file is not read (a scan of 2,000,000 images writes about 1 GB).
MAX_CACHE_BYTES = 2 << 30
_MEMORY: Dict[str, Dict[str, Any]] = {}


def _is_under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def may_write_beside(path: Path) -> bool:
    """Whether a cache file may be written at ``path``.

    Not under ``$YOLO_ASSETS``; the folder exists, has a write permission bit (checked on the
    mode as well as with ``os.access``: a root process passes ``os.access`` on read-only folders).
    """
    folder = path.parent
    assets = os.environ.get("YOLO_ASSETS")
    if assets and _is_under(folder, Path(assets)):
        return False
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) and os.access(folder, os.W_OK)


def fallback_path(preferred: Path) -> Path:
    digest = hashlib.sha1(str(preferred.resolve()).encode("utf-8")).hexdigest()[:16]
    return user_cache_dir() / "labels" / f"{preferred.stem}-{digest}.json"


def _write_json(path: Path, data: Dict[str, Any]) -> bool:
    try:
        write_text_atomic(path, json.dumps(data, separators=(",", ":")))  # a reader never sees half a file
        return True
    except OSError as e:
        logger.debug("cannot write label cache %s: %s", path, e)
        return False


def _read_json(path: Path) -> Optional[Dict[str, Any]]:
    """The cache file's data; None for anything but a regular file of at most :data:`MAX_CACHE_BYTES` holding a
    JSON object (a FIFO would wait for a writer forever, ``/dev/zero`` never ends). Its entries are checked one by
    one where they are used (:mod:`yolo.data.cache_entries`)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CACHE_BYTES:
            logger.debug("label cache %s ignored: not a regular file, or larger than %d bytes", path, MAX_CACHE_BYTES)
            return None
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("entries", {}), dict) else None


class LabelCache:
    """Load/save one split's scan results.

    Args:
        preferred: where the cache should live (next to the labels).
        key: anything that, when it changes, invalidates the whole cache (e.g. the class count).
    """

    def __init__(self, preferred: Path, key: Dict[str, Any]):
        self.preferred = Path(preferred)
        self.key = {"version": CACHE_VERSION, **key}
        self.location: Optional[str] = None  # where the last save went ("memory" or a path)

    def _candidates(self):
        if may_write_beside(self.preferred) or self.preferred.exists():
            yield self.preferred
        yield fallback_path(self.preferred)

    def load(self) -> Dict[str, Any]:
        """The cached entries (``{}`` when there is no valid cache)."""
        for path in self._candidates():
            data = _read_json(path) if path.exists() else None
            if data and data.get("key") == self.key:
                logger.debug("label cache: %s", path)
                return data.get("entries", {})
        data = _MEMORY.get(str(self.preferred))
        if data and data.get("key") == self.key:
            return data["entries"]
        return {}

    def save(self, entries: Dict[str, Any]) -> str:
        """Store ``entries``; returns where they went (a path, or ``"memory"``)."""
        data = {"key": self.key, "entries": entries}
        targets = [self.preferred] if may_write_beside(self.preferred) else []
        targets.append(fallback_path(self.preferred))
        for path in targets:
            if _write_json(path, data):
                self.location = str(path)
                return self.location
        _MEMORY[str(self.preferred)] = data
        self.location = "memory"
        return self.location
