"""tools/eval.py end to end, and its mAP against an independent reference pipeline.

Reference: OpenCV DNN runs the real yolov3-tiny on all of coco128 at 416 (its own Darknet
implementation), its outputs go through the same NMS (yolo.inference.postprocess.postprocess), boxes are mapped back
to the original images here with plain arithmetic, and pycocotools scores them against a COCO
ground truth built here from the label files. Our pipeline (dataset, model, evaluator) must give
the same mAP50 and mAP50_95 within 0.3 points, for stretch and letterbox inputs.

By default the comparison runs on the first 32 coco128 images to keep the suite fast; set
``YOLO_EVAL_FULL=1`` for all 128. Run with ``-s`` to see the figures.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from conftest import asset
from helpers import darknet_letterbox, one_line_error
from training_helpers import write_one_head_training
from yolo.cli import eval as eval_cli
from yolo.models.model import load_model

ROOT = Path(__file__).resolve().parent.parent
SIZE = 416
CONF, IOU = 0.001, 0.6
TOLERANCE = 0.003  # 0.3 points of mAP
PARITY_IMAGES = None if os.environ.get("YOLO_EVAL_FULL") == "1" else 32  # None: all of coco128


def load_tool():
    from yolo.cli import eval as module

    return module


def write_data_yaml(tmp_path, images=None):
    """A dataset YAML over coco128 (all images, or a list file of ``images``)."""
    root = asset("coco128")
    names = [n.strip() for n in asset("cfg/coco.names").read_text().splitlines() if n.strip()]
    val = "images/train2017"
    if images is not None:
        listing = tmp_path / "val.txt"
        listing.write_text("".join(f"{p}\n" for p in images))
        val = str(listing)
    path = tmp_path / "data.yaml"
    path.write_text(json.dumps({"path": str(root), "train": val, "val": val, "names": names}))  # JSON is YAML
    return path


def run_tool(tmp_path, *extra, data=None, save_dir=None):
    tool = load_tool()
    argv = ["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
            "--data", str(data or write_data_yaml(tmp_path)), "--img-size", str(SIZE), "--device", "cpu",
            "--workers", "0", "--batch-size", "16", "--save-dir", str(save_dir or tmp_path / "run"), *extra]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        metrics = tool.main(tool.parse_args(argv))
    return metrics, out.getvalue()


# ----------------------------------------------------------------------------- the reference pipeline
def coco_ground_truth(files):
    """COCO ground truth for coco128, straight from the YOLO label files."""
    images, annotations = [], []
    for path in files:
        h, w = cv2.imread(str(path)).shape[:2]
        images.append({"id": int(path.stem), "height": h, "width": w, "file_name": path.name})
        label_file = path.parent.parent.parent / "labels" / path.parent.name / (path.stem + ".txt")
        rows = np.loadtxt(label_file, ndmin=2).reshape(-1, 5) if label_file.exists() else np.zeros((0, 5))
        for c, cx, cy, bw, bh in rows:
            box = [(cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h]
            annotations.append({"id": len(annotations) + 1, "image_id": int(path.stem), "category_id": int(c) + 1,
                                "bbox": box, "area": box[2] * box[3], "iscrowd": 0})
    return {"info": {}, "images": images, "annotations": annotations,
            "categories": [{"id": i + 1, "name": str(i)} for i in range(80)]}


def parity_files():
    return sorted(asset("coco128/images/train2017").glob("*.jpg"))[:PARITY_IMAGES]


def reference_metrics(mode, tmp_path):
    """OpenCV DNN outputs + yolo.inference.postprocess.postprocess + pycocotools on :func:`parity_files`: (mAP50, mAP50_95)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from reference import opencv_forward
    from yolo.inference.postprocess import PostprocessOptions, postprocess

    files = parity_files()
    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    results = []
    for start in range(0, len(files), 32):
        chunk = files[start:start + 32]
        originals = [cv2.imread(str(f)) for f in chunk]
        if mode == "stretch":
            inputs = [cv2.resize(im, (SIZE, SIZE), interpolation=cv2.INTER_LINEAR) for im in originals]
            places = [(SIZE / im.shape[1], SIZE / im.shape[0], 0, 0) for im in originals]
        else:
            inputs, places = zip(*(darknet_letterbox(im, (SIZE, SIZE)) for im in originals))
        blob = cv2.dnn.blobFromImages(list(inputs), 1 / 255.0, (SIZE, SIZE), swapRB=True, crop=False)
        out = opencv_forward(cfg, weights, blob, tmp_path)  # rows: cx, cy, w, h relative, obj, obj * p
        pred = torch.from_numpy(out.copy())
        obj = pred[..., 4:5]
        pred[..., 5:] = torch.where(obj > 0, pred[..., 5:] / obj.clamp_min(1e-30), torch.zeros_like(pred[..., 5:]))
        pred[..., :4] *= SIZE
        for det, path, im, (sx, sy, px, py) in zip(postprocess(pred, PostprocessOptions(CONF, IOU, multi_label=True,
                                                                          max_det=300)),
                                                  chunk, originals, places):
            h, w = im.shape[:2]
            for (x1, y1, x2, y2), score, label in zip(det["boxes"].tolist(), det["scores"].tolist(),
                                                      det["labels"].tolist()):
                x1, x2 = [min(max((v - px) / sx, 0.0), w) for v in (x1, x2)]
                y1, y2 = [min(max((v - py) / sy, 0.0), h) for v in (y1, y2)]
                results.append({"image_id": int(path.stem), "category_id": label + 1,
                                "bbox": [x1, y1, x2 - x1, y2 - y1], "score": score})
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = coco_ground_truth(files)
        gt.createIndex()
        coco_eval = COCOeval(gt, gt.loadRes(results), "bbox")
        coco_eval.evaluate()
        coco_eval.accumulate()
        coco_eval.summarize()
    return float(coco_eval.stats[1]), float(coco_eval.stats[0])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stretch", "letterbox"])
def test_map_equals_reference_pipeline_on_coco128(mode, tmp_path):
    files = parity_files()
    ref50, ref = reference_metrics(mode, tmp_path)
    # the reference resizes with OpenCV (uint8 cv2.resize): so does ours here
    ours, _ = run_tool(tmp_path, "--resize", mode, "--resample", "opencv", "--no-plots",
                       data=write_data_yaml(tmp_path, files))
    print(f"\n[{mode}] coco128 ({len(files)} images) yolov3-tiny {SIZE}: "
          f"ours mAP50 {ours['mAP50']:.5f} mAP50_95 {ours['mAP50_95']:.5f} | "
          f"reference mAP50 {ref50:.5f} mAP50_95 {ref:.5f} | "
          f"diff {100 * (ours['mAP50'] - ref50):+.4f} / {100 * (ours['mAP50_95'] - ref):+.4f} points")
    assert ours["num_images"] == len(files)
    assert ref50 > 0.2  # the reference itself is sane: real weights detect things
    assert abs(ours["mAP50"] - ref50) < TOLERANCE
    assert abs(ours["mAP50_95"] - ref) < TOLERANCE


# ----------------------------------------------------------------------------- CLI behaviour
@pytest.fixture
def small_data(tmp_path):
    files = sorted(asset("coco128/images/train2017").glob("*.jpg"))[:6]
    return write_data_yaml(tmp_path, files)


@pytest.mark.slow
def test_tool_writes_metrics_results_and_plots(tmp_path, small_data):
    metrics, printed = run_tool(tmp_path, "--resize", "stretch", data=small_data)
    save = Path(metrics["save_dir"])
    saved = json.loads((save / "metrics.json").read_text())
    assert saved["mAP50"] == metrics["mAP50"] and saved["mAP50_95"] == metrics["mAP50_95"]
    assert saved["settings"]["resize"] == "stretch" and saved["num_images"] == 6
    assert all({"AP50", "AP", "P", "R", "images", "instances"} <= set(v) for v in saved["per_class"].values())
    predictions = json.loads((save / "predictions.json").read_text())
    assert predictions and set(predictions[0]) == {"image_id", "category_id", "bbox", "score"}
    assert min(p["score"] for p in predictions) > CONF
    for name in ("pr_curves.png", "pr_curves_per_class.png", "confusion_matrix.png"):
        assert cv2.imread(str(save / name)) is not None
    assert "Average Precision" in printed and "Speed:" in printed and "person" in printed
    assert set(metrics["speed_ms"]) == {"preprocess", "inference", "nms"}


@pytest.mark.slow
def test_tool_never_overwrites_a_run(tmp_path, small_data):
    """--save-dir is exactly that folder: a second run into it is refused (nothing overwritten); under --project
    each run gets a new folder."""
    first, _ = run_tool(tmp_path, "--fast", "--no-plots", data=small_data, save_dir=tmp_path / "exp")
    assert first["save_dir"] == str(tmp_path / "exp")
    with pytest.raises(SystemExit):
        run_tool(tmp_path, "--fast", "--no-plots", data=small_data, save_dir=tmp_path / "exp")
    tool = load_tool()
    argv = ["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
            "--data", str(small_data), "--img-size", str(SIZE), "--device", "cpu", "--workers", "0",
            "--batch-size", "16", "--fast", "--no-plots", "--project", str(tmp_path / "runs")]
    with contextlib.redirect_stdout(io.StringIO()):
        runs = [tool.main(tool.parse_args(argv))["save_dir"] for _ in range(2)]
    assert runs == [str(tmp_path / "runs" / "exp"), str(tmp_path / "runs" / "exp2")]
    assert all((Path(run) / "metrics.json").exists() for run in runs)
    assert first["source"] == "fast"


def test_tool_rejects_a_class_count_mismatch(tmp_path, capsys):
    files = sorted(asset("coco128/images/train2017").glob("*.jpg"))[:2]
    data = write_data_yaml(tmp_path, files)
    config = json.loads(data.read_text())
    data.write_text(json.dumps({**config, "names": [f"c{i}" for i in range(90)]}))
    with pytest.raises(SystemExit):
        run_tool(tmp_path, data=data)
    assert "predicts 80 classes but" in capsys.readouterr().err


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A tiny shapes training folder (data.yaml, tiny.cfg, hyp.yaml), made once for the module."""
    return write_one_head_training(tmp_path_factory.mktemp("shapes"))


# --------------------------------------------------------------------------------------------------- eval
def test_eval_refuses_a_thousand_workers(capsys):
    argv = ["--cfg", "never.cfg", "--weights", "never.weights", "--data", "never.yaml", "--workers", "1000"]
    err = one_line_error(capsys, lambda: eval_cli.parse_args(argv))
    assert err.startswith("error: argument --workers: 1000 is out of range: the number of loading processes must "
                          "be between 0 and 64 (see "), err


def test_eval_uses_at_most_the_cpus_it_may_run_on(monkeypatch, caplog):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    with caplog.at_level(logging.WARNING, logger="yolo.eval"):
        assert eval_cli.usable_workers(2, 16) == 2
        assert not caplog.records
        assert eval_cli.usable_workers(8, 16) == 2
    assert [r.getMessage() for r in caplog.records] == [
        "warning: --workers 8 is more than the 2 CPUs this process may use: using 2"]


# ------------------------------------------------------------------------------------- dataset errors
def test_eval_error_for_label_paths_that_are_folders_is_one_clean_line(tmp_path, capsys):
    folder = write_one_head_training(tmp_path / "run")
    load_model(folder / "tiny.cfg").save_darknet_weights(folder / "tiny.weights")
    labels = sorted((folder / "data" / "labels" / "val").glob("*.txt"))
    assert len(labels) == 2
    for label in labels:  # each image's label path is a folder: no val image is usable
        label.unlink()
        label.mkdir()
    argv = ["--cfg", str(folder / "tiny.cfg"), "--weights", str(folder / "tiny.weights"), "--data",
            str(folder / "data.yaml"), "--device", "cpu", "--project", str(tmp_path / "runs")]
    with pytest.raises(SystemExit) as exit_info:
        eval_cli.main(eval_cli.parse_args(argv))
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    problem = "is a folder where the image's label file belongs; its image is dropped (rename the folder)"
    assert errors == [f"error: {folder / 'data' / 'images' / 'val'}: no usable images (2 listed); problems: "
                      f"{labels[0]}: {problem}; {labels[1]}: {problem}"]


def test_eval_warns_when_the_data_names_differ_from_the_checkpoints(shapes, tmp_path, caplog):
    """The metrics pair the model's class i with the data file's class i: names in another order are said."""
    import yaml
    from training_helpers import write_one_head_model
    _, pt, _ = write_one_head_model(tmp_path)  # names: the shapes' five, in order
    values = yaml.safe_load((shapes / "data.yaml").read_text())
    names = values["names"]
    values["names"] = [names[1], names[0], *names[2:]]
    data = tmp_path / "swapped.yaml"
    data.write_text(yaml.safe_dump(values))
    argv = ["--weights", str(pt), "--data", str(data), "--device", "cpu", "--workers", "0", "--fast", "--no-plots",
            "--project", str(tmp_path / "runs"), "--no-progress"]
    with caplog.at_level(logging.WARNING):
        eval_cli.main(eval_cli.parse_args(argv))
    assert (f"warning: {pt} was trained with other class names than {data} names: the class names reordered (class "
            f"0 was '{names[0]}', now '{names[1]}'; class 1 was '{names[1]}', now '{names[0]}'); each class is scored "
            "by its number, so check that they mean the same classes") in caplog.text, caplog.text


def test_eval_save_dir_is_exactly_that_folder_and_a_non_empty_one_is_refused(shapes, tmp_path, capsys):
    from training_helpers import write_one_head_model
    _, pt, _ = write_one_head_model(tmp_path)
    save = tmp_path / "results"
    argv = ["--weights", str(pt), "--data", str(shapes / "data.yaml"), "--device", "cpu", "--workers", "0", "--fast",
            "--no-plots", "--save-dir", str(save), "--no-progress"]
    assert eval_cli.main(eval_cli.parse_args(argv))["save_dir"] == str(save)
    capsys.readouterr()
    before = (save / "metrics.json").read_bytes()
    err = one_line_error(capsys, lambda: eval_cli.main(eval_cli.parse_args(argv)))
    assert err.startswith(f"error: --save-dir {save}: the folder is not empty; give an empty or new folder"), err
    assert (save / "metrics.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("results")) == ["results"]
