"""What the GPU report can measure on this machine, and what it must skip and why.

Each probe is a small function so that a test can replace it (no CUDA, no ``nvcc``): :func:`probe` gathers
them into an :class:`Environment` whose ``skipped`` maps a part of the report to the reason it cannot run.
"""
from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

__all__ = ["Environment", "AssetFiles", "cuda_device", "nvcc_path", "cudnn_package_dirs", "find_assets", "probe",
           "missing_modules"]

# The parts of the report (keys of Environment.skipped).
OURS_DETECT, OURS_TRAIN, DARKNET = "ours: detection and step", "ours: end-to-end training", "Darknet GPU build"
# Modules the trainer imports (the detection and step figures need only PyTorch, torchvision and OpenCV).
TRAINER_MODULES = ("yaml", "pycocotools", "tqdm", "tensorboard")


@dataclass
class AssetFiles:
    """The files the report reads from the assets folder (None: missing)."""

    cfgs: Dict[str, Optional[Path]]  # "yolov3-tiny" -> cfg/yolov3-tiny.cfg
    weights: Dict[str, Optional[Path]]  # real weights where present (else random weights are used)
    names: Optional[Path]  # cfg/coco.names
    images: List[Path]  # coco128/images/train2017/*.jpg with a label file beside (labels/train2017/*.txt)
    missing: List[str] = field(default_factory=list)


@dataclass
class Environment:
    device: str  # "cuda" or "cpu": where ours runs
    gpu: Optional[str]  # the GPU's name
    capability: Optional[Tuple[int, int]]
    nvcc: Optional[Path]
    cudnn_dirs: List[Path]
    assets: AssetFiles
    skipped: Dict[str, str] = field(default_factory=dict)  # part -> why it is skipped

    def describe(self) -> str:
        """One line: the GPU (or its absence), torch, nvcc, cuDNN's package."""
        gpu = f"{self.gpu} (sm_{self.capability[0]}{self.capability[1]})" if self.gpu else "no CUDA GPU"
        return (f"{gpu}; torch {torch.__version__}; nvcc {self.nvcc or 'not found'}; "
                f"cuDNN package {self.cudnn_dirs[0] if self.cudnn_dirs else 'not found'}")


def cuda_device() -> Optional[Tuple[str, Tuple[int, int]]]:
    """The first CUDA GPU's name and compute capability, or None without CUDA."""
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0))


def nvcc_path() -> Optional[Path]:
    """``nvcc`` on the ``PATH`` (or in ``/usr/local/cuda/bin``), else None."""
    found = shutil.which("nvcc") or shutil.which("nvcc", path="/usr/local/cuda/bin")
    return Path(found) if found else None


def cudnn_package_dirs() -> List[Path]:
    """The folders of the ``nvidia`` Python packages (``nvidia/cudnn`` first, then ``nvidia/cu13``,
    ``nvidia/cublas``, ...), each with ``include``/``lib``; empty when ``nvidia.cudnn`` is not installed."""
    spec = importlib.util.find_spec("nvidia.cudnn") if importlib.util.find_spec("nvidia") else None
    if spec is None or not spec.submodule_search_locations:
        return []
    cudnn = Path(list(spec.submodule_search_locations)[0])
    others = sorted(p for p in cudnn.parent.iterdir() if p.is_dir() and p != cudnn and (p / "lib").is_dir())
    return [cudnn] + others


def missing_modules(names=TRAINER_MODULES) -> List[str]:
    """The modules of ``names`` that cannot be imported here."""
    return [n for n in names if importlib.util.find_spec(n) is None]


def find_assets(root: Path, models: Tuple[str, ...] = ("yolov3-tiny", "yolov3")) -> AssetFiles:
    """The cfgs, weights, class names and labelled coco128 images under ``root``; ``missing`` names each
    absent file or folder (relative to ``root``)."""
    cfgs = {m: root / "cfg" / f"{m}.cfg" for m in models}
    weights = {m: root / "weights" / f"{m}.weights" for m in models}
    names = root / "cfg" / "coco.names"
    image_dir, label_dir = root / "coco128" / "images" / "train2017", root / "coco128" / "labels" / "train2017"
    images = sorted(p for p in image_dir.glob("*.jpg") if (label_dir / f"{p.stem}.txt").is_file()) \
        if image_dir.is_dir() else []
    files = AssetFiles({m: p if p.is_file() else None for m, p in cfgs.items()},
                       {m: p if p.is_file() else None for m, p in weights.items()},
                       names if names.is_file() else None, images)
    files.missing = [str(p.relative_to(root)) for p in list(cfgs.values()) + [names] if not p.is_file()]
    if not images:
        files.missing.append(f"{image_dir.relative_to(root)} (jpg images with labels in {label_dir.relative_to(root)})")
    return files


def probe(assets_root: Path, darknet_src: Path, device: str = "auto",
          models: Tuple[str, ...] = ("yolov3-tiny", "yolov3")) -> Environment:
    """What can run: ours on CUDA (or on the CPU when ``device`` is "cpu"), Darknet's GPU build (CUDA, nvcc,
    make, cuDNN's package, the source), the trainer's modules, the assets of ``models``."""
    cuda = cuda_device()
    env = Environment(device="cuda" if cuda and device != "cpu" else "cpu", gpu=cuda[0] if cuda else None,
                      capability=cuda[1] if cuda else None, nvcc=nvcc_path(), cudnn_dirs=cudnn_package_dirs(),
                      assets=find_assets(assets_root, models))
    if env.assets.missing:
        reason = f"assets missing under {assets_root}: {', '.join(env.assets.missing)}"
        for part in (OURS_DETECT, OURS_TRAIN, DARKNET):
            env.skipped[part] = reason
    missing = missing_modules()
    if missing:
        env.skipped.setdefault(OURS_TRAIN, f"the trainer needs Python modules not installed: {', '.join(missing)}")
    needs = [why for ok, why in ((cuda, "no CUDA GPU"), (env.nvcc, "nvcc not found"),
                                 (shutil.which("make"), "make not found"),
                                 (env.cudnn_dirs, "cuDNN's Python package (nvidia.cudnn) not installed"),
                                 ((darknet_src / "Makefile").is_file(), f"no Darknet source at {darknet_src}"))
             if not ok]
    if needs:
        env.skipped.setdefault(DARKNET, "; ".join(needs))
    return env
