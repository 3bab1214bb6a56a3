#!/usr/bin/env python
"""The whole job on the built-in shapes data, on the CPU: generate, train, evaluate, detect. The code is in yolo/cli/demo.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.demo import cli

if __name__ == "__main__":
    cli()
