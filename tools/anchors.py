#!/usr/bin/env python
"""Compute anchors for a dataset as Darknet's ``detector calc_anchors`` does (k-means, 1 - IoU distance). The code is in yolo/cli/anchors.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.anchors import cli

if __name__ == "__main__":
    cli()
