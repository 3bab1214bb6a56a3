"""Hostile input to the detect, eval, export, anchors, benchmark, compare_darknet, demo and gpu_report tools and to
[yolo] cfg options: each bad value is one `error:` line naming the flag or the file, before any work is done or
anything is printed; never a traceback, never silent garbage."""
from __future__ import annotations

import json
import logging
import os
import re

import cv2
import numpy as np
import pytest
import torch

from cfg_snippets import ONE_HEAD_CFG, RATE_CFG
from conftest import asset
from darknet_ref import side_by_side
from gpu_lab import cli as gpu_report_cli  # tools/gpu_lab (tests/conftest.py puts tools/ on sys.path)
from helpers import fifo_with_a_late_writer, one_line_error, run_export_cli, run_tool
from training_helpers import write_one_head_training
from yolo.cli import anchors as anchors_cli
from yolo.cli import benchmark as benchmark_cli
from yolo.cli import demo as demo_cli
from yolo.cli import detect as detect_cli
from yolo.cli import eval as eval_cli
from yolo.errors import CfgError, DataError
from yolo.export.names import export_names
from yolo.files.names import read_names
from yolo.models.model import load_model


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A tiny shapes training folder (data.yaml, tiny.cfg, hyp.yaml), made once for the module."""
    return write_one_head_training(tmp_path_factory.mktemp("shapes"))


# ------------------------------------------------------------------------------------------------ anchors
@pytest.mark.parametrize("flags, expected", [
    (["--seed", "-1"], "error: argument --seed: -1 is out of range: a seed must be between 0 and 4294967295"),
    (["--seed", "4294967296"],
     "error: argument --seed: 4294967296 is out of range: a seed must be between 0 and 4294967295"),
    (["-n", "0"], "error: argument -n/--num-of-clusters: 0 is out of range: the anchor count must be between 1 "
                  "and 10000"),
    (["-n", "-3"], "error: argument -n/--num-of-clusters: -3 is out of range: the anchor count must be between 1 "
                   "and 10000"),
])
def test_anchors_refuses_bad_seed_and_count(shapes, capsys, flags, expected):
    argv = ["--data", str(shapes / "data.yaml"), *flags]
    err = one_line_error(capsys, lambda: anchors_cli.main(anchors_cli.parse_args(argv)))
    assert err.startswith(f"{expected} (see "), err


def test_anchors_largest_seed_is_accepted(shapes, capsys):
    result = anchors_cli.main(anchors_cli.parse_args(["--data", str(shapes / "data.yaml"), "-n", "2",
                                                      "--img-size", "64", "--seed", "4294967295"]))
    assert len(result.anchors) == 2
    assert "anchors = " in capsys.readouterr().out


def test_anchors_region_cfg_fails_before_printing(shapes, tmp_path, capsys):
    out = tmp_path / "new.cfg"
    argv = ["--data", str(shapes / "data.yaml"), "--cfg", str(asset("cfg/yolov2-tiny.cfg")), "-n", "5",
            "--write", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        anchors_cli.main(anchors_cli.parse_args(argv))
    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    assert captured.out == ""  # no anchors printed for a run that fails
    assert captured.err.strip().splitlines()[-1] == (
        f"error: {asset('cfg/yolov2-tiny.cfg')}: [region] anchors are in grid cells: paste them by hand (compute "
        "them with --img-size set to the input size / 32, e.g. --img-size 13 for 416x416)")
    assert not out.exists()


# ------------------------------------------------------------------------------------------------- export
def test_export_refuses_an_opset_torch_cannot_write_before_reading_the_model(tmp_path, capsys):
    out = tmp_path / "tiny.onnx"
    argv = ["--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", tmp_path / "never-read.weights", "--format", "onnx",
            "--opset", "999", "--output", out, "--no-verify"]
    (tmp_path / "never-read.weights").write_bytes(b"")  # an empty file: reading it would be a different error
    err = one_line_error(capsys, lambda: run_export_cli(argv))
    assert re.fullmatch(rf"error: --opset 999 is out of range: this torch \({re.escape(torch.__version__)}\) "
                        r"exports ONNX opsets 17 to 2\d", err), err
    assert not out.exists()


# ------------------------------------------------------------------------------------------------- detect
def detect_flags(*extra: str):
    """``tools/detect.py``'s flags with a cfg, weights and source that are never read (parsing fails first)."""
    return detect_cli.parse_args(["--cfg", "never.cfg", "--weights", "never.weights", "--source", "never.jpg",
                                  *extra])


@pytest.mark.parametrize("value, expected", [
    ("nan", "error: argument --beta-nms: 'nan' is not a finite number"),
    ("inf", "error: argument --beta-nms: 'inf' is not a finite number"),
    ("-5", "error: argument --beta-nms: -5 is out of range: the DIoU-NMS exponent must be above 0 and at most "
           "3.40282e+38"),
    ("0", "error: argument --beta-nms: 0 is out of range: the DIoU-NMS exponent must be above 0 and at most "
          "3.40282e+38"),
    ("1e308", "error: argument --beta-nms: 1e308 is out of range: the DIoU-NMS exponent must be at most "
              "3.40282e+38"),
])
def test_detect_refuses_a_beta_nms_darknet_cannot_use(capsys, value, expected):
    err = one_line_error(capsys, lambda: detect_flags("--beta-nms", value))
    assert err.startswith(f"{expected} (see "), err


def test_detect_takes_a_positive_beta_nms():
    assert detect_flags("--beta-nms", "0.6").beta_nms == 0.6


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


# ---------------------------------------------------------------------------------------------- names files
def tiny_detect(tmp_path, *extra: str):
    """``tools/detect.py`` on yolov3-tiny at 96x96 on the CPU, writing into ``tmp_path/out``."""
    return detect_cli.main(detect_cli.parse_args([
        "--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
        "--output", str(tmp_path / "out"), "--device", "cpu", "--img-size", "96", *extra]))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_a_names_file_that_is_not_utf8_is_named(tmp_path, encoding):
    path = tmp_path / "classes.names"
    path.write_text("cat\ndog\n", encoding=encoding)
    with pytest.raises(DataError) as error:
        read_names(path)
    assert str(error.value) == (f"{path}: names file is not UTF-8 text (byte 0xff at offset 0): save it as UTF-8, "
                                "one name a line")


def test_detect_names_the_names_file_that_is_binary(tmp_path, capsys):
    path = tmp_path / "binary.names"
    path.write_bytes(b"cat\n\x80\x81dog\n")
    err = one_line_error(capsys, lambda: tiny_detect(tmp_path, "--source", str(asset("images/dog.jpg")),
                                                     "--names", str(path)))
    assert err == (f"error: {path}: names file is not UTF-8 text (byte 0x80 at offset 4): save it as UTF-8, one "
                   "name a line")


def test_detect_names_the_names_file_whose_count_is_wrong(tmp_path, capsys):
    path = tmp_path / "two_lines.txt"
    path.write_text("cat\ndog\n")
    err = one_line_error(capsys, lambda: tiny_detect(tmp_path, "--source", str(asset("images/dog.jpg")),
                                                     "--names", str(path)))
    assert err == f"error: {path}: 2 class names given but the model has 80 classes"


def test_export_names_the_names_file_whose_count_is_wrong(tmp_path):
    path = tmp_path / "two_lines.txt"
    path.write_text("cat\ndog\n")
    with pytest.raises(ValueError) as error:
        export_names(path, tmp_path / "model.weights", None, 80)
    assert str(error.value) == f"{path}: 2 class names given but the model has 80 classes"


# ------------------------------------------------------------------------------------------ detect sources
def test_detect_refuses_an_empty_source(tmp_path, capsys, monkeypatch):
    (tmp_path / "dog.jpg").write_bytes(asset("images/dog.jpg").read_bytes())
    monkeypatch.chdir(tmp_path)  # an empty path is the current folder: it must not be scanned
    err = one_line_error(capsys, lambda: tiny_detect(tmp_path, "--source", ""))
    assert err == "error: --source is empty: give an image or video file, a folder, a glob or a camera index"


def unreadable_sources(folder):
    """A folder of four files OpenCV cannot read, each of which makes OpenCV or FFmpeg log a line of its own."""
    folder.mkdir()
    (folder / "a.jpg").write_bytes(b"junk")
    (folder / "b.mp4").write_bytes(b"junk")                     # FFmpeg: moov atom not found
    (folder / "c.tif").write_bytes(b"II*\x00junk")              # OpenCV: TIFF_Error ... Seek error
    (folder / "d.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(12))  # OpenCV: buffer incomplete
    return folder


def test_detect_on_only_unreadable_sources_ends_with_an_error_and_no_opencv_noise(tmp_path):
    source = unreadable_sources(tmp_path / "bad")
    done = run_tool("detect", "--cfg", asset("cfg/yolov3-tiny.cfg"), "--weights", asset("weights/yolov3-tiny.weights"),
                    "--source", source, "--device", "cpu", "--img-size", "96", "--nosave",
                    env={k: v for k, v in os.environ.items() if not k.startswith("OPENCV_")})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1
    assert lines[-1] == "error: none of the 4 source(s) could be read", done.stderr
    assert sorted(lines[-5:-1]) == [
        f"warning: {source / 'a.jpg'}: not a readable image (corrupt or unsupported format); skipped",
        f"warning: {source / 'b.mp4'}: cannot open video; skipped",
        f"warning: {source / 'c.tif'}: not a readable image (corrupt or unsupported format); skipped",
        f"warning: {source / 'd.png'}: not a readable image (corrupt or unsupported format); skipped"]
    assert all(line.startswith(("warning: ", "error: ", "class names from ")) for line in lines), done.stderr


def test_detect_that_reads_nothing_leaves_no_run_folder(tmp_path, capsys):
    source = unreadable_sources(tmp_path / "bad")
    runs = tmp_path / "runs"
    for extra in ([], ["--save-txt"]):  # --save-txt makes a labels/ folder inside the run
        args = detect_cli.parse_args(["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights",
                                      str(asset("weights/yolov3-tiny.weights")), "--source", str(source),
                                      "--device", "cpu", "--img-size", "96", "--project", str(runs), *extra])
        with pytest.raises(SystemExit) as exit_info:
            detect_cli.main(args)
        assert exit_info.value.code == 1
        assert capsys.readouterr().err.strip().splitlines()[-1] == "error: none of the 4 source(s) could be read"
        assert not runs.exists() or not any(runs.iterdir()), sorted(runs.rglob("*"))


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


# ------------------------------------------------------------------------------------ detect output names
def sources_sharing_stems(folder):
    """``a.jpg``, ``a.png``, ``clip_1.jpg`` and a 2-frame ``clip.mp4``: two images with one stem, and an image
    named as the video's first frame's label."""
    folder.mkdir()
    dog = cv2.resize(cv2.imread(str(asset("images/dog.jpg"))), (96, 72))
    cv2.imwrite(str(folder / "a.jpg"), dog)
    cv2.imwrite(str(folder / "a.png"), dog[:, ::-1].copy())
    cv2.imwrite(str(folder / "clip_1.jpg"), dog[::-1].copy())
    video = cv2.VideoWriter(str(folder / "clip.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 5, (96, 72))
    for frame in (dog, dog[::-1].copy()):
        video.write(frame)
    video.release()
    return folder


def test_detect_keeps_one_label_file_per_image_and_frame_when_stems_clash(tmp_path):
    source = sources_sharing_stems(tmp_path / "src")
    out = tiny_detect(tmp_path, "--source", str(source), "--save-txt", "--save-json", "--conf-thres", "0.01")
    labels = sorted(p.name for p in (out / "labels").iterdir())
    assert labels == ["a.txt", "a_2.txt", "clip_1.txt", "clip_1_2.txt", "clip_2.txt"]
    assert sorted(p.name for p in out.iterdir() if p.is_file() and p.suffix != ".json") == [
        "a.jpg", "a.png", "clip.mp4", "clip_1.jpg"]
    results = json.loads((out / "results.json").read_text())
    assert len({r["image_id"] for r in results}) == 5  # each image and frame has detections under its own id


# -------------------------------------------------------------------------------------- [yolo] cfg options
def one_head_cfg_with(tmp_path, *head_lines: str):
    """ONE_HEAD_CFG with ``head_lines`` added at the end of its [yolo] section (the last one on line 45 + k)."""
    path = tmp_path / "head.cfg"
    path.write_text(ONE_HEAD_CFG + "".join(line + "\n" for line in head_lines))
    assert len(ONE_HEAD_CFG.splitlines()) == 44  # the lines below are numbered from here
    return path


@pytest.mark.parametrize("lines, expected", [
    (["nms_kind=diounms", "beta_nms=-5"],
     "46: [yolo] (layer 4): beta_nms=-5 must be above 0 with nms_kind=diounms (Darknet's DIoU-NMS subtracts "
     "(d/c)^beta_nms: at 0 or below it suppresses nothing)"),
    (["beta_nms=0", "nms_kind=diounms"],
     "45: [yolo] (layer 4): beta_nms=0 must be above 0 with nms_kind=diounms (Darknet's DIoU-NMS subtracts "
     "(d/c)^beta_nms: at 0 or below it suppresses nothing)"),
    (["scale_x_y=-1"], "45: [yolo] (layer 4): scale_x_y=-1 must be positive"),
    (["scale_x_y=0"], "45: [yolo] (layer 4): scale_x_y=0 must be positive"),
])
def test_yolo_head_refuses_options_that_break_its_nms_or_decode(tmp_path, lines, expected):
    path = one_head_cfg_with(tmp_path, *lines)
    with pytest.raises(CfgError) as error:
        load_model(path)
    assert str(error.value) == f"{path}:{expected}"


def test_yolo_head_takes_positive_beta_and_scale_and_an_unused_beta(tmp_path, caplog):
    for lines in (["nms_kind=diounms", "beta_nms=0.3", "scale_x_y=1.05"], ["nms_kind=greedynms", "beta_nms=0"]):
        with caplog.at_level(logging.WARNING):
            load_model(one_head_cfg_with(tmp_path, *lines))
    assert not caplog.records


def test_yolo_head_warns_of_an_unknown_nms_kind(tmp_path, caplog):
    path = one_head_cfg_with(tmp_path, "nms_kind=unknown")
    with caplog.at_level(logging.WARNING):
        load_model(path)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}:45: [yolo] nms_kind=unknown is not one of default, greedynms, diounms: using default NMS, as "
        "Darknet does"]


# ---------------------------------------------------------------------------------------------- benchmark
def bad_filters_cfg(tmp_path):
    """yolov3-tiny.cfg with its first head conv's ``filters=abc`` (line 127)."""
    path = tmp_path / "bad.cfg"
    lines = asset("cfg/yolov3-tiny.cfg").read_text().splitlines()
    assert lines[126] == "filters=255"
    lines[126] = "filters=abc"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_benchmark_names_each_bad_input_in_one_line(tmp_path, capsys, keep_threads):
    cfg, classifier = asset("cfg/yolov3-tiny.cfg"), tmp_path / "no_head.cfg"
    classifier.write_text(RATE_CFG)  # one convolution, no detection head (as a classifier cfg)
    cases = [
        (["--cfg", cfg, "--image", tmp_path / "nope.jpg"],
         f"{tmp_path / 'nope.jpg'}: cannot read file (No such file or directory)"),
        (["--cfg", cfg, "--image", cfg], f"{cfg}: not a readable image (corrupt or unsupported format)"),
        (["--cfg", cfg, "--weights", cfg],
         f"{cfg}: not a Darknet weights file (header version 1952804443.539167325.1953719636 is implausible)"),
        (["--cfg", bad_filters_cfg(tmp_path)],
         f"{tmp_path / 'bad.cfg'}:127: [convolutional] (layer 15): option 'filters=abc' is not an integer"),
        (["--cfg", classifier], f"{classifier}: not a detector on 3-channel images (channels=3, heads=0)"),
    ]
    for flags, expected in cases:
        argv = [*map(str, flags), "--img-size", "64", "--iters", "1", "--warmup", "0", "--no-opencv", "--no-gpu",
                "--threads", "1"]
        err = one_line_error(capsys, lambda: benchmark_cli.main(benchmark_cli.parse_args(argv)))
        assert err == f"error: {expected}"


# ---------------------------------------------------------------------------------------- compare_darknet
def test_compare_darknet_refuses_bad_inputs_before_any_run(tmp_path, capsys):
    cfg, images = asset("cfg/yolov3-tiny.cfg"), asset("coco128/images/train2017")
    names = tmp_path / "coco.names"
    names.write_text("".join(f"class{i}\n" for i in range(80)))
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    cases = [
        (["--cfg", tmp_path / "nope.cfg"], f"{tmp_path / 'nope.cfg'}: cfg file not found"),
        (["--names", tmp_path / "nope.names"], f"{tmp_path / 'nope.names'}: names file not found"),
        (["--images", tmp_path / "empty"], f"--images {tmp_path / 'empty'}: no images in this folder (looked for "
                                           ".bmp, .jpeg, .jpg, .png, .tif, .tiff, .webp)"),
        (["--lr", "-1"], "argument --lr: -1 is out of range: the learning rate must be at least 0 (see "
                         "compare_darknet.py --help)"),
        (["--img-size", "33"], "--img-size: 33x33 must be a multiple of the network stride 32 (e.g. 32x32)"),
    ]
    for flags, expected in cases:
        argv = ["--cfg", cfg, "--images", images, "--names", names, "--out", out, *flags]
        err = one_line_error(capsys, lambda: side_by_side.main(list(map(str, argv))))
        assert err == f"error: {expected}"
    assert not out.exists()


# --------------------------------------------------------------------------------------------------- demo
def test_demo_reads_relative_paths_from_the_callers_folder(tmp_path, capsys, monkeypatch):
    folder = write_one_head_training(tmp_path / "run")
    (folder / "bad.cfg").write_text(ONE_HEAD_CFG.replace("filters=30", "filters=abc"))
    assert ONE_HEAD_CFG.splitlines()[34] == "filters=30"
    monkeypatch.chdir(folder)  # restored after the test: the demo itself moves to the repository
    argv = ["--cfg", "bad.cfg", "--data", "data.yaml", "--hyp", "hyp.yaml", "--epochs", "1", "--no-progress"]
    err = one_line_error(capsys, lambda: demo_cli.main(demo_cli.parse_args(argv)))
    assert err == f"error: {folder / 'bad.cfg'}:35: [convolutional] (layer 3): option 'filters=abc' is not an integer"


def test_demo_with_yolo_datasets_set_to_a_file_is_one_line_before_any_training(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(os.getcwd())  # the demo moves to the repository: back after the test
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("YOLO_DATASETS", str(tmp_path / "a-file"))
    monkeypatch.setattr(demo_cli.train_cli, "main", lambda args: pytest.fail("the demo trained"))
    err = one_line_error(capsys, lambda: demo_cli.main(demo_cli.parse_args(["--no-progress"])))
    assert err == (f"error: YOLO_DATASETS={tmp_path / 'a-file'}: {tmp_path / 'a-file'} is a file, not a folder; "
                   "YOLO_DATASETS must name a folder")


@pytest.mark.parametrize("device, workers", [("cpu", ["--workers", "0"]), ("cuda", []), ("cuda:1", []), ("0", []),
                                             ("tpu", [])])
def test_demo_loads_in_the_training_process_on_the_cpu_only(monkeypatch, device, workers):
    """On the CPU the demo trains with ``--workers 0`` (loader workers would compete for the cores); on a GPU the
    automatic workers load while it trains; a device the training refuses is left for it to refuse."""
    seen = []
    monkeypatch.chdir(os.getcwd())  # the demo moves to the repository: back after the test

    def stop_after_training(args):
        seen.append(args.workers)
        return 1
    monkeypatch.setattr(demo_cli.train_cli, "main", stop_after_training)
    assert demo_cli.main(demo_cli.parse_args(["--device", device, "--no-progress"])) == 1
    assert seen == ([int(workers[1])] if workers else [None])


# --------------------------------------------------------------------------------------------- gpu_report
@pytest.mark.parametrize("flags, named", [
    (["--img-size", "96", "--batch", "8"], "--img-size, --batch-size itself: give either --quick or --img-size and "
                                           "--batch-size"),
    (["--mod", "yolov3"], "--models itself: give either --quick or --models"),
    (["--rounds", "20"], "--rounds itself: give either --quick or --rounds"),  # even the default value, given
])
def test_gpu_report_refuses_quick_with_a_flag_it_replaces(capsys, flags, named):
    err = one_line_error(capsys, lambda: gpu_report_cli.parse_args(["--quick", *flags]))
    assert err.startswith(f"error: --quick sets {named} (see "), err


def test_gpu_report_quick_keeps_the_flags_it_does_not_set():
    args = gpu_report_cli.parse_args(["--quick", "--workers", "1", "--no-darknet"])
    assert (args.quick, args.workers) == (True, 1)


def test_gpu_report_on_an_empty_assets_folder_is_an_error(tmp_path, capsys):
    argv = ["--device", "cpu", "--quick", "--no-darknet", "--assets", str(tmp_path)]
    err = one_line_error(capsys, lambda: gpu_report_cli.main(gpu_report_cli.parse_args(argv)))
    assert err == (f"error: assets folder {tmp_path}: no assets found there (looked for cfg/yolov3-tiny.cfg, "
                   "cfg/coco.names, coco128/images/train2017 (jpg images with labels in coco128/labels/train2017); "
                   "--assets or YOLO_ASSETS)")


# ------------------------------------------------------------------------------------------ detect weights
@pytest.mark.parametrize("name, cfg, expected", [
    ("tiny.torchscript", ["--cfg", "CFG"], "{w}: an exported file carries its own cfg: give it without --cfg"),
    ("tiny.weights", [], "{w}: Darknet weights need their --cfg to build the model (only .pt checkpoints carry their "
                         "own)"),
])
def test_detect_names_weights_it_cannot_read(tmp_path, capsys, name, cfg, expected):
    weights = tmp_path / name
    weights.write_bytes(b"\x08\x01\x12\x07pytorch")  # never read: the suffix alone decides
    flags = [str(asset("cfg/yolov3-tiny.cfg")) if flag == "CFG" else flag for flag in cfg]
    argv = [*flags, "--weights", str(weights), "--source", str(asset("images/dog.jpg")), "--output",
            str(tmp_path / "out"), "--device", "cpu"]
    err = one_line_error(capsys, lambda: detect_cli.main(detect_cli.parse_args(argv)))
    assert err == "error: " + expected.format(w=weights)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------ devices, sources
@pytest.mark.parametrize("device", ["mps", "xpu", "meta", "hip", "vulkan", "xla", "lazy"])
def test_a_device_type_other_than_cpu_or_cuda_is_one_line(shapes, tmp_path, capsys, device):
    from training_helpers import write_one_head_model
    _, pt, _ = write_one_head_model(tmp_path)
    err = one_line_error(capsys, lambda: detect_cli.main(detect_cli.parse_args(
        ["--weights", str(pt), "--source", str(asset("images/dog.jpg")), "--device", device, "--nosave"])))
    assert err == f"error: --device: device '{device}': only cpu, cuda, cuda:N or N are supported (not {device})", err


def test_a_camera_index_too_large_for_opencv_is_one_line(shapes, tmp_path, capsys, monkeypatch):
    from training_helpers import write_one_head_model
    _, pt, _ = write_one_head_model(tmp_path)
    monkeypatch.chdir(tmp_path)  # no file of that name
    err = one_line_error(capsys, lambda: detect_cli.main(detect_cli.parse_args(
        ["--weights", str(pt), "--source", "99999999999", "--device", "cpu", "--nosave"])))
    assert err == ("error: --source 99999999999: not a file, and too large for a camera index (0 to "
                   "2,147,483,647)"), err


def test_a_gif_in_a_folder_or_glob_is_detected_as_when_named_alone(tmp_path):
    from yolo.inference.sources import collect_sources
    image = np.zeros((32, 48, 3), np.uint8)
    assert cv2.imwrite(str(tmp_path / "a.gif"), image) and cv2.imwrite(str(tmp_path / "b.png"), image)
    alone = collect_sources(str(tmp_path / "a.gif"))
    assert [(i.kind, i.path.name) for i in alone] == [("image", "a.gif")]
    for source in (tmp_path, tmp_path / "*"):
        assert [(i.kind, i.path.name) for i in collect_sources(str(source))] == [("image", "a.gif"), ("image", "b.png")]


def test_a_names_file_that_is_a_fifo_or_a_device_is_one_line(tmp_path, capsys):
    """``--names`` on a FIFO hung until a writer came (here one comes, and the old read took its names);
    ``/dev/zero`` would never have ended: refused as not a regular file, before anything is read."""
    fifo = tmp_path / "classes.names"
    end = fifo_with_a_late_writer(fifo, "cat\n")
    try:
        with pytest.raises(DataError) as error:
            read_names(fifo)
    finally:
        end()
    assert str(error.value) == f"{fifo}: cannot read the names file: it is a FIFO (named pipe), not a regular file"
    zero = tmp_path / "zero.names"
    zero.symlink_to("/dev/zero")
    with pytest.raises(DataError, match="it is a character device, not a regular file"):
        read_names(zero)
