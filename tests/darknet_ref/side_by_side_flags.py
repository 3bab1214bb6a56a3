"""The flags of ``tools/compare_darknet.py`` (:mod:`darknet_ref.side_by_side`), apart from it: they load no torch,
so that ``--help`` answers at once."""
from __future__ import annotations

import argparse
from typing import List, Optional

from yolo.cli.args import ToolParser
from yolo.settings.values import image_side, non_negative_int, number, positive_int

learning_rate = number(float, 0.0, None, "the learning rate")  # as the trainer's [net] learning_rate: 0 or more

DESCRIPTION = """Train the same cfg from the same weights on the same images with Darknet's own CLI and with our trainer,
then evaluate both with tools/eval.py on held-out images that neither saw in training.

Example (yolov3-tiny from its real weights; 96 coco128 images to train on, the other 32 to evaluate)::

    python tools/compare_darknet.py --cfg $YOLO_ASSETS/cfg/yolov3-tiny.cfg \\
        --weights $YOLO_ASSETS/weights/yolov3-tiny.weights --images $YOLO_ASSETS/coco128/images/train2017 \\
        --names configs/coco128.yaml --train 96 --epochs 16 --batch 16 --img-size 416 --lr 0.001

Runs, in order: Darknet (built from ../shared/darknet, or ``--darknet`` to a built CLI), our trainer in its
Darknet-exact settings (no EMA, no prior head bias), and our trainer with our own improvements
(``--improved-hyp``, default EMA and the prior head bias), each for ``--epochs`` passes of ``--batch``-image
updates over the training images at a constant learning rate (Darknet's ``max_batches`` is set to match).

Darknet is built for the CPU, whose training code differs from the CUDA path that Darknet users train with
(and that our Darknet-exact mode follows): it drops gradients at [route] branches, sums [route]/[upsample]
deltas over the whole run, never trains the BatchNorm shifts, and moves BatchNorm statistics by 0.1.
``--darknet-training cuda`` (default) builds it with the source patches of
``tests/darknet_ref.CUDA_TRAINING`` that make the CPU code train as the CUDA code does;
``--darknet-training cpu`` runs the CPU build as it is.

Prints one table (mAP@0.5, mAP@0.5:0.95 on the held-out images, training images/s) and writes it to
``OUT/comparison.json``. Every run is logged to ``OUT/<name>.log``.
"""


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = ToolParser(prog="compare_darknet.py", description=DESCRIPTION,  # run as tools/compare_darknet.py
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cfg", required=True, help="Darknet .cfg to train")
    p.add_argument("--weights", default=None, help="starting .weights (omit to train from scratch)")
    p.add_argument("--images", required=True, help="folder of images with YOLO labels in the matching labels/ folder")
    p.add_argument("--names", required=True, help="class names: a .names file or a dataset YAML with 'names'")
    p.add_argument("--train", type=non_negative_int, default=96,
                   help="the first N images (sorted by name) train; the rest evaluate (0: all train)")
    p.add_argument("--val-images", default=None,
                   help="a separate folder of held-out images (with labels) to evaluate on instead of the rest")
    p.add_argument("--epochs", type=positive_int, default=16, help="passes over the training images, for every run")
    p.add_argument("--batch", type=positive_int, default=16, help="images per update")
    p.add_argument("--subdivisions", type=positive_int, default=2, help="sub-batches per update (memory only)")
    p.add_argument("--img-size", type=image_side, default=416)
    p.add_argument("--lr", type=learning_rate, default=0.001, help="constant learning rate (after --burn-in)")
    p.add_argument("--burn-in", type=non_negative_int, default=0,
                   help="updates of Darknet's burn-in (lr x (i/N)^power, the cfg's power) before it")
    p.add_argument("--improved-hyp", default=None,
                   help="hyperparameter YAML for the 'ours, improved' run (default: EMA and the prior head bias)")
    p.add_argument("--darknet", default=None, help="a built Darknet CLI (default: build ../shared/darknet)")
    p.add_argument("--darknet-training", choices=["cuda", "cpu"], default="cuda",
                   help="build Darknet to train as its CUDA path does (default) or as its CPU code does")
    p.add_argument("--seed", type=int, default=0, help="our runs' seed (Darknet seeds itself from the clock)")
    p.add_argument("--threads", type=positive_int, default=2)
    p.add_argument("--skip", nargs="*", default=[], choices=["darknet", "exact", "improved"], help="runs to skip")
    p.add_argument("--out", default="runs/compare", help="output folder (reused: each run is redone)")
    return p.parse_args(argv)
