"""Compute anchors for a dataset as Darknet's ``detector calc_anchors`` does (k-means, 1 - IoU distance).

    # 6 anchors for a 192x192 network from the training split of a dataset YAML (the built-in shapes data)
    python tools/anchors.py --data configs/shapes.yaml -n 6 --img-size 192

    # take the size and the anchor count from a cfg and write a copy of it with the new anchors
    python tools/anchors.py --data configs/coco128.yaml --cfg weights/yolov3-tiny.cfg --write yolov3-tiny-new.cfg

Prints the anchors in Darknet's format (paste them into every [yolo] section) and their mean IoU with the
label boxes. Darknet starts from randomly drawn boxes (seeded by the clock); here ``--seed`` fixes the draw.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from yolo.anchors import kmeans_anchors, label_sizes, set_cfg_anchors
from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.anchors import parse_args
from yolo.counts import MAX_ANCHORS
from yolo.files.atomic import output_target, write_text_atomic
from yolo.files.overwrite import refuse_overwriting_inputs
from yolo.data.config import load_data_config
from yolo.data.splits import build_dataset, dataset_inputs
from yolo.errors import MAX_MESSAGE, AnchorCfgError, CfgError, DataError, OutputError, shown
from yolo.models.cfg import parse_cfg


def main(args: argparse.Namespace):
    setup_logging(args.verbose, logging.WARNING)
    if args.write is not None and args.cfg is None:
        fail("--write needs --cfg (the cfg to copy)")
    if args.write is not None:
        try:
            refuse_overwriting_inputs(args.write, {"--cfg": args.cfg, "--data": args.data}, flag="--write")
            args.write = output_target(args.write)  # a link's target; a FIFO would hang the write, a device be lost
        except (ValueError, OutputError) as exc:
            fail(str(exc))
    width, height, k = args.width, args.height, args.num_of_clusters
    if args.cfg is not None:
        try:
            sections = parse_cfg(args.cfg)
        except (CfgError, OSError) as exc:
            fail(str(exc).strip().splitlines()[0])
        net = sections[0]
        width = width or net.get_int("width", 416)
        height = height or net.get_int("height", 416)
        heads = [s for s in sections if s.type == "yolo"]
        if k is None and heads:
            try:
                k = heads[0].get_count("num", len(heads[0].get_floats("anchors", [])) // 2, MAX_ANCHORS)
            except CfgError as exc:
                fail(str(exc))
    width, height, k = width or 416, height or 416, 9 if k is None else k
    if width <= 0 or height <= 0 or k <= 0:
        fail(f"width={width}, height={height} and -n {k} must be positive")
    if k > MAX_ANCHORS:
        fail(f"-n {k} is out of range: at most {MAX_ANCHORS:,} anchors")
    try:
        config = load_data_config(args.data)
        dataset = build_dataset(config, args.split, img_size=(height, width), augment=False)
    except (DataError, OSError) as exc:
        fail(str(exc).strip().splitlines()[0])
    if args.write is not None:  # the new cfg must not land on anything the run has read: a label file, an image
        try:
            refuse_overwriting_inputs(args.write, dataset_inputs(config, dataset), flag="--write")
        except ValueError as exc:
            fail(str(exc))
    sizes = label_sizes(dataset.records, (height, width))
    if len(sizes) < k:
        fail(f"{args.data}: {len(sizes)} label boxes in the {args.split} split, fewer than the {k} anchors asked for")
    result = kmeans_anchors(sizes, k, seed=args.seed)
    # The cfg copy is made before anything is printed: a cfg that cannot take the anchors is an error alone.
    new_cfg = cfg_with_anchors(args.cfg, result.anchors, width) if args.write is not None else None
    print(f"num_of_clusters = {k}, width = {width}, height = {height}: {len(sizes)} boxes, "
          f"{result.rounds} iterations")
    print(f"anchors = {result.format(width)}")
    print(f"mean IoU = {result.mean_iou:.2f} %")
    if new_cfg is not None:
        write_text_atomic(args.write, new_cfg)
        print(f"wrote {shown(args.write, MAX_MESSAGE)}")
    return result


def cfg_with_anchors(cfg: str, anchors, width: int) -> str:
    """The text of ``cfg`` with ``anchors`` set in its heads; a cfg that cannot take them is the tool's error."""
    try:
        return set_cfg_anchors(Path(cfg).read_text(encoding="utf-8"), anchors, cfg, width)
    except AnchorCfgError as exc:
        fail(str(exc))


def cli(argv=None) -> None:
    """Console entry point: ``yolo-anchors``."""
    run_tool(main, parse_args(argv))
