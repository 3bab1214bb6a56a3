"""Convert weights between Darknet ``.weights`` and our ``.pt`` checkpoints.

The extensions decide the direction: ``.pt`` or ``.pth`` is a checkpoint, anything else Darknet weights.

    # Darknet -> PyTorch (state_dict + cfg text + metadata; loads with torch.load(weights_only=True))
    python tools/convert.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --output yolov3-tiny.pt

    # PyTorch -> Darknet (a .pt carries its cfg; --cfg overrides it)
    python tools/convert.py --weights runs/train/exp/best.pt --output best.weights

    # Darknet -> Darknet, only the first 15 layers: Darknet's ``partial`` command (seen reset to 0), a backbone
    # for transfer learning like darknet53.conv.74
    python tools/convert.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights \\
        --output tiny.conv.15 --cutoff 15
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.convert import parse_args
from yolo.files.atomic import output_target
from yolo.files.names import read_names
from yolo.files.overwrite import refuse_overwriting_inputs
from yolo.errors import MAX_MESSAGE, CfgError, shown
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.models.model import Darknet, load_model
from yolo.models.weights import float_count
from yolo.errors import WeightsError


CHECKPOINT_SUFFIXES = (".pt", ".pth")
# What Darknet's partial writes: save_weights_upto's MAJOR/MINOR/PATCH_VERSION (src/version.h) and seen = 0.
PARTIAL_HEADER = (0, 2, 5, 0)


def main(args: argparse.Namespace) -> Path:
    setup_logging(args.verbose, logging.WARNING)
    weights, output = Path(args.weights), Path(args.output)
    if not weights.exists():
        fail(f"{weights}: file not found")
    from_checkpoint = weights.suffix in CHECKPOINT_SUFFIXES
    to_checkpoint = output.suffix in CHECKPOINT_SUFFIXES
    try:
        refuse_overwriting_inputs(output, {"--weights": weights, "--cfg": args.cfg, "--names": args.names})
        output = output_target(output)  # a link's target; a device, a FIFO or a folder: refused before the work
        nothing_to_do = _same_format(from_checkpoint, to_checkpoint, args.cutoff)
        if nothing_to_do:
            fail(f"{output}: {nothing_to_do}")
        if not from_checkpoint and not args.cfg:
            fail("--cfg is needed to read Darknet .weights")
        if args.names and not to_checkpoint:
            fail(f"{args.names}: --names is stored in a .pt checkpoint; Darknet .weights hold no names")
        output.parent.mkdir(parents=True, exist_ok=True)  # as for a .pt output: the folder may be new
        if from_checkpoint:
            model = load_model(args.cfg, weights)
        else:
            model = Darknet(args.cfg)
            model.load_darknet_weights(weights, cutoff=args.cutoff)
        if to_checkpoint:
            _write_checkpoint(model, args, weights, output)
        else:
            _write_darknet(model, args.cutoff, weights, output, partial=not from_checkpoint)
    except (CfgError, WeightsError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    return output


def _same_format(from_checkpoint: bool, to_checkpoint: bool, cutoff) -> str:
    """Why a conversion with both files in one format does nothing ("" when it does something)."""
    if from_checkpoint and to_checkpoint:
        return ("--weights and --output are both .pt checkpoints: nothing to convert (a --output without .pt or "
                ".pth writes Darknet .weights)")
    if not from_checkpoint and not to_checkpoint and cutoff is None:
        return ("--weights and --output are both Darknet weights: nothing to convert without --cutoff N (Darknet's "
                "partial, layers 0..N-1); a .pt --output writes a checkpoint")
    return ""


def _write_checkpoint(model, args: argparse.Namespace, weights: Path, output: Path) -> None:
    names = read_names(args.names) if args.names else None
    if names is not None and len(names) != model.num_classes:
        fail(f"{args.names}: {len(names)} class names but the model has {model.num_classes} classes")
    ckpt = model_checkpoint(model, names=names, source_weights=str(weights),
                            cutoff=-1 if args.cutoff is None else args.cutoff)
    save_checkpoint(ckpt, output)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {shown(output, MAX_MESSAGE)}: {len(model.module_list)} layers, {n:,} parameters, "
          f"{model.num_classes} classes, cfg {args.cfg}, from {weights}")


def _write_darknet(model, cutoff, weights: Path, output: Path, partial: bool) -> None:
    if partial:  # Darknet's partial (src/darknet.c): its own version in the header, the training count at 0
        model.darknet_header = PARTIAL_HEADER
    model.save_darknet_weights(output, cutoff=cutoff)
    major, minor, revision, seen = model.darknet_header
    print(f"wrote {shown(output, MAX_MESSAGE)}: Darknet weights v{major}.{minor}.{revision} (seen={seen}), "
          f"{float_count(model, cutoff):,} floats from {weights}")


def cli(argv=None) -> None:
    run_tool(main, parse_args(argv))

