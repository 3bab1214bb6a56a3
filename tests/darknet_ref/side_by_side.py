"""Train the same cfg from the same weights on the same images with Darknet's own CLI and with our trainer,
then evaluate both with tools/eval.py on held-out images that neither saw in training (``tools/compare_darknet.py``;
its flags and what it runs: :mod:`darknet_ref.side_by_side_flags`).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple


import yaml

from darknet_ref import CUDA_TRAINING, build_reference  # the cached builds the reference tests use
from darknet_ref.side_by_side_flags import parse_args
from yolo.cli.args import fail
from yolo.data.dataset import find_label_file
from yolo.errors import CfgError, ConfigError, DataError
from yolo.files.images import DATASET_IMAGE_SUFFIXES as IMAGE_SUFFIXES
from yolo.files.names import read_names as read_names_file
from yolo.models.cfg import parse_cfg, sections_to_text
from yolo.models.model import load_model
from yolo.ops.sizes import check_stride

REPO = Path(__file__).resolve().parents[2]


def read_names(path: str) -> List[str]:
    """Class names from a .names file (one a line) or a dataset YAML's ``names``; a missing or unusable file is
    an error naming it (FileNotFoundError, DataError)."""
    if not path.endswith((".yaml", ".yml")):
        return read_names_file(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: names file not found") from None
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    names = data.get("names") if isinstance(data, dict) else None
    if isinstance(names, dict):  # {0: person, 1: bicycle, ...}
        names = [names[k] for k in sorted(names)]
    if not isinstance(names, list) or not names:
        raise DataError(f"{path}: no 'names' list of class names")
    return [str(name) for name in names]


def list_images(folder: str, flag: str) -> List[Path]:
    """The images in ``folder`` (sorted by name); an error naming ``flag`` when it is not a folder or holds none."""
    path = Path(folder).resolve()
    if not path.is_dir():
        fail(f"{flag} {folder}: no such folder")
    images = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        fail(f"{flag} {folder}: no images in this folder (looked for {', '.join(sorted(IMAGE_SUFFIXES))})")
    return images


def checked_inputs(args: argparse.Namespace) -> Tuple[List[Path], List[Path], List[str]]:
    """The training images, the held-out images and the class names, after checking the cfg, the input size
    against its stride and the names file: a bad one is one ``error:`` line before any run starts."""
    try:
        stride = load_model(args.cfg).stride
        check_stride((args.img_size, args.img_size), stride, "--img-size")
        names = read_names(args.names)
    except (CfgError, ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    if args.weights and not Path(args.weights).is_file():
        fail(f"{args.weights}: weights not found")
    images = list_images(args.images, "--images")
    if args.val_images:
        return images[:args.train or len(images)], list_images(args.val_images, "--val-images"), names
    if not 0 < args.train < len(images):
        fail(f"--train {args.train} must leave images to evaluate ({len(images)} found in {args.images})")
    return images[:args.train], images[args.train:], names


def darknet_image_list(images: List[Path], folder: Path) -> Path:
    """A list file for Darknet, whose label lookup knows only a few folder names (``images/train2017`` ->
    ``labels/train2017``, else ``name.txt`` beside the image): each image and its label file are linked
    side by side into ``folder`` (an empty one for an image without labels, a background image to both sides).
    Returns the list file's path."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for image in images:
        label, link = find_label_file(image), (folder / image.name).with_suffix(".txt")
        (folder / image.name).symlink_to(image)
        if label is None:
            link.write_text("")
        else:
            link.symlink_to(label.resolve())
    listing = folder.with_suffix(".txt")
    listing.write_text("".join(f"{folder / image.name}\n" for image in images))
    return listing


def training_cfg(cfg: str, args: argparse.Namespace, updates: int) -> str:
    """The cfg with [net] set for the comparison: batch, size, a constant rate after ``--burn-in``,
    max_batches = ``updates``."""
    sections = parse_cfg(cfg)
    net = sections[0]
    net.options.update({"batch": str(args.batch), "subdivisions": str(args.subdivisions),
                        "width": str(args.img_size), "height": str(args.img_size),
                        "learning_rate": str(args.lr), "burn_in": str(args.burn_in), "policy": "constant",
                        "max_batches": str(updates)})
    for key in ("steps", "scales"):
        net.options.pop(key, None)
    return sections_to_text(sections)


def build_darknet(training: str) -> Path:
    """The Darknet CLI from ../shared/darknet, built once by the test harness' cached build; ``training``
    "cuda": with the patches that make its CPU training code do what its CUDA path does."""
    return build_reference(patches=CUDA_TRAINING if training == "cuda" else ()).folder / "darknet"


def run_logged(cmd: List[str], log: Path, cwd: Optional[Path] = None, env: Optional[Dict[str, str]] = None) -> float:
    """Run ``cmd`` with output to ``log``; returns the wall-clock seconds; exits on failure."""
    start = time.perf_counter()
    with open(log, "w") as f:
        code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"error: {' '.join(map(str, cmd[:4]))} ... failed with exit {code}; see {log}")
    return seconds


def evaluate(cfg: Path, weights: Path, data_yaml: Path, args: argparse.Namespace, log: Path) -> Dict[str, float]:
    out = log.with_suffix("")
    shutil.rmtree(out, ignore_errors=True)
    run_logged([sys.executable, str(REPO / "tools" / "eval.py"), "--cfg", str(cfg), "--weights", str(weights),
                "--data", str(data_yaml), "--img-size", str(args.img_size), "--resize", "stretch", "--save-dir", str(out),
                "--no-plots", "--no-progress"], log)
    metrics = json.loads((out / "metrics.json").read_text())
    return {"mAP50": float(metrics["mAP50"]), "mAP50_95": float(metrics["mAP50_95"])}


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    train_images, val_images, names = checked_inputs(args)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.txt").write_text("".join(f"{p}\n" for p in train_images))
    (out / "val.txt").write_text("".join(f"{p}\n" for p in val_images))
    (out / "classes.names").write_text("".join(f"{n}\n" for n in names))
    updates = args.epochs * (len(train_images) // args.batch)  # our loader drops an incomplete last batch
    cfg = out / "train.cfg"
    cfg.write_text(training_cfg(args.cfg, args, updates))
    for split in ("train", "val"):
        (out / f"{split}.yaml").write_text(yaml.safe_dump({"path": str(out), "train": "train.txt", "val": f"{split}.txt",
                                                            "names": names}))
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    seen = updates * args.batch
    rows: Dict[str, Dict[str, float]] = {}

    if "darknet" not in args.skip:
        darknet = Path(args.darknet) if args.darknet else build_darknet(args.darknet_training)
        backup = out / "darknet_backup"
        shutil.rmtree(backup, ignore_errors=True)
        backup.mkdir()
        darknet_train = darknet_image_list(train_images, out / "darknet_images")
        (out / "darknet.data").write_text(f"classes={len(names)}\ntrain={darknet_train}\nvalid={out / 'val.txt'}\n"
                                         f"names={out / 'classes.names'}\nbackup={backup}\n")
        cmd = [str(darknet), "detector", "train", str(out / "darknet.data"), str(cfg)]
        cmd += [args.weights] if args.weights else []
        seconds = run_logged(cmd + ["-dont_show", "-clear"], out / "darknet_train.log", cwd=out, env=env)
        if "Can't open label file" in (out / "darknet_train.log").read_text(errors="replace"):
            raise SystemExit(f"error: Darknet did not find some label files; see {out / 'darknet_train.log'}")
        label = f"Darknet ({args.darknet_training})"
        rows[label] = {**evaluate(cfg, backup / "train_final.weights", out / "val.yaml", args, out / "darknet_eval.log"),
                       "images_per_s": seen / seconds}

    exact = {"ema": False, "head_prior": False}
    improved = yaml.safe_load(Path(args.improved_hyp).read_text()) if args.improved_hyp else {"ema": True,
                                                                                               "head_prior": True}
    runs = [("exact", "ours, Darknet-exact", exact), ("improved", "ours, improved", improved)]
    for key, label, hyp in runs:
        if key in args.skip:
            continue
        hyp = {**hyp, "eval_interval": args.epochs}  # evaluate once, at the end: images/s is training alone
        name = f"ours_{key}"
        shutil.rmtree(out / name, ignore_errors=True)
        cmd = [sys.executable, str(REPO / "tools" / "train.py"), "--cfg", str(cfg), "--data", str(out / "train.yaml"),
               "--batch-size", str(args.batch), "--img-size", str(args.img_size), "--device", "cpu",
               "--epochs", str(args.epochs), "--project", str(out), "--name", name, "--no-progress",
               "--seed", str(args.seed)]
        cmd += ["--weights", args.weights] if args.weights else []
        (out / f"{name}_hyp.yaml").write_text(yaml.safe_dump(hyp))
        cmd += ["--hyp", str(out / f"{name}_hyp.yaml")]
        seconds = run_logged(cmd, out / f"{name}_train.log", env=env)
        weights = out / name / "last.pt"
        rows[label] = {**evaluate(cfg, weights, out / "val.yaml", args, out / f"{name}_eval.log"),
                       "images_per_s": seen / seconds}

    print(f"{'run':<22} {'mAP@0.5':>8} {'mAP@0.5:0.95':>13} {'images/s':>9}")
    for label, row in rows.items():
        print(f"{label:<22} {row['mAP50']:8.4f} {row['mAP50_95']:13.4f} {row['images_per_s']:9.2f}")
    (out / "comparison.json").write_text(json.dumps({"args": vars(args), "results": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
