"""What ``tools/demo.py`` takes: :class:`DemoOptions`, each setting declared once with its flag and help.

Imports only the standard library and the settings' own modules.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from yolo.settings.declare import setting
from yolo.settings.values import non_negative_int, number, positive_int

REPO = Path(__file__).resolve().parents[2]  # the clone: configs/, and where runs/ and datasets/ go
# The held-out images are drawn for a look at the detections (about 30 KB and 20 ms each): more is a typo.
MAX_HELDOUT = 1000


@dataclass
class DemoOptions:
    """The demo's settings: the shapes run it trains, evaluates and draws."""

    cfg: str = setting(str(REPO / "configs" / "yolov3-tiny-shapes.cfg"), "--cfg", help="model cfg")
    data: str = setting(str(REPO / "configs" / "shapes.yaml"), "--data", help="dataset YAML")
    hyp: str = setting(str(REPO / "configs" / "hyp.shapes.yaml"), "--hyp", help="training settings")
    epochs: Optional[int] = setting(None, "--epochs", type=positive_int, help="default: the hyp file's (60)")
    device: str = setting("cpu", "--device", help="default: cpu")
    name: str = setting("shapes", "--name", help="run folder name under runs/train, runs/eval, runs/detect")
    heldout: int = setting(8, "--heldout", type=number(int, 1, MAX_HELDOUT, "the held-out image count"),
                           help=f"held-out images to draw detections on, 1 to {MAX_HELDOUT} (default: 8)")
    seed: int = setting(0, "--seed", type=non_negative_int,
                        help="training seed: initialization, data order and augmentation (default: 0)")


__all__ = ["DemoOptions", "MAX_HELDOUT", "REPO"]
