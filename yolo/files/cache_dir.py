"""The user cache folder: ``$YOLO_CACHE_DIR``, else ``$XDG_CACHE_HOME/yolo``, else ``~/.cache/yolo`` (label-scan
caches that cannot be written beside the labels, the compiled C code: the stb_image decoder, the resize kernel)."""
from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$YOLO_CACHE_DIR``, else ``$XDG_CACHE_HOME/yolo``, else ``~/.cache/yolo``."""
    if os.environ.get("YOLO_CACHE_DIR"):
        return Path(os.environ["YOLO_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "yolo"
