#!/usr/bin/env python
"""Evaluate a detector on a dataset's val split with COCO metrics (pycocotools). The code is in yolo/cli/eval.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.eval import cli

if __name__ == "__main__":
    cli()
