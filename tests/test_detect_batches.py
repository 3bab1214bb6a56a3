"""Detection in batches without host stalls, and the detect tool reading ahead of the model and saving behind it:
the upload buffer reused from call to call (pinned on CUDA, plain on the CPU, the same reuse), a batch's boxes
mapped back in one pass, and the tool's files the same at any --batch-size and --workers as the Detector's
image by image. The tests marked cuda compare the CUDA batch path with the CPU's and fp16 with fp32."""
import threading
import time

import cv2
import numpy as np
import pytest
import torch

from conftest import asset
from helpers import assert_same_detections, one_line_error, write_mjpg_video
from yolo.cli.detect import cli, main, parse_args
from yolo.files.images import load_image
from yolo.inference.detector import Detector
from yolo.inference.device_preprocess import preprocess_on_device
from yolo.inference.graphed import GRAPH_MAX_BATCH
from yolo.inference.postprocess import PostprocessOptions, boxes_to_original, postprocess
from yolo.inference.read_ahead import map_ahead, read_ahead
from yolo.inference.runner import run_defaults
from yolo.inference.staging import HostStaging
from yolo.inference.write_behind import WriteBehind
from yolo.ops.letterbox import LetterboxInfo
from yolo.settings.detect import DetectRunOptions

IMAGES = ["dog.jpg", "horses.jpg", "person.jpg", "eagle.jpg"]
SIZE = 160  # small: the CPU tests check equality, not detection quality


@pytest.fixture(scope="module")
def images():
    return [load_image(asset(f"images/{name}")) for name in IMAGES]


# ------------------------------------------------------------------ the upload buffer
def test_staging_allocates_once_and_grows_only_for_a_larger_batch():
    staging = HostStaging(pin=False)
    assert staging.borrow((2, 5, 3)).shape == (2, 5, 3) and staging.allocations == 1
    staging.borrow((1, 5, 3))
    staging.borrow((2, 5, 3))
    assert staging.allocations == 1 and staging.capacity == 30
    staging.borrow((3, 5, 3))
    assert staging.allocations == 2 and staging.capacity == 45


def test_staging_upload_on_the_cpu_is_a_copy_the_next_batch_cannot_change():
    staging = HostStaging(pin=False)
    view = staging.borrow((4,))
    view.copy_(torch.tensor([1, 2, 3, 4], dtype=torch.uint8))
    uploaded = staging.upload(view, "cpu")
    staging.borrow((4,)).fill_(9)
    assert uploaded.tolist() == [1, 2, 3, 4]


def test_preprocess_through_one_reused_buffer_equals_a_fresh_one_each_call(images):
    staging = HostStaging(pin=False)
    calls = [images[:2], images[2:3], images[1:4], [images[0], images[0]]]  # mixed sizes, then smaller batches
    kept = []
    for batch_images in calls:
        got, infos = preprocess_on_device(batch_images, (SIZE, SIZE), "letterbox", "cpu", staging=staging)
        expected, expected_infos = preprocess_on_device(batch_images, (SIZE, SIZE), "letterbox", "cpu")
        assert torch.equal(got, expected) and infos == expected_infos
        kept.append((got, expected))
    # Grown twice (the first call, then the larger third), never per call; earlier results untouched.
    assert staging.allocations == 2
    assert staging.capacity == sum(image.size for image in calls[2])
    assert all(torch.equal(got, expected) for got, expected in kept)


@pytest.mark.slow
def test_detector_uploads_every_batch_from_one_buffer(yolov3_tiny, images):
    detector = Detector(*yolov3_tiny, device="cpu", img_size=SIZE, device_preprocess=True, fast=False)
    fresh = Detector(*yolov3_tiny, device="cpu", img_size=SIZE, device_preprocess=True, fast=False)
    assert not detector.staging.pin  # nothing is pinned without CUDA
    for batch_images in (images[:2], images[3:4], images[:2]):
        got = detector(batch_images)
        fresh.staging = HostStaging(pin=False)  # a new buffer for each call: what the Detector did before
        expected = fresh(batch_images)
        for g, e in zip(got, expected):
            assert torch.equal(g["boxes"], e["boxes"]) and torch.equal(g["scores"], e["scores"])
            assert g["names"] == e["names"]
    assert detector.staging.allocations == 1


# ------------------------------------------------------------------ boxes back to their images
def test_boxes_to_original_equals_each_images_own_map():
    g = torch.Generator().manual_seed(0)
    placements = [LetterboxInfo(0.54, 0.54, 0.0, 52.0), LetterboxInfo(0.3077, 0.4622, 0.0, 0.0),
                  LetterboxInfo(1.25, 1.25, 13.0, 0.0), LetterboxInfo(0.5, 0.5, 0.0, 0.0)]
    shapes = [(576, 768), (900, 1352), (250, 300), (10, 10)]
    counts = [3, 0, 5, 2]
    boxes = torch.rand(sum(counts), 4, generator=g) * 500 - 50  # some outside the image: clipped
    got = boxes_to_original(boxes, counts, placements, shapes)
    expected = torch.cat([info.to_original(part, shape) for part, info, shape in
                          zip(torch.split(boxes, counts), placements, shapes)])
    assert torch.equal(got, expected)  # the same float32 operations: the same values


def test_a_batch_comes_to_the_host_in_one_copy(monkeypatch):
    """postprocess copies the whole batch's detections to the host once, not once per image."""
    g = torch.Generator().manual_seed(1)
    predictions = torch.rand(6, 300, 5 + 3, generator=g)
    predictions[..., :4] *= 100
    copies = []
    real_cpu, real_to = torch.Tensor.cpu, torch.Tensor.to

    def counted_cpu(self, *args, **kwargs):
        copies.append(tuple(self.shape))
        return real_cpu(self, *args, **kwargs)

    def counted_to(self, *args, **kwargs):
        if any(str(a) == "cpu" for a in (*args, kwargs.get("device"))):
            copies.append(tuple(self.shape))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "cpu", counted_cpu)
    monkeypatch.setattr(torch.Tensor, "to", counted_to)
    placements = [LetterboxInfo(0.5, 0.5, 0.0, 10.0)] * 6
    dets = postprocess(predictions, PostprocessOptions(conf_thres=0.3), placements, [(300, 200)] * 6)
    assert sum(len(d["labels"]) for d in dets) > 6
    assert len(copies) == 1


# ------------------------------------------------------------------ reading ahead, saving behind
def test_map_ahead_keeps_the_order_and_raises_at_the_failed_item():
    def slow_square(x):
        time.sleep(0.002 * ((7 * x) % 5))  # later items often finish first
        if x == 13:
            raise ValueError("item 13")
        return x * x

    assert list(map_ahead(slow_square, range(13), workers=3)) == [x * x for x in range(13)]
    assert list(map_ahead(slow_square, range(5), workers=0)) == [0, 1, 4, 9, 16]
    got = []
    with pytest.raises(ValueError, match="item 13"):
        for value in map_ahead(slow_square, range(20), workers=4):
            got.append(value)
    assert got == [x * x for x in range(13)]


def test_closing_early_stops_the_threads_and_reads_no_further():
    before = threading.active_count()
    started = []
    source = iter(range(1000))

    def counted():
        for x in source:
            started.append(x)
            yield x

    frames = read_ahead(counted(), depth=3)
    assert [next(frames) for _ in range(2)] == [0, 1]
    frames.close()
    assert threading.active_count() == before
    assert len(started) <= 2 + 3 + 1  # what was asked for, the depth ahead, at most one read in progress
    assert list(read_ahead(iter([]), depth=2)) == []


def test_write_behind_runs_every_call_and_raises_a_failed_one():
    done = []
    with WriteBehind(2) as saves:
        for i in range(10):
            saves.submit(done.append, i)
    assert sorted(done) == list(range(10))

    def fail():
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        with WriteBehind(1) as saves:
            saves.submit(fail)
    inline = []
    WriteBehind(0).submit(inline.append, 1)  # no thread: at once
    assert inline == [1]


# ------------------------------------------------------------------ the detect tool
def test_run_defaults_follow_the_device():
    assert run_defaults(DetectRunOptions(), torch.device("cpu")) == (1, 0)  # the path as it was
    batch, workers = run_defaults(DetectRunOptions(), torch.device("cuda"))
    assert batch == GRAPH_MAX_BATCH and 1 <= workers <= 4
    assert run_defaults(DetectRunOptions(batch_size=5, workers=0), torch.device("cuda")) == (5, 0)
    with pytest.raises(ValueError):
        DetectRunOptions(batch_size=0)


def tool_args(source, out, *extra):
    return parse_args(["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
                       "--names", str(asset("cfg/coco.names")), "--source", str(source), "--project", str(out),
                       "--device", "cpu", "--img-size", str(SIZE), "--save-txt", "--save-conf", "--save-json", *extra])


def files_of(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def folder_and_video(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    for name in IMAGES:
        (src / name).write_bytes(asset(f"images/{name}").read_bytes())
    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")  # reported and skipped in any batch
    frame = cv2.resize(cv2.imread(str(asset("images/dog.jpg"))), (320, 240))
    video = src / "clip.avi"
    write_mjpg_video(video, (np.roll(frame, 15 * i, axis=1) for i in range(3)), 5)
    return src


@pytest.mark.slow  # two runs of the tool over four images and a video
def test_detect_tool_files_are_the_same_at_any_batch_size_and_workers(folder_and_video, yolov3_tiny, tmp_path, capsys):
    one = main(tool_args(folder_and_video, tmp_path / "one", "--batch-size", "1", "--workers", "0"))
    many = main(tool_args(folder_and_video, tmp_path / "many", "--batch-size", "2", "--workers", "3"))
    printed = capsys.readouterr()
    assert printed.err.count("broken.jpg") == 2 and "clip" in printed.out
    expected, got = files_of(one), files_of(many)
    assert sorted(got) == sorted(expected) and "clip.mp4" in got and "labels/clip_2.txt" in got
    for name in expected:
        if name != "clip.mp4":  # the video's container may hold its own timestamps: its frames are compared
            assert got[name] == expected[name], name
    frames = []
    for run in (one, many):
        capture = cv2.VideoCapture(str(run / "clip.mp4"))
        frames.append([capture.read()[1] for _ in range(3)])
        capture.release()
    assert all(a is not None and np.array_equal(a, b) for a, b in zip(*frames))
    # The labels are the Detector's, image by image (the current path), whatever the batch.
    detector = Detector(*yolov3_tiny, device="cpu", img_size=SIZE)
    for name in IMAGES:
        det = detector(folder_and_video / name)[0]
        lines = got[f"labels/{name[:-4]}.txt"].decode().splitlines()
        assert [int(line.split()[0]) for line in lines] == det["labels"].tolist()
        assert np.allclose([float(line.split()[5]) for line in lines], det["scores"].numpy(), atol=1e-5)


@pytest.mark.slow
def test_a_save_failing_behind_the_model_is_the_tools_one_line_error(folder_and_video, tmp_path, capsys, monkeypatch):
    """OpenCV's encoder returning False on a saving thread: the same one-line error naming the
    file as when saving in order."""
    import yolo.inference.writer as writer_module

    monkeypatch.setattr(writer_module.cv2, "imencode", lambda *args, **kwargs: (False, None))
    err = one_line_error(capsys, lambda: cli(["--cfg", str(asset("cfg/yolov3-tiny.cfg")),
                                              "--weights", str(asset("weights/yolov3-tiny.weights")),
                                              "--names", str(asset("cfg/coco.names")),
                                              "--source", str(folder_and_video / "dog.jpg"), "--project",
                                              str(tmp_path), "--device", "cpu", "--img-size", str(SIZE),
                                              "--workers", "2", "--no-progress"]))
    assert "dog.jpg: cannot write: the writer reported a failure" in err, err


def test_detect_tool_refuses_a_zero_batch(tmp_path, capsys):
    with pytest.raises(SystemExit):
        tool_args(asset("images/dog.jpg"), tmp_path, "--batch-size", "0")
    assert "--batch-size" in capsys.readouterr().err


# ------------------------------------------------------------------ CUDA
@pytest.mark.cuda
def test_cuda_batches_upload_from_one_pinned_buffer_and_match_the_cpu(cuda_device, yolov3_tiny, images):
    conf = 0.25
    gpu = Detector(*yolov3_tiny, device=cuda_device, conf_thres=conf, img_size=416)
    cpu = Detector(*yolov3_tiny, device="cpu", conf_thres=conf, img_size=416)
    assert gpu.device_preprocess and gpu.staging.pin
    # horses.jpg and eagle.jpg share a size: [horses, dog, eagle] puts one group at positions 0 and 2
    for batch_images in ([images[1], images[0], images[3]], images[:3], images[3:], images[:1]):  # largest first
        got = gpu(batch_images)
        assert gpu.staging._buffer.is_pinned()
        assert set(gpu.timings) == {"preprocess", "inference", "postprocess"} and min(gpu.timings.values()) >= 0
        # inputs within one 8-bit level of the CPU's: detections close, not equal
        assert_same_detections(got, cpu(batch_images), iou_min=0.97, score_tol=0.02, margin=0.03, conf=conf)
    assert gpu.staging.allocations == 1


@pytest.mark.cuda
@pytest.mark.parametrize("batch", [1, 8, 2 * GRAPH_MAX_BATCH])
def test_cuda_fp16_channels_last_matches_fp32_at_every_batch(cuda_device, yolov3_tiny, images, batch):
    """fp16 with channels-last memory against fp32, through CUDA graphs (small batches) and eagerly (large)."""
    conf = 0.25
    fp32 = Detector(*yolov3_tiny, device=cuda_device, conf_thres=conf)
    fp16 = Detector(*yolov3_tiny, device=cuda_device, conf_thres=conf, half=True)
    batch_images = [images[i % len(images)] for i in range(batch)]
    got = fp16(batch_images)
    assert_same_detections(got, fp32(batch_images), iou_min=0.95, score_tol=0.03, margin=0.05, conf=conf)
    assert sum(len(d["labels"]) for d in got) > 0


@pytest.mark.cuda
def test_cuda_graph_replays_follow_alternating_small_batches(cuda_device, yolov3_tiny, images):
    graphed = Detector(*yolov3_tiny, device=cuda_device, cuda_graph=True)
    eager = Detector(*yolov3_tiny, device=cuda_device, cuda_graph=False)
    for batch_images in (images[:1], images[:4], images[2:3], images[:4], images[3:4]):
        got, expected = graphed(batch_images), eager(batch_images)
        for g, e in zip(got, expected):
            assert torch.equal(g["labels"], e["labels"])
            assert torch.allclose(g["boxes"], e["boxes"], atol=1e-2, rtol=0)
    assert len(graphed._run_net.captured) == 2  # batch 1 and batch 4
