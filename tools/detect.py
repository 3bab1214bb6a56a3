#!/usr/bin/env python
"""Run a Darknet detector on images, folders, globs, videos or a camera; save annotated results. The code is in yolo/cli/detect.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.detect import cli

if __name__ == "__main__":
    cli()
