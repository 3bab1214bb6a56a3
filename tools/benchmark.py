#!/usr/bin/env python
"""Time our detection pipeline against OpenCV DNN on the same cfg, weights, input size and threads. The code is in yolo/cli/benchmark.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.benchmark import cli

if __name__ == "__main__":
    cli()
