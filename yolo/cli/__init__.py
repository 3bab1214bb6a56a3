"""The command-line tools: each module parses its arguments (its parser is in :mod:`yolo.cli.flags`, which
loads no torch) and calls the package.

``python tools/NAME.py ...`` (from a clone) and the installed ``yolo-NAME`` console script run the same
``yolo.cli.NAME.main``.
"""
import os

# Idle OpenMP threads sleep instead of spinning. torch's CPU kernels (ours in yolo.accel too: oneDNN and
# plain torch ops) run on GNU OpenMP, whose threads otherwise busy-wait after each parallel region; on cores
# shared with other processes a spinning thread steals the time its sibling needs to reach the next barrier.
# tools/benchmark.py with yolov3-tiny at 416 on 2 cores beside two busy processes: batch-1 latency 1.9-2.5 s
# with the default policy, 40-190 ms with PASSIVE (OpenCV DNN 160-380 ms in the same runs); on idle cores the
# two are alike. OpenMP reads it once, when torch loads: this package imports torch only after this module,
# for tools/NAME.py and the yolo-NAME commands alike. A value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# OpenCV's own log lines ("[ WARN:0@1.1] global grfmt_png.cpp ...", TIFF errors) and FFmpeg's ("[mov,mp4 @ 0x...]
# moov atom not found") would sit beside the tools' one-line warning for the same unreadable file; both are read
# when OpenCV loads, which is after this module. libjpeg's and libpng's own messages ("libpng error: ...") go to
# stderr past OpenCV and cannot be silenced this way. A value the user set wins.
os.environ.setdefault("OPENCV_LOG_LEVEL", "SILENT")
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # FFmpeg's AV_LOG_QUIET
