"""Reading a small text file that a dataset names (a ``.names`` file, a Darknet ``.data`` file): only a regular
file, and only up to a size such a file never reaches. A name may point anywhere: at a FIFO (reading it waits
for a writer forever), at ``/dev/zero`` (it never ends), at a 3 GB file (a MemoryError after minutes)."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Union

from yolo.errors import DataError

# 16 MiB: 1,000,000 class names of 16 characters, or a .data file a thousand times longer than any.
MAX_SMALL_TEXT_BYTES = 16 << 20


def read_small_text(path: Union[str, "os.PathLike[str]"], what: str, limit: int = MAX_SMALL_TEXT_BYTES) -> str:
    """The text of ``path`` (UTF-8, a byte-order mark dropped). ``what`` names the file in messages ("names
    file"). Raises ``FileNotFoundError`` when it is missing, :class:`DataError` naming it when it is no regular
    file or larger than ``limit`` bytes, ``UnicodeDecodeError`` when it is not UTF-8."""
    path = Path(path)
    st = path.stat()
    if stat.S_ISDIR(st.st_mode):
        raise DataError(f"a folder, not a {what}", path)
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"not a regular file (a FIFO or a device): a {what} must be a text file", path)
    with open(path, "rb") as f:
        data = f.read(limit + 1)  # never more, whatever the file became since its stat
    if len(data) > limit:
        raise DataError(f"{max(st.st_size, len(data)):,} bytes, more than the {limit:,} a {what} may have", path)
    return data.decode("utf-8-sig")


__all__ = ["MAX_SMALL_TEXT_BYTES", "read_small_text"]
