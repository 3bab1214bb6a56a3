"""Datasets (YOLO txt layout, COCO JSON, Pascal VOC XML), validation, augmentation, batching, synthetic shapes.

Typical use::

    from yolo.data import load_data_config, build_dataset, create_dataloader

    cfg = load_data_config("configs/shapes.yaml")          # generates the shapes data on first use
    train = build_dataset(cfg, "train", img_size=416, hyp={"mosaic": 0.5}, seed=0)
    loader = create_dataloader(train, batch_size=16, shuffle=True, seed=0)
    for images, targets, infos in loader:                  # Float[B,3,H,W], Float[M,6], list[dict]
        ...
"""
from yolo.data.collate import MultiScale, collate_fn, resize_batch
from yolo.data.config import DataConfig, expand_env, load_data_config
from yolo.errors import DataError
from yolo.data.coco_dataset import CocoDataset
from yolo.data.dataset import DetectionDataset, YoloDataset
from yolo.data.image_record import ImageRecord, read_image
from yolo.data.yolo_layout import label_path_for, scan_yolo
from yolo.data.splits import build_dataset, dataset_inputs
from yolo.data.voc import VocDataset
from yolo.data.loader import EpochLoader, EpochShuffleSampler, create_dataloader, set_epoch
from yolo.data.shapes import SHAPE_NAMES, ensure_shapes_dataset
from yolo.data.augment_hyp import DEFAULT_AUGMENT, augment_config, augment_from_cfg
from yolo.data.validation import Problem, ValidationReport

__all__ = [
    "DataConfig", "DataError", "load_data_config", "expand_env",
    "DetectionDataset", "YoloDataset", "CocoDataset", "VocDataset", "ImageRecord", "build_dataset", "dataset_inputs",
    "scan_yolo",
    "label_path_for", "read_image",
    "collate_fn", "resize_batch", "MultiScale", "create_dataloader", "set_epoch", "EpochShuffleSampler",
    "EpochLoader",
    "DEFAULT_AUGMENT", "augment_config", "augment_from_cfg", "ensure_shapes_dataset", "SHAPE_NAMES",
    "Problem", "ValidationReport",
]
