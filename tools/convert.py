#!/usr/bin/env python
"""Convert weights between Darknet ``.weights`` and our ``.pt`` checkpoints. The code is in yolo/cli/convert.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.convert import cli

if __name__ == "__main__":
    cli()
