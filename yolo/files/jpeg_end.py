"""Whether a JPEG file holds its whole image: its markers walked from the start-of-image to the end-of-image.

A download cut short decodes in OpenCV as the part that arrived over a gray block, with no error, so a dataset
scan must tell a truncated JPEG from a complete one. Looking at the last two bytes (``FF D9``) is not enough: many
complete files carry bytes after the end-of-image marker (a newline, a text trailer, zero padding), which every
decoder ignores. So the segments are followed by their lengths (JPEG, ITU-T T.81 annex B), and the entropy-coded
data after each start-of-scan up to the next marker (``FF`` followed by anything but ``00``, a restart marker
``D0``-``D7`` or another ``FF`` fill byte), until the end-of-image marker of the image itself (an embedded
thumbnail's lies inside an APP segment, skipped by its length).
"""
from __future__ import annotations

import re

_SOI, _EOI, _SOS, _TEM = 0xD8, 0xD9, 0xDA, 0x01
# a marker inside entropy-coded data: FF, then neither a stuffed 00, a restart marker nor a fill byte
_MARKER_AFTER_SCAN = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")


def jpeg_is_complete(data: bytes) -> bool:
    """True when ``data`` (a whole JPEG file) reaches the end-of-image marker of its image; False for a file cut
    short or whose structure breaks off. Bytes after that marker do not matter."""
    n = len(data)
    if data[:2] != b"\xff\xd8":
        return False
    pos = 2
    while pos < n:
        if data[pos] != 0xFF:
            return False  # a segment that is not where the previous one's length says it ends
        while pos < n and data[pos] == 0xFF:  # fill bytes before a marker
            pos += 1
        if pos >= n:
            return False
        marker = data[pos]
        pos += 1
        if marker == _EOI:
            return True
        if 0xD0 <= marker <= 0xD7 or marker in (_TEM, _SOI):  # markers without a length
            continue
        if pos + 2 > n:
            return False
        length = int.from_bytes(data[pos:pos + 2], "big")
        if length < 2:
            return False
        pos += length
        if marker == _SOS:
            found = _MARKER_AFTER_SCAN.search(data, pos)
            if found is None:
                return False
            pos = found.start()
    return False


__all__ = ["jpeg_is_complete"]
