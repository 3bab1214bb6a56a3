#!/usr/bin/env python
"""Train a Darknet cfg on a dataset (SGD with the cfg's schedule, evaluation, checkpoints, resume). The code is in yolo/cli/train.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.train import cli

if __name__ == "__main__":
    cli()
