"""The command-line tools: each module parses its arguments (its parser is in :mod:`yolo.cli.flags`, which
loads no torch) and calls the package.

``python tools/NAME.py ...`` (from a clone) and the installed ``yolo-NAME`` console script run the same
``yolo.cli.NAME.main``.
"""
import os

# How idle OpenMP threads wait is set by the package's __init__ (yolo.openmp_wait), which runs before this module and
# before anything loads torch, for tools/NAME.py and the yolo-NAME commands alike.

# OpenCV's own log lines ("[ WARN:0@1.1] global grfmt_png.cpp ...", TIFF errors) and FFmpeg's ("[mov,mp4 @ 0x...]
# moov atom not found") would sit beside the tools' one-line warning for the same unreadable file; both are read
# when OpenCV loads, which is after this module. libjpeg's and libpng's own messages ("libpng error: ...") go to
# stderr past OpenCV and cannot be silenced this way. A value the user set wins.
os.environ.setdefault("OPENCV_LOG_LEVEL", "SILENT")
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # FFmpeg's AV_LOG_QUIET
