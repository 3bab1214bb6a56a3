"""Every signal keeps the run: SIGTERM or SIGHUP to the process group of a training with loader workers, at any
point of an update, of the evaluation or of a checkpoint save, and a loader worker killed with SIGKILL; SIGTERM or
Ctrl-C during detection on a video.

Each case runs ``tools/train.py`` for real (a tiny cfg, 8 train images of 64-80 px, 2 updates per epoch, 3 epochs,
2 loader workers) in its own process group. The driver pauses the run at one point (in the forward, in the
backward, before the optimizer step, inside the evaluation, inside the end-of-epoch save) and writes a marker file
with its loader workers' pids; the test then signals the whole group, as ``timeout``, Slurm or ``docker stop``
do (or kills one worker), and the driver goes on once the run has seen the stop. The run must end with one
line, the exit status of the signal, ``last.pt`` at the last completed update, no process left in the group;
resumed, it must end where an uninterrupted run ends.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from training_helpers import assert_same_state, write_one_head_model, write_one_head_training
from helpers import write_mjpg_video
from yolo.data import build_dataset, collate_fn, load_data_config
from yolo.engine import TrainOptions, Trainer
from yolo.evaluation import EvaluationStopped, Evaluator, evaluate_model
from yolo.models.checkpoint import load_checkpoint_file
from yolo.models.model import Darknet

REPO = Path(__file__).resolve().parent.parent
HYP = {"workers": 2, "tensorboard": False, "plots": True, "eval_interval": 1, "ema": False}

# tools/train.py, paused at one point (POINT, the OCCURRENCE-th time) until the run has been asked to stop.
DRIVER = """
import json, multiprocessing, os, sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
import yolo.engine.hooks.checkpointing as checkpointing
from yolo.engine.trainer import Trainer
from yolo.evaluation import Evaluator

point, occurrence, marker = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
seen = {{}}
trainer = None

def pause(where):
    seen[where] = seen.get(where, 0) + 1
    if where != point or seen[where] != occurrence or trainer.parts.dist.rank != int(os.environ.get("PAUSE_RANK", 0)):
        return
    pids = [p.pid for p in multiprocessing.active_children()]
    written = Path(str(marker) + ".tmp")  # whole or absent: the test reads it as soon as it exists
    written.write_text(json.dumps({{"pids": pids, "pid": os.getpid(), "global_step": trainer.state.global_step}}))
    os.replace(written, marker)
    deadline = time.time() + 60
    while not trainer.stop_request.requested and time.time() < deadline:
        time.sleep(0.01)
    Path(str(marker) + ".seen").write_text("stop seen")

real_from_options = Trainer.from_options.__func__
def from_options(cls, options):
    global trainer
    trainer = real_from_options(cls, options)
    run_parts = trainer.parts  # the step reads forward and criterion there at each mini-batch
    forward, criterion = run_parts.forward, run_parts.criterion
    def paused_forward(images):
        pause("forward")
        return forward(images)
    def criterion_with_backward_pause(outputs, targets, size, images_seen):
        loss, terms = criterion(outputs, targets, size, images_seen=images_seen)
        loss.register_hook(lambda grad: pause("backward"))  # runs inside loss.backward()
        return loss, terms
    run_parts.forward, run_parts.criterion = paused_forward, criterion_with_backward_pause
    run_parts.optimizer.register_step_pre_hook(lambda optimizer, args, kwargs: pause("optimizer"))
    return trainer
Trainer.from_options = classmethod(from_options)

real_process = Evaluator.process
def process(self, *args, **kwargs):
    pause("evaluation")
    return real_process(self, *args, **kwargs)
Evaluator.process = process

real_save = checkpointing.save_checkpoint
def save(ckpt, path):
    pause("save")
    return real_save(ckpt, path)
checkpointing.save_checkpoint = save

sys.argv = ["train.py"] + sys.argv[4:]
from yolo.cli.train import cli
cli()
"""


@contextlib.contextmanager
def one_thread():
    """One torch thread here, as in the driver (OMP_NUM_THREADS=1): identical numbers need the same count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return write_one_head_training(tmp_path_factory.mktemp("signals"), hyp=HYP)


@pytest.fixture(scope="module")
def reference(setup, tmp_path_factory):
    """The uninterrupted run's last.pt (3 epochs; without worker processes: the data do not depend on them)."""
    project = tmp_path_factory.mktemp("reference")
    with one_thread():
        result = Trainer.from_options(TrainOptions(cfg=str(setup / "tiny.cfg"), data=str(setup / "data.yaml"),
                                                   hyp=str(setup / "hyp.yaml"), epochs=3, device="cpu", workers=0,
                                                   project=str(project), name="ref", progress=False)).fit()
    assert result.status == "finished" and result.global_step == 6
    return load_checkpoint_file(result.run_dir / "last.pt")


def train_command(setup, project: Path, *extra) -> list:
    return ["--cfg", str(setup / "tiny.cfg"), "--data", str(setup / "data.yaml"), "--hyp", str(setup / "hyp.yaml"),
            "--epochs", "3", "--device", "cpu", "--project", str(project), "--name", "run", "--no-progress", *extra]


def interrupted_run(setup, tmp_path, point: str, occurrence: int, send, processes: int = 1):
    """Run the driver paused at ``point`` (under torchrun with ``processes`` > 1: paused in the last one);
    ``send(pgid, marker)`` signals it there. Returns (process, marker)."""
    marker = tmp_path / "paused.json"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(repo=str(REPO)))
    launch = [sys.executable] if processes == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                      "--nproc_per_node", str(processes)]
    cmd = [*launch, str(driver), point, str(occurrence), str(marker), *train_command(setup, tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "YOLO_CACHE_DIR": str(tmp_path / "cache"),
           "PAUSE_RANK": str(processes - 1)}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.time() + 300
        while not marker.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert marker.exists(), proc.communicate(timeout=60)
        paused = json.loads(marker.read_text())
        send(proc.pid, paused)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.stdout_text, proc.stderr_text = out, err
    return proc, paused


def group_is_gone(pgid: int) -> bool:
    """No process is left in the group (the loader workers ended with the run); waits up to 10 s for them."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def assert_one_clean_line(proc, expected_status: int, line_start: str) -> None:
    err = proc.stderr_text
    assert proc.returncode == expected_status, err[-3000:]
    assert "Traceback" not in err and "killed by signal: Terminated" not in err, err[-3000:]
    assert "failed" not in err, err[-3000:]  # no report misread as failing (the results chart, say)
    final = [line for line in err.splitlines() if line.startswith(line_start)]
    assert len(final) == 1 and "--resume" in final[0], err[-3000:]


def resume_and_compare(run_dir: Path, reference) -> None:
    with one_thread():
        result = Trainer.from_options(TrainOptions(resume=str(run_dir), progress=False, workers=0)).fit()
    assert result.status == "finished" and result.global_step == 6
    assert_same_state(load_checkpoint_file(run_dir / "last.pt"), reference)


def send_to_group(signum):
    return lambda pgid, paused: os.killpg(pgid, signum)


# (point, occurrence, the saved (epoch, epoch_step, global_step)): the update in progress completes and is saved; a
# stop in the evaluation saves the epoch's updates with its evaluation left to the resumed run; a stop in a save
# lets the save end.
POINTS = [("forward", 3, (1, 1, 3)), ("backward", 2, (0, 2, 2)), ("optimizer", 5, (2, 1, 5)),
          ("evaluation", 1, (0, 2, 2)), ("save", 1, (1, 0, 2))]


@pytest.mark.slow  # each case a real run in a subprocess: 10-30 s on 2 cores
@pytest.mark.parametrize("point, occurrence, saved", POINTS)
def test_sigterm_to_the_group_saves_the_last_update_and_resumes_exactly(setup, reference, tmp_path, point,
                                                                        occurrence, saved):
    proc, paused = interrupted_run(setup, tmp_path, point, occurrence, send_to_group(signal.SIGTERM))
    assert paused["pids"], "the loader workers were running"
    assert_one_clean_line(proc, 128 + signal.SIGTERM, "interrupted (SIGTERM): saved")
    assert group_is_gone(proc.pid)
    state = load_checkpoint_file(tmp_path / "run" / "last.pt")["train"]
    assert (state["epoch"], state["epoch_step"], state["global_step"]) == saved
    resume_and_compare(tmp_path / "run", reference)


@pytest.mark.slow
def test_sighup_saves_and_releases_the_run_folder_at_once(setup, reference, tmp_path):
    proc, _ = interrupted_run(setup, tmp_path, "forward", 2, send_to_group(signal.SIGHUP))
    assert_one_clean_line(proc, 128 + signal.SIGHUP, "interrupted (SIGHUP): saved")
    assert group_is_gone(proc.pid)  # no worker holds the folder's lock
    state = load_checkpoint_file(tmp_path / "run" / "last.pt")["train"]
    assert (state["epoch"], state["epoch_step"], state["global_step"]) == (0, 2, 2)
    resumed = subprocess.run([sys.executable, str(REPO / "tools" / "train.py"), "--resume", str(tmp_path / "run"),
                              "--workers", "0", "--no-progress"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_same_state(load_checkpoint_file(tmp_path / "run" / "last.pt"), reference)


@pytest.mark.slow
def test_a_killed_loader_worker_is_one_line_and_last_pt_is_saved(setup, reference, tmp_path):
    def kill_one_worker(pgid, paused):
        os.kill(paused["pids"][0], signal.SIGKILL)

    proc, paused = interrupted_run(setup, tmp_path, "forward", 3, kill_one_worker)
    assert_one_clean_line(proc, 4, "stopped: a data loader worker died (DataLoader worker (pid "
                                   f"{paused['pids'][0]}) is killed by signal: Killed")
    assert group_is_gone(proc.pid)
    state = load_checkpoint_file(tmp_path / "run" / "last.pt")["train"]
    assert (state["epoch"], state["epoch_step"], state["global_step"]) == (1, 1, 3)
    resume_and_compare(tmp_path / "run", reference)


@pytest.mark.slow
def test_a_loader_worker_killed_in_the_evaluation_is_one_line_and_the_epoch_is_kept(setup, reference, tmp_path):
    """The evaluation's workers killed (the out-of-memory killer, say): the epoch's updates are saved with its
    evaluation left to the resumed run, which ends as an uninterrupted one."""
    def kill_the_workers(pgid, paused):
        for pid in paused["pids"]:
            os.kill(pid, signal.SIGKILL)

    proc, paused = interrupted_run(setup, tmp_path, "evaluation", 1, kill_the_workers)
    assert paused["pids"], "the evaluation's loader workers were running"
    assert_one_clean_line(proc, 4, "stopped: a data loader worker died (DataLoader worker (pid ")
    assert group_is_gone(proc.pid)
    state = load_checkpoint_file(tmp_path / "run" / "last.pt")["train"]
    assert (state["epoch"], state["epoch_step"], state["global_step"]) == (0, 2, 2)
    resume_and_compare(tmp_path / "run", reference)


def test_the_evaluation_ends_within_one_batch_of_a_stop(setup):
    """With no worker processes a stop during the evaluation is honoured at the next batch, not at its end."""
    data = load_data_config(str(setup / "data.yaml"))
    val = build_dataset(data, "val", img_size=64, augment=False)
    loader = torch.utils.data.DataLoader(val, batch_size=1, collate_fn=collate_fn)
    evaluator = Evaluator(data.names, val.ground_truth())
    batches = []
    real_process = evaluator.process
    evaluator.process = lambda *args: (batches.append(1), real_process(*args))
    model = Darknet(str(setup / "tiny.cfg"))
    with pytest.raises(EvaluationStopped):
        evaluate_model(model, loader, evaluator, device="cpu", progress=False, stop=lambda: len(batches) >= 1)
    assert len(batches) == 1 and len(loader) == 2
    assert evaluate_model(model, loader, evaluator, device="cpu", progress=False, stop=lambda: False)["num_images"] == 2


def test_the_stop_request_names_a_signal_that_follows_another_request():
    """A signal received after a stop asked otherwise (a callback's ``request_stop``) is still named, once; a
    repeated SIGTERM changes nothing."""
    from yolo.engine.stop import StopRequest

    stop = StopRequest(announce=False)
    stop.install()
    try:
        stop.ask("a callback")
        assert stop.signal_name is None
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGHUP)
    finally:
        stop.restore()
    assert stop.requested and stop.signal_name == "SIGTERM"


# ------------------------------------------------------------------------------------------ detection on a video
# tools/detect.py, paused inside frame PAUSE_AT (0-based) of the video until the stop signal has arrived.
DETECT_DRIVER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
import yolo.cli.stream_stop as stream_stop
import yolo.inference.writer as writer_module

pause_at, marker = int(sys.argv[1]), Path(sys.argv[2])
handled = []
real_handle = stream_stop.StreamStop._handle
def handle(self, signum, frame):
    handled.append(signum)
    return real_handle(self, signum, frame)
stream_stop.StreamStop._handle = handle

real_json, frames = writer_module.Writer.json, []
def json_then_pause(self, *args):
    real_json(self, *args)
    frames.append(1)
    if len(frames) == pause_at + 1:
        marker.write_text("paused")
        deadline = time.time() + 60
        while not handled and time.time() < deadline:
            time.sleep(0.01)
writer_module.Writer.json = json_then_pause

sys.argv = ["detect.py"] + sys.argv[3:]
from yolo.cli.detect import cli
cli()
"""


@pytest.fixture(scope="module")
def video_setup(tmp_path_factory):
    """The tiny one-head model (random weights) and a 30-frame 96x64 video of moving shapes."""
    folder = tmp_path_factory.mktemp("video")
    cfg, pt, _weights = write_one_head_model(folder)
    video = folder / "clip.avi"
    frames = [np.full((64, 96, 3), 40, np.uint8) for _ in range(30)]
    for i, frame in enumerate(frames):
        cv2.circle(frame, (10 + 2 * i, 32), 12, (0, 200, 255), -1)
    write_mjpg_video(video, frames, 10)
    return {"pt": pt, "video": video}


def paused_detect(source: Path, pt: Path, tmp_path: Path, signum: int):
    """``tools/detect.py`` on ``source`` paused after its 6th result, sent ``signum`` (the group, as a terminal or
    ``timeout`` does) and run to its end; returns ``(process, stdout, stderr)``."""
    marker = tmp_path / "paused"
    cmd = [sys.executable, "-c", DETECT_DRIVER.format(repo=str(REPO)), "5", str(marker),
           "--weights", str(pt), "--source", str(source), "--save-json",
           "--device", "cpu", "--conf-thres", "0.001", "--project", str(tmp_path), "--name", "run", "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.time() + 120
        while not marker.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert marker.exists(), proc.communicate(timeout=60)
        os.killpg(proc.pid, signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in err, err[-3000:]
    return proc, out, err


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_video_detection_finishes_the_video_and_results(video_setup, tmp_path, signum):
    proc, out, err = paused_detect(video_setup["video"], video_setup["pt"], tmp_path, signum)
    assert proc.returncode == 128 + signum, err[-3000:]  # a file not done is not a success (a camera's Ctrl-C is)
    name = signal.Signals(signum).name
    assert [line for line in err.splitlines() if "stopped" in line] == [
        f"{video_setup['video'].name}: stopped ({name}) after 6 frame(s); what was done is saved"], err[-3000:]
    run = tmp_path / "run"
    assert sorted(p.name for p in run.iterdir()) == ["clip.mp4", "image_ids.json", "results.json"]
    capture = cv2.VideoCapture(str(run / "clip.mp4"))  # finished: playable, every frame done in it
    assert capture.isOpened() and int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 6
    capture.release()
    images = json.loads((run / "image_ids.json").read_text())
    assert [image["file_name"] for image in images] == [f"clip_{i}" for i in range(1, 7)]  # frames from 1
    detections = json.loads((run / "results.json").read_text())
    assert f"6 image(s)/frame(s), {len(detections)} detection(s)" in out, out


@pytest.mark.slow
def test_sigterm_during_image_detection_keeps_what_was_done(video_setup, tmp_path):
    """A folder of images stops after the image in progress (batch 1 on the CPU): the 6 done are saved, drawn and
    in results.json, and one line says so."""
    folder = tmp_path / "images"
    folder.mkdir()
    capture = cv2.VideoCapture(str(video_setup["video"]))
    for i in range(12):
        ok, frame = capture.read()
        assert ok
        cv2.imwrite(str(folder / f"shot_{i:02d}.png"), frame)
    capture.release()
    (tmp_path / "out").mkdir()
    proc, out, err = paused_detect(folder, video_setup["pt"], tmp_path / "out", signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert [line for line in err.splitlines() if "stopped" in line] == [
        "stopped (SIGTERM) after 6 image(s); what was done is saved"], err[-3000:]
    run = tmp_path / "out" / "run"
    assert sorted(p.name for p in run.glob("*.png")) == [f"shot_{i:02d}.png" for i in range(6)]
    images = json.loads((run / "image_ids.json").read_text())
    assert [Path(image["file_name"]).name for image in images] == [f"shot_{i:02d}.png" for i in range(6)]
    detections = json.loads((run / "results.json").read_text())
    assert f"6 image(s)/frame(s), {len(detections)} detection(s)" in out, out


# ------------------------------------------------------------------------------------------ torchrun
OUR_TRACEBACK = str(REPO / "yolo")  # a frame of ours in a traceback (torchrun prints its own on failures)


@pytest.mark.slow
def test_sigterm_under_torchrun_says_interrupted_once_and_saves(setup, tmp_path):
    proc, _ = interrupted_run(setup, tmp_path, "forward", 3, send_to_group(signal.SIGTERM), processes=2)
    err = proc.stderr_text
    assert err.count("interrupted (SIGTERM): saved") == 1, err[-3000:]
    assert OUR_TRACEBACK not in err and "killed by signal" not in err, err[-3000:]
    state = load_checkpoint_file(tmp_path / "run" / "last.pt")["train"]
    assert (state["epoch"], state["epoch_step"], state["global_step"]) == (1, 1, 3)


@pytest.mark.slow
def test_a_killed_rank_is_one_line_on_the_survivor(setup, tmp_path):
    proc, paused = interrupted_run(setup, tmp_path, "forward", 3, lambda pgid, paused: os.kill(paused["pid"],
                                                                                               signal.SIGKILL),
                                   processes=2)
    err = proc.stderr_text
    lines = [line for line in err.splitlines() if "another process of this distributed run is gone" in line]
    assert len(lines) == 1 and lines[0].startswith("error: process 0 of 2: "), err[-3000:]
    assert OUR_TRACEBACK not in err and "Connection" not in err.replace(lines[0], ""), err[-3000:]


# ------------------------------------------------------------------------------- tracebacks left
EVAL_DRIVER = """
import os, signal, sys, time
sys.path.insert(0, {repo!r})
import yolo.cli.eval as eval_cli

def interrupted(*args, **kwargs):  # Ctrl-C in the middle of the evaluation: a real SIGINT to this process
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)

eval_cli.evaluate_model = interrupted
eval_cli.cli(sys.argv[1:])
"""


@pytest.mark.slow
def test_ctrl_c_during_eval_is_one_line_and_leaves_no_empty_run_folder(tiny, train_setup):
    runs = train_setup / "runs"
    proc = subprocess.run([sys.executable, "-c", EVAL_DRIVER.format(repo=str(REPO)), "--weights", str(tiny[1]),
                           "--data", str(train_setup / "data.yaml"), "--device", "cpu", "--workers", "0",
                           "--project", str(runs), "--no-progress"],
                          capture_output=True, text=True, timeout=120, cwd=train_setup)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == "interrupted (Ctrl-C): stopped", proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr[-2000:]
    assert not runs.exists() or not any(runs.rglob("*")), sorted(runs.rglob("*"))
