"""Tracking (yolo.inference.tracking): tracks scored with motmetrics (MOTA, IDF1, ID switches) against identities we
generate, compared with the `trackers` library's own tracker on the same detections; detect.py --track end to end."""
import json
import sys

import cv2
import numpy as np
import pytest
import torch
import torchvision

from conftest import asset
from helpers import one_line_error, write_mjpg_video
from yolo.cli.detect import main, parse_args
from yolo.inference.detector import Detector
from yolo.inference.tracking import TRACK_LOW_THRES, Tracker

trackers = pytest.importorskip("trackers", reason="tracking needs the trackers package (the [track] extra)")
mm = pytest.importorskip("motmetrics", reason="the tracking metrics need motmetrics (the [dev] extra)")
sv = pytest.importorskip("supervision", reason="installed with trackers")

W, H, FRAMES = 640, 480, 80
REENTERS, CROSS_A, CROSS_B, STILL = 1, 2, 3, 4


def truth():
    """Per frame, ``[(identity, x1, y1, x2, y2)]``: object 1 leaves on the right (frame ~20) and comes back from the
    right (frame ~45); objects 2 and 3 cross each other on one line (frames ~30-45, 3 behind 2); 4 stays still."""
    frames = []
    for f in range(FRAMES):
        objects = [(STILL, 300, 20, 360, 100)]
        x = 400 + 12 * f if f < 25 else (None if f < 45 else 660 - 12 * (f - 45))
        if x is not None and x + 10 < W:
            objects.append((REENTERS, x, 60, min(x + 60, W), 140))
        xa, xb = 50 + 7 * f, 560 - 7 * f
        objects += [(CROSS_A, xa, 280, xa + 50, 380), (CROSS_B, xb, 290, xb + 50, 390)]
        frames.append(objects)
    return frames


def detections(frames, seed=0):
    """A detector's output made from the truth: boxes jittered by 2 px, 5% missed, scores 0.5-0.95 but 0.2 for the
    object hidden behind another while they cross, and now and then a low-scored false box."""
    rng = np.random.default_rng(seed)
    out = []
    for f, objects in enumerate(frames):
        boxes, scores = [], []
        for identity, *box in objects:
            if rng.random() < 0.05:
                continue
            boxes.append(np.array(box, dtype=float) + rng.normal(0, 2, 4))
            hidden = identity == CROSS_B and abs((50 + 7 * f) - (560 - 7 * f)) < 50
            scores.append(0.2 if hidden else rng.uniform(0.5, 0.95))
        if rng.random() < 0.1:
            x, y = rng.uniform(0, W - 40), rng.uniform(0, H - 40)
            boxes.append(np.array([x, y, x + 40, y + 40]))
            scores.append(rng.uniform(TRACK_LOW_THRES, 0.3))
        out.append({"boxes": torch.tensor(np.array(boxes, dtype=np.float32).reshape(-1, 4)),
                    "scores": torch.tensor(scores, dtype=torch.float32),
                    "labels": torch.zeros(len(scores), dtype=torch.int64)})
    return out


def accumulate(frames, tracked):
    """A motmetrics accumulator of ``tracked`` (per frame ``(boxes xyxy, ids)``) against the truth; a match needs
    IoU >= 0.5 (MOTChallenge's)."""
    acc = mm.MOTAccumulator(auto_id=True)
    for objects, (boxes, ids) in zip(frames, tracked):
        truth_boxes = torch.tensor([o[1:] for o in objects], dtype=torch.float64).reshape(-1, 4)
        iou = torchvision.ops.box_iou(truth_boxes, torch.as_tensor(boxes, dtype=torch.float64).reshape(-1, 4))
        acc.update([o[0] for o in objects], list(ids), np.where(iou >= 0.5, 1 - iou, np.nan))
    return acc


def scores_of(acc):
    summary = mm.metrics.create().compute(acc, metrics=["mota", "idf1", "num_switches"], name="run")
    return {key: float(summary[key].iloc[0]) for key in summary.columns}


def ours(kind, dets):
    tracker, out = Tracker(kind, conf_thres=0.25), []
    for det in dets:
        got = tracker.update(det)
        shown = got["track_ids"] >= 0
        out.append((got["boxes"][shown].numpy(), got["track_ids"][shown].tolist()))
    return out


def library_direct(kind, dets):
    """The library's tracker fed the same detections as sv.Detections, with the same thresholds, its ids as it
    gives them, and what is reported filtered at 0.25 as ours."""
    cls = {"bytetrack": trackers.ByteTrackTracker, "botsort": trackers.BoTSORTTracker,
           "ocsort": trackers.OCSORTTracker}[kind]
    options = {"high_conf_det_threshold": 0.25}
    if kind != "ocsort":
        options["track_activation_threshold"] = 0.25
    tracker, out = cls(**options), []
    for det in dets:
        result = tracker.update(sv.Detections(xyxy=det["boxes"].numpy(), confidence=det["scores"].numpy(),
                                              class_id=det["labels"].numpy()))
        keep = (result.tracker_id >= 0) & (result.confidence >= 0.25)
        out.append((result.xyxy[keep], result.tracker_id[keep].tolist()))
    return out


@pytest.mark.parametrize("kind", ["bytetrack", "botsort", "ocsort"])
def test_tracks_score_as_the_library_tracker_on_the_same_detections(kind):
    frames = truth()
    dets = detections(frames)
    got, reference = scores_of(accumulate(frames, ours(kind, dets))), \
        scores_of(accumulate(frames, library_direct(kind, dets)))
    assert got == pytest.approx(reference, abs=1e-9), (got, reference)
    assert got["mota"] >= 0.8 and got["idf1"] >= 0.85, got


def test_bytetrack_keeps_crossing_objects_apart_and_tracks_one_coming_back():
    frames = truth()
    acc = accumulate(frames, ours("bytetrack", detections(frames)))
    events = acc.mot_events
    switches = events[events.Type == "SWITCH"]
    assert not set(switches.OId) & {CROSS_A, CROSS_B, STILL}, switches  # the crossing swaps no identity
    matched = events[events.Type.isin(["MATCH", "SWITCH"])]
    back = matched[(matched.OId == REENTERS) & (matched.index.get_level_values(0) >= 50)]
    present = sum(1 for f in range(50, FRAMES) if any(o[0] == REENTERS for o in frames[f]))
    assert len(back) >= 0.8 * present  # found and tracked again once back in view
    # It comes back under a new identity (no appearance model): at most that one switch in the whole sequence.
    assert scores_of(acc)["num_switches"] <= 1


def test_detections_below_the_reporting_threshold_are_not_reported_but_keep_tracks():
    tracker = Tracker("bytetrack", conf_thres=0.5)
    box = torch.tensor([[100.0, 100.0, 160.0, 200.0]])
    ids = []
    for f in range(6):  # scored 0.9 twice (the track is confirmed), then 0.2 (hidden), then 0.9 again
        score = 0.2 if f in (2, 3) else 0.9
        got = tracker.update({"boxes": box + 3 * f, "scores": torch.tensor([score]), "labels": torch.tensor([0])})
        assert len(got["boxes"]) == (0 if score < 0.5 else 1)
        ids += got["track_ids"].tolist()
    assert ids[1] >= 1 and ids[1:] == [ids[1]] * 3  # one id through the low-scored frames


# -------------------------------------------------------------------------------------- end to end: detect.py
def pan_frames(count=6):
    """A camera panning over Darknet's dog picture: the bicycle, the dog and the truck move across the frames."""
    image = cv2.imread(str(asset("images/dog.jpg")))
    return [np.ascontiguousarray(cv2.resize(image[60:480, 20 + 15 * f:580 + 15 * f], (320, 240)))
            for f in range(count)]


def tiny_args(source, out, *extra):
    return parse_args(["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--weights", str(asset("weights/yolov3-tiny.weights")),
                       "--names", str(asset("cfg/coco.names")), "--source", str(source), "--project", str(out),
                       "--device", "cpu", "--img-size", "224", "--no-progress", *extra])


@pytest.fixture(scope="module")
def pan_video(tmp_path_factory):
    return write_mjpg_video(tmp_path_factory.mktemp("video") / "pan.avi", pan_frames(), fps=10)


def mot_rows(path):
    rows = [line.split(",") for line in path.read_text().splitlines()]
    assert rows and all(len(r) == 10 and r[7:] == ["-1", "-1", "-1"] for r in rows)
    return [(int(r[0]), int(r[1]), *map(float, r[2:7])) for r in rows]


@pytest.mark.slow
def test_detect_track_writes_mot_file_json_ids_and_ids_stable_across_batches_and_workers(pan_video, tmp_path):
    one = main(tiny_args(pan_video, tmp_path / "a", "--track", "--save-json", "--nosave"))
    many = main(tiny_args(pan_video, tmp_path / "b", "--track", "--save-json", "--nosave", "--batch-size", "3",
                          "--workers", "2"))
    rows = mot_rows(one / "tracks" / "pan.txt")
    assert (many / "tracks" / "pan.txt").read_text() == (one / "tracks" / "pan.txt").read_text()
    frames = {r[0] for r in rows}
    assert min(frames) >= 1 and max(frames) <= 6 and len({r[1] for r in rows}) >= 2
    results = json.loads((one / "results.json").read_text())
    assert results and all("track_id" in r for r in results)
    tracked = sorted((r["image_id"], r["track_id"], round(r["bbox"][0], 2)) for r in results if r["track_id"] >= 0)
    assert len(tracked) == len(rows)
    # The Python API gives the same ids on the same frames (as decoded from the video).
    capture, decoded = cv2.VideoCapture(str(pan_video)), []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        decoded.append(frame)
    detector = Detector(asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights"), img_size=224)
    api = [(f + 1, int(i), round(float(b[0]), 2)) for f, det in enumerate(detector.track(decoded, batch_size=2))
           for b, i in zip(det["boxes"], det["track_ids"]) if i >= 0]
    assert sorted(api) == sorted((r[0], r[1], round(r[2], 2)) for r in rows)


@pytest.mark.slow
def test_detect_track_on_a_folder_of_images_is_one_sequence_and_draws_ids(tmp_path):
    folder = tmp_path / "walk"
    folder.mkdir()
    for f, frame in enumerate(pan_frames(3)):
        cv2.imwrite(str(folder / f"{f:03d}.png"), frame)
    out = main(tiny_args(folder, tmp_path / "runs", "--track"))
    rows = mot_rows(out / "tracks" / "walk.txt")
    assert {r[0] for r in rows} <= {1, 2, 3} and max(r[0] for r in rows) == 3
    plain = main(tiny_args(folder / "002.png", tmp_path / "runs"))
    drawn, untracked = cv2.imread(str(out / "002.png")), cv2.imread(str(plain / "002.png"))
    assert not np.array_equal(drawn, untracked)  # the labels carry the track ids


def test_show_without_a_display_is_a_one_line_error(pan_video, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    err = one_line_error(capsys, lambda: main(tiny_args(pan_video, tmp_path, "--show")))
    assert "--show" in err and "display" in err
    assert not (tmp_path / "exp").exists()


def test_track_without_the_trackers_package_is_a_one_line_error(pan_video, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "trackers", None)  # import trackers raises ImportError
    err = one_line_error(capsys, lambda: main(tiny_args(pan_video, tmp_path, "--track")))
    assert "--track" in err and "trackers" in err
