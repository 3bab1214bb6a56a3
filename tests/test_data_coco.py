"""COCO JSON datasets: boxes, category mapping, ids and reported problems, on a tiny JSON."""
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from yolo.data import CocoDataset, build_dataset, load_data_config
from yolo.errors import DataError
from yolo.ops.boxes import cxcywh_to_xyxy

CATEGORIES = [{"id": 7, "name": "dog"}, {"id": 3, "name": "cat"}, {"id": 12, "name": "bird"}]


def _tiny_coco(root: Path) -> Path:
    images = root / "images"
    images.mkdir(parents=True)
    cv2.imwrite(str(images / "a.jpg"), np.full((100, 200, 3), 90, np.uint8))
    cv2.imwrite(str(images / "b.png"), np.full((80, 60, 3), 30, np.uint8))
    cv2.imwrite(str(images / "empty.jpg"), np.full((50, 50, 3), 10, np.uint8))
    (images / "corrupt.jpg").write_bytes(b"\x00" * 64)
    data = {
        "images": [
            {"id": 10, "file_name": "a.jpg", "height": 100, "width": 200},
            {"id": 4, "file_name": "b.png", "height": 80, "width": 60},
            {"id": 30, "file_name": "empty.jpg", "height": 50, "width": 50},
            {"id": 31, "file_name": "corrupt.jpg", "height": 50, "width": 50},
            {"id": 32, "file_name": "missing.jpg", "height": 50, "width": 50},
        ],
        "annotations": [
            {"id": 1, "image_id": 10, "category_id": 7, "bbox": [10, 20, 30, 40], "area": 1200, "iscrowd": 0},
            {"id": 2, "image_id": 10, "category_id": 12, "bbox": [150.5, 0, 49.5, 99], "area": 1, "iscrowd": 0},
            {"id": 3, "image_id": 10, "category_id": 99, "bbox": [1, 1, 5, 5], "area": 25, "iscrowd": 0},
            {"id": 4, "image_id": 10, "category_id": 3, "bbox": [1, 1, 0, 5], "area": 0, "iscrowd": 0},
            {"id": 5, "image_id": 10, "category_id": 3, "bbox": [0, 0, 200, 100], "area": 1, "iscrowd": 1},
            {"id": 6, "image_id": 4, "category_id": 3, "bbox": [5, 5, 20, 30], "area": 600, "iscrowd": 0},
            {"id": 7, "image_id": 4, "category_id": 3, "bbox": [0.1, 0.1, 0.3, 0.2], "area": 1, "iscrowd": 0},
            {"id": 8, "image_id": 4, "category_id": 7, "bbox": [50, 60, 40, 40], "area": 1, "iscrowd": 0},
        ],
        "categories": CATEGORIES,
    }
    path = root / "annotations.json"
    path.write_text(json.dumps(data))
    return path


def test_coco_json_boxes_labels_and_problems(tmp_path):
    ann = _tiny_coco(tmp_path)
    ds = CocoDataset(ann, tmp_path / "images", img_size=128)
    # Labels follow increasing category id: cat(3)=0, dog(7)=1, bird(12)=2.
    assert ds.names == ["cat", "dog", "bird"] and ds.category_ids == [3, 7, 12]
    gt = {g["image_id"]: g for g in ds.ground_truth()}
    assert sorted(gt) == [4, 10, 30]
    # xywh -> xyxy by hand from the JSON above.
    np.testing.assert_allclose(gt[10]["boxes"].numpy(), [[10, 20, 40, 60], [150.5, 0, 200, 99]])
    assert gt[10]["labels"].tolist() == [1, 2]
    np.testing.assert_allclose(gt[4]["boxes"].numpy(), [[5, 5, 25, 35]])
    assert gt[4]["labels"].tolist() == [0]
    assert (gt[4]["height"], gt[4]["width"]) == (80, 60) and gt[30]["boxes"].shape == (0, 4)

    reasons = [str(p) for p in ds.report.problems]
    assert any("corrupt.jpg" in r for r in reasons) and any("missing.jpg" in r for r in reasons)
    assert any("annotation id 3" in r and "unknown category_id 99" in r for r in reasons)
    assert any("annotation id 4" in r and "zero or negative size" in r for r in reasons)
    assert any("annotation id 7" in r and "normalized" in r for r in reasons)
    assert any("annotation id 8" in r and "outside" in r for r in reasons)
    assert not any("annotation id 5" in r for r in reasons)  # crowd: skipped, not an error
    assert ds.report.num_dropped_images == 2 and ds.report.num_dropped_boxes == 4

    image, targets, info = ds[0]  # image id 4 comes first (sorted ids)
    assert info["image_id"] == 4 and image.shape == (3, 128, 128)
    back = info["letterbox"].to_original(cxcywh_to_xyxy(targets[:, 2:]), info["orig_shape"])
    np.testing.assert_allclose(back.numpy(), gt[4]["boxes"].numpy(), atol=1e-3)


def test_coco_class_count_mismatch_and_bad_file(tmp_path):
    ann = _tiny_coco(tmp_path)
    with pytest.raises(DataError, match="class count mismatch"):
        CocoDataset(ann, tmp_path / "images", names=["a", "b"])
    bad = tmp_path / "bad.json"
    bad.write_text("{\"images\": 3}")
    with pytest.raises(DataError, match="bad.json"):
        CocoDataset(bad, tmp_path / "images")


def test_coco_split_from_yaml_takes_names_from_categories(tmp_path):
    _tiny_coco(tmp_path)
    yaml_path = tmp_path / "coco.yaml"
    yaml_path.write_text("path: .\ntrain: annotations.json\nval: annotations.json\ntrain_images: images\n"
                         "val_images: images\n")
    cfg = load_data_config(yaml_path)
    assert cfg.names == ["cat", "dog", "bird"]
    ds = build_dataset(cfg, "val", img_size=64)
    assert isinstance(ds, CocoDataset) and len(ds) == 3 and not ds.augment
