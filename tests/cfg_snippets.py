"""Small cfg pieces the tests build networks from, and the small whole networks several test modules train or
run, so the same layers are written once.

Each piece is Darknet cfg text ending with a newline; join sections with a blank line, as the cfg files do.
"""
from __future__ import annotations


def net_section(width: int, height: int, channels: int = 3) -> str:
    """``[net]`` with the input size only (Darknet's defaults for everything else)."""
    return f"[net]\nwidth={width}\nheight={height}\nchannels={channels}\n"


# A stride-2 3x3 convolution to 8 channels with batch norm and leaky ReLU.
CONV8 = "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=2\npad=1\nactivation=leaky\n"

# CONV8, then a 2x2 max-pool: stride 4.
CONV8_MAXPOOL = CONV8 + "\n[maxpool]\nsize=2\nstride=2\n"

# CONV8_MAXPOOL, then a stride-2 3x3 convolution to 16 channels: a stride-8 backbone of a few thousand weights.
SMALL_BACKBONE = CONV8_MAXPOOL + \
    "\n[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=2\npad=1\nactivation=leaky\n"

# A small two-head YOLOv3-style training cfg: same layer types as yolov3-tiny, a few thousand weights, 5 classes,
# 96 px. A template: ``TWO_HEAD_CFG.format(bn=1)`` sets batch_normalize of its convolutions.
TWO_HEAD_CFG = """
[net]
batch=8
subdivisions=2
width=96
height=96
channels=3
momentum=0.9
decay=0.0005
learning_rate=0.01
burn_in=4
policy=steps
steps=4
scales=.1
saturation=1.3
exposure=1.3
hue=.05

[convolutional]
batch_normalize={bn}
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
batch_normalize={bn}
filters=16
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize={bn}
filters=24
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize={bn}
filters=32
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize={bn}
filters=48
size=3
stride=1
pad=1
activation=leaky

[convolutional]
size=1
stride=1
pad=1
filters=30
activation=linear

[yolo]
mask=3,4,5
anchors=12,12, 18,18, 24,24, 30,30, 38,38, 48,48
classes=5
num=6
ignore_thresh=.7
truth_thresh=1
jitter=.1
random=0

[route]
layers=-3

[convolutional]
batch_normalize={bn}
filters=16
size=1
stride=1
pad=1
activation=leaky

[upsample]
stride=2

[route]
layers=-1,5

[convolutional]
size=1
stride=1
pad=1
filters=30
activation=linear

[yolo]
mask=0,1,2
anchors=12,12, 18,18, 24,24, 30,30, 38,38, 48,48
classes=5
num=6
ignore_thresh=.7
truth_thresh=1
jitter=.1
random=0
"""

# A training cfg with one head on a stride-8 grid: a few hundred weights, 5 classes, 64 px, a constant rate.
# tests/test_cfg.py names its line 10 in an expected message: keep its lines as they are.
ONE_HEAD_CFG = """
[net]
batch=4
subdivisions=1
width=64
height=64
channels=3
learning_rate=0.001
policy=constant

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
size=1
stride=1
pad=1
filters=30
activation=linear

[yolo]
mask=0,1,2
anchors=10,10, 20,20, 40,40
classes=5
num=3
jitter=0
random=0
"""

# The smallest network Darknet will build: the rate does not depend on it.
RATE_CFG = "[net]\nwidth=8\nheight=8\nchannels=3\nbatch=1\nsubdivisions=1\n\n[convolutional]\nfilters=1\nsize=1\n"

# ONE_HEAD_CFG with a [Gaussian_yolo] head: 3 anchors x (5 classes + 4 box + 4 uncertainties + objectness).
GAUSSIAN_CFG = ONE_HEAD_CFG.replace("filters=30", "filters=42").replace("[yolo]", "[Gaussian_yolo]")
