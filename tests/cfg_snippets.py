"""Small cfg pieces the tests build networks from, so the same layers are written once.

Each piece is Darknet cfg text ending with a newline; join sections with a blank line, as the cfg files do.
"""
from __future__ import annotations


def net_section(width: int, height: int, channels: int = 3) -> str:
    """``[net]`` with the input size only (Darknet's defaults for everything else)."""
    return f"[net]\nwidth={width}\nheight={height}\nchannels={channels}\n"


# A stride-2 3x3 convolution to 8 channels with batch norm and leaky ReLU, then a 2x2 max-pool: stride 4.
CONV8_MAXPOOL = ("[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\nstride=2\npad=1\nactivation=leaky\n\n"
                 "[maxpool]\nsize=2\nstride=2\n")

# CONV8_MAXPOOL, then a stride-2 3x3 convolution to 16 channels: a stride-8 backbone of a few thousand weights.
SMALL_BACKBONE = CONV8_MAXPOOL + \
    "\n[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=2\npad=1\nactivation=leaky\n"
