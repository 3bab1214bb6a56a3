"""The flags of ``tools/convert_dataset.py`` (:mod:`yolo.cli.convert_dataset`)."""
from __future__ import annotations

from yolo.cli.args import DefaultsHelpFormatter, ToolParser
from yolo.cli.flags.common import add_common_flags, add_setting_flags
from yolo.settings.convert_dataset import ConvertDatasetOptions

DESCRIPTION = ("Write a dataset's train and val splits in another layout: YOLO txt, COCO JSON or Pascal VOC XML. The "
               "splits are read as training reads them; VOC objects marked difficult are left out, as Darknet's "
               "voc_label.py does.")
EXAMPLES = """\
examples:
  # a Pascal VOC dataset (its YAML names ImageSets/Main/train.txt and val.txt) -> YOLO labels
  python tools/convert_dataset.py --data voc2007.yaml --to yolo --output datasets/voc2007-yolo

  # YOLO labels -> COCO JSON (annotations/train.json, annotations/val.json)
  python tools/convert_dataset.py --data configs/shapes.yaml --to coco --output datasets/shapes-coco

  # COCO JSON or YOLO -> VOC XML
  python tools/convert_dataset.py --data my.yaml --to voc --output datasets/my-voc
"""


def build_parser() -> ToolParser:
    p = ToolParser(description=DESCRIPTION, epilog=EXAMPLES, formatter_class=DefaultsHelpFormatter)
    add_setting_flags(p, ConvertDatasetOptions)
    add_common_flags(p, "verbose")
    return p


def parse_args(argv=None):
    return build_parser().parse_args(argv)
