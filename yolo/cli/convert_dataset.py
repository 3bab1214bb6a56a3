"""Write a dataset in another layout: YOLO txt, COCO JSON or Pascal VOC XML (:mod:`yolo.data.dataset_writers`).

    python tools/convert_dataset.py --data voc2007.yaml --to yolo --output datasets/voc2007-yolo

The train and val splits of ``--data`` are read as training reads them and written, with a copy of every image and
a ``data.yaml``, into ``--output`` (a new or empty folder).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.convert_dataset import parse_args
from yolo.data import build_dataset, load_data_config
from yolo.data.dataset_writers import write_dataset
from yolo.errors import DataError


def main(args: argparse.Namespace) -> Path:
    setup_logging(args.verbose)
    try:
        config = load_data_config(args.data, training=True)
        splits = [(split, build_dataset(config, split, augment=False, cache=False)) for split in ("train", "val")]
        data_yaml = write_dataset(splits, config.names, args.to, Path(args.output))
    except DataError as exc:
        fail(str(exc))
    counts = ", ".join(f"{split} {len(dataset)} images, {dataset.num_boxes()} boxes" for split, dataset in splits)
    print(f"{args.data} -> {args.to}: {counts}; {data_yaml}")
    return data_yaml


def cli(argv=None) -> None:
    """Console entry point: ``yolo-convert-dataset``."""
    run_tool(main, parse_args(argv))
