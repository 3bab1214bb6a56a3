"""Helpers that several test modules share: running a command-line tool as a user does (or the export tool in this
process), expecting its one-line error, Darknet's letterbox written out independently of the package, and ground
truth for the Evaluator, detections compared across devices and precisions, random but well-scaled weights
for a model (no OpenCV needed: the OpenCV reference is tests/reference.py), a fake clock, the trainer's step
runner for a model alone on the CPU, a FIFO whose writer comes late, files that fill a disk (noise JPEGs) and a
small tmpfs to fill, a path's other spellings (links), a cfg with random .weights, weights/download.sh run
offline and a clock that ticks on every reading."""
from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Optional, Tuple

import cv2
import numpy as np
import pytest
import torch
import torchvision
import yaml

from yolo.engine.parts import RunPlan, TrainingParts
from yolo.engine.stop import StopRequest
from yolo.engine.train_state import TrainState
from yolo.engine.update_step import StepRunner

REPO = Path(__file__).resolve().parent.parent


def console_scripts() -> dict:
    """``{command: "module:function"}`` of every console script ``setup.py`` declares: the file run with a stand-in
    ``setuptools`` that keeps what ``setup()`` is given (so a change shows without reinstalling, with or without
    setuptools installed)."""
    import runpy
    import types
    from unittest import mock

    given: dict = {}
    stand_in = types.ModuleType("setuptools")
    stand_in.setup = lambda **arguments: given.update(arguments)
    stand_in.find_packages = lambda *args, **kwargs: []
    with mock.patch.dict(sys.modules, {"setuptools": stand_in}):
        runpy.run_path(str(REPO / "setup.py"))
    lines = given["entry_points"]["console_scripts"]
    return dict(tuple(part.strip() for part in line.split("=")) for line in lines)


def tool_parser(tool: str):
    """The argparse parser of ``tools/TOOL.py`` (built by ``yolo.cli.flags.TOOL``)."""
    return importlib.import_module(f"yolo.cli.flags.{tool}").build_parser()


def run_tool(name: str, *args, **options) -> subprocess.CompletedProcess:
    """``python tools/<name>.py ARGS`` in a fresh process, output captured as text; ``options`` go to
    :func:`subprocess.run` (default ``cwd`` the repository, ``timeout`` 300 s)."""
    options = {"capture_output": True, "text": True, "cwd": REPO, "timeout": 300, **options}
    return subprocess.run([sys.executable, str(REPO / "tools" / f"{name}.py"), *map(str, args)], **options)


def torchrun_train(folder: Path, cfg: Path, data: Path, hyp: dict, device: str, epochs: int,
                   processes: int = 2) -> subprocess.CompletedProcess:
    """``tools/train.py`` under ``torch.distributed.run`` with ``processes`` ranks, batch 8, into ``folder/ddp``
    (``hyp`` written to ``folder/hyp.yaml``); output captured as text, one thread per rank."""
    hyp_file = folder / "hyp.yaml"
    hyp_file.write_text(yaml.safe_dump(hyp))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
           str(REPO / "tools" / "train.py"), "--cfg", str(cfg), "--data", str(data), "--hyp", str(hyp_file),
           "--batch-size", "8", "--epochs", str(epochs), "--device", device, "--project", str(folder),
           "--name", "ddp", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def run_export_cli(argv):
    """``tools/export.py ARGV`` in this process (its ``main``, its result returned); paths and numbers in ``argv``
    are turned into text."""
    from yolo.cli.export import main, parse_args
    return main(parse_args([str(a) for a in argv]))


def one_line_error(capsys, run) -> str:
    """Run ``run()``, expect SystemExit(2) and exactly one stderr line starting with ``error:``."""
    with pytest.raises(SystemExit) as exit_info:
        run()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def anchors_error(capsys, *argv) -> str:
    """``tools/anchors.py ARGV`` in this process, expecting its one-line error (returned); paths and numbers in
    ``argv`` are turned into text."""
    from yolo.cli import anchors as anchors_cli
    return one_line_error(capsys, lambda: anchors_cli.main(anchors_cli.parse_args([str(a) for a in argv])))


def darknet_letterbox(image: np.ndarray, net_hw: Tuple[int, int]) -> Tuple[np.ndarray, Tuple[float, float, int, int]]:
    """Darknet's ``letterbox_image`` geometry (src/image.c, integer arithmetic) on a ``uint8`` image, gray 128
    border; written here, independent of :mod:`yolo.ops.letterbox`.

    Returns ``(canvas, (scale_x, scale_y, pad_x, pad_y))``: the ``net_h x net_w x 3`` input and the placement.
    """
    h, w = image.shape[:2]
    net_h, net_w = net_hw
    if net_w / w < net_h / h:
        new_w, new_h = net_w, (h * net_w) // w
    else:
        new_w, new_h = (w * net_h) // h, net_h
    canvas = np.full((net_h, net_w, 3), 128, np.uint8)
    dx, dy = (net_w - new_w) // 2, (net_h - new_h) // 2
    canvas[dy:dy + new_h, dx:dx + new_w] = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    return canvas, (new_w / w, new_h / h, dx, dy)


def make_gt(image_id, boxes, labels, hw=(480, 640)):
    """One image's ground truth as the Evaluator takes it: xyxy ``boxes`` and ``labels`` as tensors."""
    return {"image_id": image_id, "file_name": f"{image_id}.jpg", "height": hw[0], "width": hw[1],
            "boxes": torch.as_tensor(np.asarray(boxes, dtype=np.float32).reshape(-1, 4)),
            "labels": torch.as_tensor(np.asarray(labels, dtype=np.int64).reshape(-1))}


def assert_same_detections(got, expected, iou_min: float, score_tol: float, margin: float, conf: float):
    """Every detection of ``expected`` scored clear of the threshold (by ``margin``) has one in ``got`` of the
    same class, IoU >= ``iou_min`` and score within ``score_tol``, and the other way round."""
    assert len(got) == len(expected)
    for a, b in ((got, expected), (expected, got)):
        for da, db in zip(a, b):
            clear = da["scores"] > conf + margin
            if not clear.any():
                continue
            assert len(db["boxes"]), "detections missing"
            iou = torchvision.ops.box_iou(da["boxes"][clear], db["boxes"])
            same = da["labels"][clear, None] == db["labels"][None]
            best = torch.where(same, iou, torch.zeros_like(iou)).max(1)
            assert best.values.min().item() >= iou_min
            scores = db["scores"][best.indices]
            assert (scores - da["scores"][clear]).abs().max().item() <= score_tol


@contextlib.contextmanager
def without_default_init():
    """Modules built inside skip torch's random initialisation of conv and linear weights (their values are left
    as allocated): only for models whose every parameter is then set, by a ``.weights`` file or by a randomizer
    that sets them all. torch's ``kaiming_uniform_`` took a quarter of the time of building and comparing every
    cfg of Darknet's folder."""
    classes = (torch.nn.modules.conv._ConvNd, torch.nn.Linear)
    saved = [(cls, cls.__dict__["reset_parameters"]) for cls in classes]
    for cls in classes:
        cls.reset_parameters = lambda self: None
    try:
        yield
    finally:
        for cls, method in saved:
            cls.reset_parameters = method


def randomize_model(model, seed: int = 0, calibrate_hw=(96, 96)) -> None:
    """Give ``model`` random but well-scaled weights: random conv weights, random BN affine terms and
    running statistics taken from a forward pass, so activations neither vanish nor explode."""
    g = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / fan_in ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
        for bn in bns:
            bn.weight.copy_(0.5 + torch.rand(bn.weight.shape, generator=g))
            bn.bias.copy_((torch.rand(bn.bias.shape, generator=g) - 0.5) * 0.4)
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average: one pass sets the stats
        # Small gamma on the last conv of each residual branch, so that 20+ shortcuts do not
        # grow activations without bound (trained networks behave the same way).
        from yolo.models.layer_types.shortcut import Shortcut
        for i, module in enumerate(model.module_list):
            prev = model.module_list[i - 1]
            if isinstance(module, Shortcut) and getattr(prev, "bn", None) is not None:
                prev.bn.weight.mul_(0.2)
        model.train()
        model(torch.rand(2, model.input_channels, *calibrate_hw, generator=g))
        for bn in bns:
            bn.momentum = 0.01
        # Damp the convs that feed a head so that exp(tw) stays in a realistic range.
        for i, module in enumerate(model.module_list):
            if i + 1 < len(model.module_list) and model.module_list[i + 1] in model.yolo_layers \
                    and hasattr(module, "conv"):
                module.conv.weight.mul_(0.3)
    model.eval()


class FakeClock:
    """A ``time.perf_counter`` / ``time.monotonic`` stand-in that moves only when told (:meth:`spend`, in
    milliseconds, or :meth:`spend_s`), so that what is timed is known exactly."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, ms: float) -> None:
        self.now += ms / 1e3

    def spend_s(self, seconds: float) -> None:
        self.now += seconds


def write_mjpg_video(path: Path, frames, fps: float) -> Path:
    """Write ``frames`` (``uint8[H, W, 3]`` BGR, all one size) as an MJPG ``.avi`` at ``fps``; returns ``path``."""
    frames = list(frames)
    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
    for frame in frames:
        writer.write(frame)
    writer.release()
    return path


def cpu_step_runner(model, optimizer, schedule: Callable[[int], float], criterion: Optional[Callable] = None, *,
                    accumulate: int = 1, steps_per_epoch: int = 1, state: Optional[TrainState] = None,
                    **fields) -> StepRunner:
    """The trainer's :class:`StepRunner` for ``model`` and ``optimizer`` alone: one process on the CPU, one epoch of
    ``steps_per_epoch`` updates of ``accumulate`` mini-batches, no batches (the test feeds the step), a fresh
    :class:`TrainState` unless ``state`` is given, no stop asked; ``fields`` are the other fields of its
    :class:`TrainingParts` (``hyp``, ``precision``, ``scaler``, ``forward``, ...)."""
    parts = TrainingParts(model=model, optimizer=optimizer, schedule=schedule, criterion=criterion,
                          batches=lambda epoch, first: iter(()),
                          plan=RunPlan(epochs=1, steps_per_epoch=steps_per_epoch, accumulate=accumulate), **fields)
    return StepRunner(parts, state if state is not None else TrainState(), StopRequest())


def fifo_with_a_late_writer(path: Path, text: str) -> Callable[[], None]:
    """A FIFO at ``path`` and a thread that writes ``text`` into it once a reader opens it (so that a reader that
    should never have opened it gets ``text`` instead of hanging the test); returns a function that ends it."""
    import threading

    os.mkfifo(path)
    writer = threading.Thread(target=lambda: path.write_text(text), daemon=True)
    writer.start()

    def end():
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # lets a writer still waiting open, write and close
        writer.join(timeout=10)
        os.close(fd)
    return end


def in_fresh_process(code: str, *args, timeout: float = 600) -> Tuple[object, str]:
    """Run ``code`` (Python; it gets ``args`` as text in ``sys.argv[1:]`` and prints a JSON value as its last line)
    in a new interpreter with the repository importable; returns that value and everything it printed before.

    For what must not live in the test process: NNCF's quantization leaves the process in a state in which a later
    test's subprocess call was killed by SIGSEGV (seen three times, always after an in-process INT8 run)."""
    import json

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    run = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    *before, last = run.stdout.rstrip("\n").split("\n")
    return json.loads(last), "\n".join(before)


def noisy_images(folder: Path, count: int, side: int = 320) -> Path:
    """``count`` JPEG files of random noise (about 100 kB each at 320 px: they do not compress) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        cv2.imwrite(str(folder / f"img{i}.jpg"), rng.integers(0, 256, (side, side, 3), dtype=np.uint8))
    return folder


def detect_command(tiny, source: Path, output: Path, *extra) -> Callable[[], object]:
    """``tools/detect.py`` of the ``tiny`` fixture's checkpoint on ``source`` into ``output`` (64 px, CPU, every
    kind of output saved), as a call to run in this process."""
    from yolo.cli import detect

    cfg, pt, _ = tiny
    return lambda: detect.cli(["--weights", str(pt), "--source", str(source), "--output", str(output),
                               "--device", "cpu", "--img-size", "64", "--conf-thres", "0.0", "--max-det", "5",
                               "--save-txt", "--save-json", "--no-progress", *extra])


def mounted(path: Path, options: str) -> Callable[[], object]:
    """Mount a tmpfs at ``path`` with ``options`` (``size=300k``, ``ro``); skip the test when the machine
    refuses (not root, or a container without the capability). Returns the unmount function."""
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({(proc.stderr or proc.stdout).strip() or 'mount failed'}): "
                    "the monkeypatched tests cover the same logic")
    return lambda: subprocess.run(["umount", "-l", str(path)], capture_output=True)


def other_spellings(path: Path, tmp_path: Path) -> list:
    """``path`` itself, spelled another way, through a symbolic link and through a hard link."""
    other = tmp_path / "sub"
    other.mkdir(exist_ok=True)
    symlink, hardlink = other / f"sym{path.suffix}", other / f"hard{path.suffix}"
    symlink.symlink_to(path)
    os.link(path, hardlink)
    return [path, other / ".." / path.name, symlink, hardlink]


def model_files(folder: Path, text: str, name: str) -> Tuple[Path, Path]:
    """``name.cfg`` holding ``text`` and ``name.weights`` of the model with random weights (seed 0)."""
    from yolo.models.model import Darknet

    torch.manual_seed(0)
    cfg = folder / f"{name}.cfg"
    cfg.write_text(text)
    weights = folder / f"{name}.weights"
    Darknet(cfg).save_darknet_weights(weights)
    return cfg, weights


# Stands in for curl: ``curl ... -o FILE URL`` writes URL into FILE, so a run shows what went where, offline.
FAKE_CURL = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in -o) out="$2"; shift 2 ;; -*) shift ;; *) url="$1"; shift ;; esac
done
echo "$url" > "$out"
"""


def run_download_script(tmp_path: Path, *names: str) -> Path:
    """weights/download.sh NAMES in a copy of weights/, curl replaced by FAKE_CURL (no network); the folder."""
    import shutil

    folder = tmp_path / "weights"
    folder.mkdir()
    shutil.copy(REPO / "weights" / "download.sh", folder / "download.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(FAKE_CURL)
    (bin_dir / "curl").chmod(0o755)
    for tool in ("dirname", "mv", "sh"):  # no md5sum: the fake files are URLs, not the real weights
        os.symlink(shutil.which(tool), bin_dir / tool)
    done = subprocess.run([shutil.which("bash"), str(folder / "download.sh"), *names], capture_output=True,
                          text=True, env={"PATH": str(bin_dir)}, timeout=60)
    assert done.returncode == 0, done.stderr
    return folder


def ticking_clock(start: float = 0.0, tick: float = 1.0) -> Callable[[], float]:
    """A clock whose every reading is ``tick`` seconds after the previous one."""
    from itertools import count

    readings = count()
    return lambda: start + tick * next(readings)
