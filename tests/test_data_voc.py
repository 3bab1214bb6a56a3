"""Pascal VOC datasets (yolo/data/voc.py) and converting datasets between YOLO txt, COCO JSON and VOC XML
(yolo/data/dataset_writers.py, tools/convert_dataset.py).

The expected labels come from the test's own reading of the XML with Darknet's ``scripts/voc_label.py``
conversion (centre ``(xmin + xmax) / 2 - 1``, width ``xmax - xmin``, difficult objects and unknown classes
skipped); the COCO files are read back by pycocotools."""
import contextlib
import io
import json
import xml.etree.ElementTree as ET

import cv2
import numpy as np
import pytest
import yaml
from pycocotools.coco import COCO

from training_helpers import FAST, write_cfg
from yolo.cli import convert_dataset as convert_cli
from yolo.cli import eval as eval_cli
from yolo.data import build_dataset, load_data_config
from yolo.errors import DataError

NAMES = ["dog", "cat", "horse"]
# image id -> (width, height, [(name, difficult, xmin, ymin, xmax, ymax)]); None: no XML (a background image)
VOC = {
    "2007_000001": (64, 48, [("dog", 0, 10, 8, 40, 30), ("cat", 1, 5, 5, 20, 20), ("horse", 0, 30, 20, 61, 45)]),
    "2007_000002": (80, 60, [("cat", 0, 2, 3, 50, 40), ("zebra", 0, 1, 1, 9, 9), ("dog", 0, 41, 11, 79, 59)]),
    "2007_000003": (64, 48, []),
    "2007_000004": (72, 56, None),
}


def write_voc(root):
    """The VOC layout of :data:`VOC` under ``root`` (``train``: all four ids, ``val``: the first two) and its
    dataset YAML; returns the YAML's path."""
    for folder in ("JPEGImages", "Annotations", "ImageSets/Main"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for n, (image_id, (width, height, objects)) in enumerate(VOC.items()):
        image = np.full((height, width, 3), 60 + 40 * n, np.uint8)
        cv2.imwrite(str(root / "JPEGImages" / f"{image_id}.jpg"), image)
        if objects is None:
            continue
        xml = [f"<annotation><filename>{image_id}.jpg</filename><size><width>{width}</width><height>{height}"
               "</height><depth>3</depth></size>"]
        for name, difficult, *box in objects:
            xml.append(f"<object><name>{name}</name><pose>Unspecified</pose><difficult>{difficult}</difficult>"
                       "<bndbox>" + "".join(f"<{t}>{v}</{t}>" for t, v in zip(("xmin", "ymin", "xmax", "ymax"), box))
                       + "</bndbox></object>")
        (root / "Annotations" / f"{image_id}.xml").write_text("".join(xml) + "</annotation>\n")
    (root / "ImageSets" / "Main" / "train.txt").write_text("".join(f"{i}\n" for i in VOC))
    (root / "ImageSets" / "Main" / "val.txt").write_text("".join(f"{i}\n" for i in list(VOC)[:2]))
    data = root.parent / "voc.yaml"
    data.write_text(yaml.safe_dump({"path": str(root), "train": "ImageSets/Main/train.txt",
                                    "val": "ImageSets/Main/val.txt", "names": NAMES}))
    return data


def voc_label_rows(xml_path):
    """YOLO rows ``(class, cx, cy, w, h)`` of a VOC XML as Darknet's voc_label.py writes them."""
    root = ET.parse(xml_path).getroot()
    width, height = float(root.find("size/width").text), float(root.find("size/height").text)
    rows = []
    for obj in root.iter("object"):
        name, difficult = obj.find("name").text, obj.find("difficult").text
        if name not in NAMES or int(difficult) == 1:
            continue
        b = [float(obj.find(f"bndbox/{t}").text) for t in ("xmin", "xmax", "ymin", "ymax")]
        rows.append((NAMES.index(name), ((b[0] + b[1]) / 2 - 1) / width, ((b[2] + b[3]) / 2 - 1) / height,
                     (b[1] - b[0]) / width, (b[3] - b[2]) / height))
    return rows


def xml_boxes(xml_path):
    """``[(name, xmin, ymin, xmax, ymax)]`` of the non-difficult objects of known classes of a VOC XML."""
    root = ET.parse(xml_path).getroot()
    return [(o.find("name").text, *(float(o.find(f"bndbox/{t}").text) for t in ("xmin", "ymin", "xmax", "ymax")))
            for o in root.iter("object") if o.find("name").text in NAMES and o.find("difficult").text == "0"]


def convert(data, fmt, out):
    return convert_cli.main(convert_cli.parse_args(["--data", str(data), "--to", fmt, "--output", str(out)]))


@pytest.fixture
def voc(tmp_path):
    return write_voc(tmp_path / "VOCdevkit" / "VOC2007")


def test_a_voc_yaml_reads_as_voc_label_py_converts(voc, caplog):
    config = load_data_config(voc)
    dataset = build_dataset(config, "train", img_size=64, augment=False)
    assert [r.path.rsplit("/", 1)[-1] for r in dataset.records] == [f"{i}.jpg" for i in VOC]
    root = voc.parent / "VOC2007"
    for record, image_id in zip(dataset.records, VOC):
        xml = root / "Annotations" / f"{image_id}.xml"
        expected = voc_label_rows(xml) if xml.is_file() else []
        b = record.boxes.astype(np.float64)
        ours = [(int(c), (x1 + x2) / 2 / record.width, (y1 + y2) / 2 / record.height, (x2 - x1) / record.width,
                 (y2 - y1) / record.height) for c, (x1, y1, x2, y2) in zip(record.labels, b)]
        assert len(ours) == len(expected)
        for a, e in zip(ours, expected):
            assert a[0] == e[0] and np.allclose(a[1:], e[1:], atol=1e-6), (image_id, a, e)
    assert "'zebra' is not in the dataset's names" in caplog.text  # reported, not silently dropped
    assert len(build_dataset(config, "val", img_size=64, augment=False)) == 2


def test_malformed_voc_xml_is_one_error_naming_the_file_and_line(voc):
    xml = voc.parent / "VOC2007" / "Annotations" / "2007_000002.xml"
    xml.write_text("<annotation>\n<object><name>cat</name>\n</annotation>\n")
    with pytest.raises(DataError, match=r"2007_000002\.xml:3: not valid XML"):
        build_dataset(load_data_config(voc), "train", img_size=64, augment=False)


def test_voc_to_yolo_and_coco_and_back_within_a_pixel(voc, tmp_path):
    root = voc.parent / "VOC2007"
    yolo_yaml = convert(voc, "yolo", tmp_path / "yolo")
    coco_yaml = convert(voc, "coco", tmp_path / "coco")
    for image_id, (width, height, objects) in VOC.items():
        xml = root / "Annotations" / f"{image_id}.xml"
        expected = voc_label_rows(xml) if objects is not None else []
        rows = [tuple(float(v) for v in line.split()) for line in
                (tmp_path / "yolo" / "labels" / "train" / f"{image_id}.txt").read_text().splitlines()]
        assert len(rows) == len(expected)
        for a, e in zip(rows, expected):
            scale = np.array([width, height] * 2)  # to pixels: 6 decimals of a normalized value are far below one
            assert a[0] == e[0] and np.allclose(np.array(a[1:]) * scale, np.array(e[1:]) * scale, atol=0.01), \
                (image_id, a, e)
    # COCO: read back by pycocotools; bbox [x, y, w, h] = [xmin - 1, ymin - 1, xmax - xmin, ymax - ymin]
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(tmp_path / "coco" / "annotations" / "train.json"))
    assert [c["name"] for c in coco.loadCats(coco.getCatIds())] == NAMES
    for image in coco.loadImgs(coco.getImgIds()):
        image_id = image["file_name"].rsplit(".", 1)[0]
        objects = xml_boxes(root / "Annotations" / f"{image_id}.xml") if VOC[image_id][2] is not None else []
        annotations = coco.loadAnns(coco.getAnnIds(imgIds=image["id"]))
        assert [coco.loadCats(a["category_id"])[0]["name"] for a in annotations] == [o[0] for o in objects]
        for a, (_, x1, y1, x2, y2) in zip(annotations, objects):
            assert np.allclose(a["bbox"], [x1 - 1, y1 - 1, x2 - x1, y2 - y1], atol=0.01)
    # back to VOC from both: every box where the original XML had it, within a pixel; difficult ones gone
    for source, name in ((yolo_yaml, "from-yolo"), (coco_yaml, "from-coco")):
        assert load_data_config(source).names == NAMES
        convert(source, "voc", tmp_path / name)
        for image_id, (_, _, objects) in VOC.items():
            original = xml_boxes(root / "Annotations" / f"{image_id}.xml") if objects is not None else []
            again = xml_boxes(tmp_path / name / "Annotations" / f"{image_id}.xml")
            assert [o[0] for o in again] == [o[0] for o in original], (name, image_id)
            assert np.abs(np.array([o[1:] for o in again]) - np.array([o[1:] for o in original])).max(initial=0) <= 1
        split = (tmp_path / name / "ImageSets" / "Main" / "val.txt").read_text().split()
        assert split == list(VOC)[:2]


def test_yolo_to_voc_and_back_keeps_the_boxes_within_a_pixel(tmp_path):
    """A YOLO dataset (generated shapes, boxes at sub-pixel positions) -> VOC XML (whole pixels) -> YOLO again."""
    from yolo.data import SHAPE_NAMES, ensure_shapes_dataset

    root = ensure_shapes_dataset(tmp_path / "shapes", num_train=3, num_val=1, seed=4, size_range=(64, 96))
    data = tmp_path / "shapes.yaml"
    data.write_text(yaml.safe_dump({"path": str(root), "train": "images/train", "val": "images/val",
                                    "names": list(SHAPE_NAMES)}))
    convert(data, "voc", tmp_path / "voc")
    convert(tmp_path / "voc" / "data.yaml", "yolo", tmp_path / "yolo")
    originals = sorted((root / "labels" / "train").glob("*.txt"))
    assert len(originals) == 3
    for original in originals:
        (image_path,) = (root / "images" / "train").glob(f"{original.stem}.*")
        height, width = cv2.imread(str(image_path)).shape[:2]
        scale = np.array([width, height, width, height])
        before = np.loadtxt(original, ndmin=2)
        after = np.loadtxt(tmp_path / "yolo" / "labels" / "train" / original.name, ndmin=2)
        assert (before[:, 0] == after[:, 0]).all()
        assert np.abs((before[:, 1:] - after[:, 1:]) * scale).max() <= 1.0, original.name
        xml = ET.parse(tmp_path / "voc" / "Annotations" / f"{original.stem}.xml").getroot()
        assert (int(xml.find("size/width").text), int(xml.find("size/height").text)) == (width, height)


def test_the_output_folder_must_be_new_or_empty(voc, tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep me\n")
    with pytest.raises(SystemExit):
        convert(voc, "yolo", tmp_path / "taken")
    assert "exists and is not empty" in capsys.readouterr().err
    assert (tmp_path / "taken" / "mine.txt").read_text() == "keep me\n"


@pytest.mark.slow
def test_a_voc_yaml_trains_and_evaluates(voc, tmp_path, monkeypatch):
    from yolo.engine import TrainOptions, Trainer

    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    options = TrainOptions(cfg=str(write_cfg(tmp_path)), data=str(voc), device="cpu", project=str(tmp_path),
                           name="voc", progress=False, img_size=64, epochs=1, adapt_classes=True,
                           hyp={**FAST, "batch": 2, "subdivisions": 1, "max_steps_per_epoch": 1, "burn_in": 0})
    result = Trainer.from_options(options).fit()
    assert result.status == "finished" and result.global_step == 1
    metrics = eval_cli.main(eval_cli.parse_args(["--weights", str(result.run_dir / "last.pt"), "--data", str(voc),
                                                 "--device", "cpu", "--workers", "0", "--no-plots",
                                                 "--save-dir", str(tmp_path / "eval")]))
    assert metrics["num_images"] == 2 and 0 <= metrics["mAP50"] <= 1
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert saved["mAP50"] == metrics["mAP50"]
