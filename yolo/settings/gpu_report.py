"""What ``tools/gpu_report.py`` takes: :class:`GpuReportOptions`, each setting declared once with its flag and
help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from yolo.ops.sizes import ImageSize
from yolo.settings.common import img_size_setting
from yolo.settings.declare import setting
from yolo.settings.values import non_negative_int, positive_float, positive_int

CLONE = Path(__file__).resolve().parents[2]  # the clone the report runs from, beside ../shared
MODELS = ("yolov3-tiny", "yolov3")
DEFAULT_SIDE = 416  # --img-size when not given


@dataclass
class GpuReportOptions:
    """The GPU report's settings: what to measure, for how long, and where Darknet's sources are."""

    assets: Optional[Path] = setting(
        None, "--assets", type=Path,
        help="assets folder with cfg/, weights/, coco128/ (default: $YOLO_ASSETS, else ../shared/assets)")
    darknet_src: Path = setting(CLONE.parent / "shared" / "darknet", "--darknet-src", type=Path,
                                help="Darknet's source folder (src/, include/, Makefile)")
    device: str = setting("auto", "--device", choices=["auto", "cuda", "cpu"],
                          help="auto/cuda: measure on the GPU (without one: say so and exit 0); cpu: ours on the CPU")
    models: Tuple[str, ...] = setting(MODELS, "--models", nargs="+", choices=MODELS,
                                      help="the cfgs to measure (from the assets' cfg/)")
    img_size: Optional[ImageSize] = img_size_setting(
        f"input side, a multiple of 32; the report runs square inputs, as Darknet's harness (default: {DEFAULT_SIDE})")
    batch_size: int = setting(64, "--batch-size", type=positive_int,
                              help="training batch and the large detection batch")
    subdivisions: Optional[int] = setting(None, "--subdivisions", type=positive_int,
                                          help="mini-batches per update (default: the cfg's training value, else 2)")
    updates: int = setting(10, "--updates", type=positive_int, help="timed training updates (ours and Darknet's)")
    warmup: int = setting(3, "--warmup", type=non_negative_int, help="untimed updates and rounds first")
    rounds: int = setting(20, "--rounds", type=positive_int, help="timed detection rounds at batch 1")
    workers: Optional[int] = setting(None, "--workers", type=non_negative_int,
                                     help="our loader's processes (default: the trainer's)")
    no_darknet: bool = setting(False, "--no-darknet", action="store_true",
                               help="skip Darknet's GPU build and its timings")
    build_dir: Optional[Path] = setting(None, "--build-dir", type=Path,
                                        help="build Darknet here and keep it (default: temporary)")
    quick: bool = setting(
        False, "--quick", action="store_true",
        help="a small run: yolov3-tiny at 64x64, batch 4, 2 timed updates, 8 images, 3 rounds (not with the flags "
             "it sets)")
    budget: float = setting(
        240.0, "--budget", type=positive_float(86400, "--budget"),
        help="seconds for the whole report, Darknet's build included: rounds and updates are shortened, or the "
             "least important measurements left out, to end within it")
    output: Optional[Path] = setting(
        None, "--output", type=Path,
        help="also write the figures (each as it is measured) and then the tables and notes to this file")


__all__ = ["CLONE", "DEFAULT_SIDE", "GpuReportOptions", "MODELS"]
