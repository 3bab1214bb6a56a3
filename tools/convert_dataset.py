#!/usr/bin/env python
"""Write a dataset in another layout: YOLO txt, COCO JSON or Pascal VOC XML. The code is in yolo/cli/convert_dataset.py; ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

from yolo.cli.convert_dataset import cli

if __name__ == "__main__":
    cli()
