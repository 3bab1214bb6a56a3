"""What ``tools/demo.py`` takes: :class:`DemoOptions`, each setting declared once with its flag and help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from yolo.settings.declare import setting
from yolo.settings.values import non_negative_int, positive_int

REPO = Path(__file__).resolve().parents[2]  # the clone: configs/, and where runs/ and datasets/ go


@dataclass
class DemoOptions:
    """The demo's settings: the shapes run it trains, evaluates and draws."""

    cfg: str = setting(str(REPO / "configs" / "yolov3-tiny-shapes.cfg"), "--cfg", help="model cfg")
    data: str = setting(str(REPO / "configs" / "shapes.yaml"), "--data", help="dataset YAML")
    hyp: str = setting(str(REPO / "configs" / "hyp.shapes.yaml"), "--hyp", help="training settings")
    epochs: Optional[int] = setting(None, "--epochs", type=positive_int, help="default: the hyp file's (60)")
    device: str = setting("cpu", "--device", help="default: cpu")
    name: str = setting("shapes", "--name", help="run folder name under runs/train, runs/eval, runs/detect")
    heldout: int = setting(8, "--heldout", type=positive_int,
                           help="held-out images to draw detections on (default: 8)")
    seed: int = setting(0, "--seed", type=non_negative_int,
                        help="training seed: initialization, data order and augmentation (default: 0)")


__all__ = ["DemoOptions", "REPO"]
