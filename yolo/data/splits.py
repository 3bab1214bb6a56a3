"""A dataset config's splits as datasets: :func:`build_dataset` picks the reader of each split's layout (a COCO
JSON, a Pascal VOC ``ImageSets/Main`` split, else a YOLO folder or list), and :func:`dataset_inputs` lists every
file a run reads from one."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional

from yolo.data.config import DataConfig, is_coco_json
from yolo.data.darknet_data import is_darknet_data
from yolo.data.coco_dataset import CocoDataset
from yolo.data.dataset import DetectionDataset, YoloDataset
from yolo.data.yolo_layout import _cache_file, find_label_file
from yolo.data.voc import VocDataset, is_voc_split
from yolo.ops.sizes import SizeLike


def dataset_inputs(config: DataConfig, dataset: DetectionDataset) -> Dict[str, Path]:
    """Every file a run reads for ``dataset`` (a split of ``config``), keyed by what it is, for
    :func:`yolo.files.overwrite.refuse_overwriting_inputs`: the config and its ``.names`` file, the split's list
    file (or COCO JSON) and label cache, and each image with its label file."""
    inputs: Dict[str, Path] = {}
    if config.source is not None:
        inputs["the dataset config"] = Path(config.source)
    if config.names_file is not None:
        inputs["the names file"] = config.names_file
    source = Path(dataset.source)
    if source.is_file():
        inputs["the split's list"] = source
    if not is_coco_json(source):
        inputs["the label cache"] = _cache_file(Path(os.path.abspath(source)))
    voc = isinstance(dataset, VocDataset)  # its labels: Annotations/ID.xml, no label cache
    if voc:
        inputs.pop("the label cache", None)
    for record in dataset.records:
        inputs[f"the image {record.path}"] = Path(record.path)
        if voc:
            label = dataset.annotation_file(record)
        else:
            label = find_label_file(Path(record.path)) if not is_coco_json(source) else None
        if label is not None:
            inputs[f"the label file of {record.path}"] = label
    return inputs



def build_dataset(config: DataConfig, split: str = "train", img_size: SizeLike = 416,
                  augment: Optional[bool] = None, hyp: Optional[Dict[str, Any]] = None, seed: int = 0,
                  cache: bool = True) -> DetectionDataset:
    """The dataset of ``split`` (``"train"``/``"val"``) of a :class:`DataConfig`.

    ``augment`` defaults to True for train and False for val.
    """
    path = config.split(split)
    if augment is None:
        augment = split == "train"
    if is_coco_json(path):
        return CocoDataset(path, config.images_dir(split) or config.root, config.names, img_size, augment, hyp, seed)
    if is_voc_split(path):
        return VocDataset(path, config.names, img_size, augment, hyp, seed)
    search_dirs = [config.root]
    if config.source is not None and is_darknet_data(config.source):  # its own paths are read from there too
        search_dirs += [config.source.parent, config.source.parent.parent]
    return YoloDataset(path, config.names, img_size, augment, hyp, seed, cache=cache, search_dirs=search_dirs)

__all__ = ["build_dataset", "dataset_inputs"]
