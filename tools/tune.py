#!/usr/bin/env python
"""Search training hyperparameters with Optuna, one training run per trial. The code is in yolo/cli/tune.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.tune import cli

if __name__ == "__main__":
    cli()
