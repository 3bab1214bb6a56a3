"""The flags of ``tools/train.py`` (:mod:`yolo.cli.train`)."""
from __future__ import annotations

import argparse
from typing import List, Optional

from yolo.cli.args import DefaultsHelpFormatter, ToolParser, image_side, non_negative_int, positive_int

DESCRIPTION = ("Train a Darknet cfg on a dataset: SGD with the cfg's schedule, EMA, per-epoch COCO evaluation, "
               "checkpoints.")
EXAMPLES = """\
Hyperparameters: the cfg's [net], then --hyp (YAML), then the flags. Output: runs/train/NAME (NAME2, NAME3, ...
when taken) with last.pt, best.pt, results.csv, its chart results.png, cfg.cfg, hyp.yaml, opt.yaml, data.yaml,
metrics.json, plots and TensorBoard events. Ctrl-C saves last.pt and exits; --resume continues from it.

examples:
  # from scratch on the built-in shapes data (generated on first use)
  python tools/train.py --cfg configs/yolov3-tiny-shapes.cfg --data configs/shapes.yaml \\
      --hyp configs/hyp.shapes.yaml --device cpu

  # fine-tune COCO weights on a dataset with another class count (the heads are re-initialized)
  python tools/train.py --cfg cfg/yolov3-tiny.cfg --adapt-classes --data my.yaml \\
      --weights yolov3-tiny.weights --epochs 30 --batch-size 16 --freeze 13

  # continue an interrupted run exactly where it stopped
  python tools/train.py --resume runs/train/exp/last.pt

  # two processes (gloo on the CPU, NCCL on GPUs)
  torchrun --nproc_per_node 2 tools/train.py --cfg ... --data ... --batch-size 16
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    p.add_argument("--cfg", default=None, help="Darknet .cfg (not needed with --resume)")
    p.add_argument("--data", default=None,
                   help="dataset YAML (train and val splits, class names) or Darknet .data file (classes, train, "
                        "valid, names)")
    p.add_argument("--weights", default=None,
                   help="start from Darknet .weights (full or partial) or a .pt; tensors that do not fit are "
                        "re-initialized and reported")
    p.add_argument("--cutoff", type=non_negative_int, default=None,
                   help="read only layers 0..N-1 of a Darknet .weights file")
    p.add_argument("--hyp", default=None, help="hyperparameter YAML (overrides the cfg's [net])")
    p.add_argument("--epochs", type=positive_int, default=None,
                   help="default: enough epochs for the cfg's max_batches")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="images per optimizer update over all processes (Darknet's batch; default: the cfg's)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=None,
                   help="training input: one side or height width (default: the cfg's [net] size)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N or a GPU index (default: cuda if available)")
    p.add_argument("--project", default="runs/train", help="parent of the run folders (default: runs/train)")
    p.add_argument("--name", default="exp",
                   help="run folder name (default: exp; then exp2, exp3, ...: never overwritten)")
    p.add_argument("--resume", nargs="?", const="", default=None,
                   help="continue a run from its last.pt (or run folder); alone: the newest run under --project")
    p.add_argument("--freeze", type=non_negative_int, default=0,
                   help="freeze the first N layers (their BatchNorm statistics too)")
    p.add_argument("--workers", type=non_negative_int, default=None, help="data-loading processes (default: automatic)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of initialization, data order and augmentation (default: 0)")
    p.add_argument("--sync-bn", action="store_true", help="SyncBatchNorm across processes (CUDA DDP)")
    p.add_argument("--adapt-classes", action="store_true",
                   help="set the cfg's heads to the dataset's class count (classes and the filters before each head)")
    p.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=None,
                   help="TF32 matmuls/convolutions on CUDA: faster, but not Darknet's float32 step (default: the "
                        "hyperparameter tf32, false)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="train through torch.compile (falls back with a warning; default: the hyperparameter compile, "
                        "false)")
    p.add_argument("--cache-images", action=argparse.BooleanOptionalAction, default=None,
                   help="decode the train images once and keep them in memory (default: the hyperparameter "
                        "cache_images, false)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (logs only)")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)
