"""The flags of ``tools/convert.py`` (:mod:`yolo.cli.convert`)."""
from __future__ import annotations

from yolo.cli.args import DefaultsHelpFormatter, ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags
from yolo.settings.convert import ConvertOptions

DESCRIPTION = ("Convert weights between Darknet .weights and our .pt checkpoints (the extensions of --weights and "
               "--output decide: .pt or .pth is a checkpoint, anything else Darknet weights).")
EXAMPLES = """\
examples:
  # Darknet -> PyTorch (state_dict + cfg text + metadata; loads with torch.load(weights_only=True))
  python tools/convert.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --output yolov3-tiny.pt

  # PyTorch -> Darknet (a .pt carries its cfg; --cfg overrides it)
  python tools/convert.py --weights runs/train/exp/best.pt --output best.weights

  # only the first 15 layers, as Darknet's partial command writes them (a backbone for transfer learning,
  # like darknet53.conv.74)
  python tools/convert.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights \\
      --output tiny.conv.15 --cutoff 15
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, ConvertOptions)
    add_common_flags(p, "verbose")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)
