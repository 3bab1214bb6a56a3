"""Convert weights between Darknet ``.weights`` and our ``.pt`` checkpoints.

The direction follows the input's extension:

    # Darknet -> PyTorch (state_dict + cfg text + metadata; loads with torch.load(weights_only=True))
    python tools/convert.py --cfg yolov3-tiny.cfg --weights yolov3-tiny.weights --output yolov3-tiny.pt

    # PyTorch -> Darknet (a .pt carries its cfg; --cfg overrides it)
    python tools/convert.py --weights runs/train/exp/best.pt --output best.weights

    # only the first 15 layers (a backbone for transfer learning, like darknet53.conv.74)
    python tools/convert.py --cfg yolov3-tiny.cfg --weights yolov3-tiny.weights --output tiny.conv.15 --cutoff 15
"""
from __future__ import annotations

import argparse
from pathlib import Path

from yolo.cli.args import fail, run_tool
from yolo.cli.flags.convert import parse_args
from yolo.files.names import read_names
from yolo.files.overwrite import refuse_overwriting_inputs
from yolo.errors import CfgError
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.models.model import Darknet, load_model
from yolo.models.weights import float_count
from yolo.errors import WeightsError


def main(args: argparse.Namespace) -> Path:
    weights, output = Path(args.weights), Path(args.output)
    if not weights.exists():
        fail(f"{weights}: file not found")
    to_darknet = weights.suffix in (".pt", ".pth")
    try:
        refuse_overwriting_inputs(output, {"--weights": weights, "--cfg": args.cfg, "--names": args.names})
        output.parent.mkdir(parents=True, exist_ok=True)  # as for a .pt output: the folder may be new
        if to_darknet:
            model = load_model(args.cfg, weights)
            model.save_darknet_weights(output, cutoff=args.cutoff)
            major, minor, revision, seen = model.darknet_header
            print(f"wrote {output}: Darknet weights v{major}.{minor}.{revision} (seen={seen}), "
                  f"{float_count(model, args.cutoff):,} floats from {weights}")
        else:
            if not args.cfg:
                fail("--cfg is needed to read Darknet .weights")
            model = Darknet(args.cfg)
            model.load_darknet_weights(weights, cutoff=args.cutoff)
            names = read_names(args.names) if args.names else None
            ckpt = model_checkpoint(model, names=names, source_weights=str(weights),
                                    cutoff=-1 if args.cutoff is None else args.cutoff)
            save_checkpoint(ckpt, output)
            n = sum(p.numel() for p in model.parameters())
            print(f"wrote {output}: {len(model.module_list)} layers, {n:,} parameters, "
                  f"{model.num_classes} classes, cfg {args.cfg}, from {weights}")
    except (CfgError, WeightsError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    return output


def cli(argv=None) -> None:
    run_tool(main, parse_args(argv))

