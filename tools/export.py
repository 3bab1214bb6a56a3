#!/usr/bin/env python
"""Export a Darknet model to ONNX, TorchScript or Darknet .weights, then check the written file. The code is in yolo/cli/export.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.export import cli

if __name__ == "__main__":
    cli()
