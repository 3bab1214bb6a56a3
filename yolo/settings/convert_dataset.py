"""What ``tools/convert_dataset.py`` takes: :class:`ConvertDatasetOptions`, each setting declared once with its flag
and help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

from dataclasses import dataclass

from yolo.settings.declare import setting

DATASET_FORMATS = ("yolo", "coco", "voc")  # the keys of yolo.data.dataset_writers.FORMATS


@dataclass
class ConvertDatasetOptions:
    """A dataset's splits written in another layout (:mod:`yolo.data.dataset_writers`)."""

    data: str = setting(None, "--data", required=True,
                        help="the dataset: a dataset YAML (YOLO folders or lists, COCO JSON, Pascal VOC "
                             "ImageSets/Main splits) or a Darknet .data file")
    to: str = setting(None, "--to", required=True, choices=list(DATASET_FORMATS),
                      help="the layout to write: yolo (labels/*.txt), coco (annotations/*.json) or voc "
                           "(Annotations/*.xml, ImageSets/Main/*.txt, JPEGImages/)")
    output: str = setting(None, "--output", required=True,
                          help="a new (or empty) folder: the images copied, their labels and a data.yaml")


__all__ = ["ConvertDatasetOptions", "DATASET_FORMATS"]
