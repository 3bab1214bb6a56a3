"""Drawing detections on BGR images: one stable, distinct color per class, readable labels."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import cv2
import numpy as np
import torch

from yolo.ops.boxes import clip_boxes

__all__ = ["class_color", "text_color_for", "draw_detections", "draw_box_uncertainty"]

Color = Tuple[int, int, int]


# 20 well-separated colors (RGB hex), in an order where neighbours differ strongly in hue and lightness.
_PALETTE_HEX = (
    "e6194b", "3cb44b", "4363d8", "f58231", "911eb4", "42d4f4", "f032e6", "bfef45", "fabed4", "469990",
    "ffe119", "9a6324", "800000", "aaffc3", "808000", "000075", "dcbeff", "ff6f61", "a9a9a9", "00a86b",
)
_PALETTE_BGR = tuple((int(h[4:6], 16), int(h[2:4], 16), int(h[0:2], 16)) for h in _PALETTE_HEX)


def class_color(label: int) -> Color:
    """A stable BGR color for class ``label`` from a 20-color high-contrast palette."""
    return _PALETTE_BGR[int(label) % len(_PALETTE_BGR)]


def text_color_for(background: Color) -> Color:
    """Black or white, whichever reads better on a BGR ``background`` (relative luminance)."""
    b, g, r = background
    luminance = 0.299 * r + 0.587 * g + 0.114 * b
    return (0, 0, 0) if luminance > 140 else (255, 255, 255)


def draw_detections(
    image: np.ndarray,
    boxes: torch.Tensor,
    scores: torch.Tensor,
    labels: torch.Tensor,
    names: Optional[Sequence[str]] = None,
    line_width: Optional[int] = None,
) -> np.ndarray:
    """Draw detections on a copy of ``image`` and return it.

    Args:
        image: BGR ``uint8`` ``H x W x 3``.
        boxes: ``Float[K, 4]`` xyxy in ``image`` pixels (clipped to the image; non-finite ones are skipped).
        scores: ``Float[K]``.
        labels: ``Int64[K]`` class indices into ``names``.
        names: class names (``None``: the class index is written).
        line_width: box thickness in pixels (default: scales with the image size).
    """
    out = np.ascontiguousarray(image.copy())
    h, w = out.shape[:2]
    lw = line_width or max(1, round((h + w) / 2 * 0.003))
    font_scale = max(0.4, lw / 3)
    font_thickness = max(1, lw - 1)
    # Clipped to the image as detection clips them: a diverging model's box (1e9 pixels) does not fit
    # OpenCV's 32-bit coordinates; a box that is not finite is not drawn.
    boxes = clip_boxes(boxes.detach().float().cpu(), (h, w)).numpy()
    scores = scores.detach().float().cpu().numpy()
    labels = labels.detach().cpu().numpy()
    drawable = np.isfinite(boxes).all(axis=1) & np.isfinite(scores)
    # Draw the weakest first so the strongest labels end up on top.
    for i in np.argsort(scores, kind="stable"):
        if not drawable[i]:
            continue
        label = int(labels[i])
        color = class_color(label)
        x1, y1, x2, y2 = (int(round(v)) for v in boxes[i])
        cv2.rectangle(out, (x1, y1), (x2, y2), color, lw, cv2.LINE_AA)
        name = names[label] if names is not None and 0 <= label < len(names) else str(label)
        text = f"{name} {scores[i]:.2f}"
        (tw, th), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, font_thickness)
        # Label above the box when there is room, else just inside it.
        top = y1 - th - baseline - 2 if y1 - th - baseline - 2 >= 0 else y1
        left = min(max(x1, 0), max(w - tw - 2, 0))
        cv2.rectangle(out, (left, top), (left + tw + 2, top + th + baseline + 2), color, -1)
        cv2.putText(out, text, (left + 1, top + th + 1), cv2.FONT_HERSHEY_SIMPLEX, font_scale,
                    text_color_for(color), font_thickness, cv2.LINE_AA)
    return out


def draw_box_uncertainty(image: np.ndarray, boxes: torch.Tensor, labels: torch.Tensor,
                         sigmas: torch.Tensor) -> np.ndarray:
    """Write ``unc S`` (S: the mean of a box's four uncertainties, 0..1, the quantity Darknet's Gaussian
    YOLOv3 score discounts) in the bottom-left corner of each xyxy box, in the box's colour, on ``image``."""
    h, w = image.shape[:2]
    scale = max(0.35, (h + w) / 2 * 0.0008)
    for (x1, _, _, y2), label, sigma in zip(clip_boxes(boxes.detach().float().cpu(), (h, w)).tolist(),
                                             labels.tolist(), sigmas.mean(1).tolist()):
        if not np.isfinite([x1, y2, sigma]).all():
            continue
        org = (int(min(max(x1 + 2, 0), w - 1)), int(min(max(y2 - 4, 0), h - 1)))
        cv2.putText(image, f"unc {sigma:.2f}", org, cv2.FONT_HERSHEY_SIMPLEX, scale, class_color(int(label)), 1,
                    cv2.LINE_AA)
    return image
