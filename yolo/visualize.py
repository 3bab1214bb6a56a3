"""Drawing detections on BGR images: one stable, distinct color per class, readable labels."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import cv2
import numpy as np
import torch

from yolo.errors import shown
from yolo.ops.boxes import clip_boxes

__all__ = ["class_color", "text_color_for", "draw_detections", "draw_box_uncertainty", "label_places"]

Color = Tuple[int, int, int]
# The most characters of a class name drawn on an image (OpenCV took 6 s to draw a 5,000,000-character one).
DRAWN_NAME_CHARS = 40


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
    track_ids: Optional[torch.Tensor] = None,
) -> np.ndarray:
    """Draw detections on a copy of ``image`` and return it.

    Args:
        image: BGR ``uint8`` ``H x W x 3``.
        boxes: ``Float[K, 4]`` xyxy in ``image`` pixels (clipped to the image; non-finite ones are skipped).
        scores: ``Float[K]``.
        labels: ``Int64[K]`` class indices into ``names``.
        names: class names (``None``: the class index is written).
        line_width: box thickness in pixels (default: scales with the image size).
        track_ids: ``Int64[K]`` (tracking): each id ``>= 0`` is written before the name (``#7 person 0.91``).
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
    texts = {}
    for i in np.flatnonzero(drawable):
        label = int(labels[i])
        name = names[label] if names is not None and 0 <= label < len(names) else str(label)
        track = int(track_ids[i]) if track_ids is not None else -1
        texts[i] = f"{f'#{track} ' if track >= 0 else ''}{shown(name, DRAWN_NAME_CHARS)} {scores[i]:.2f}"
    sizes = {i: _label_size(text, font_scale, font_thickness) for i, text in texts.items()}
    # Places chosen strongest first (the strongest label sits where it belongs). Every box is drawn before any
    # label, so no box line crosses a label (a stronger box's edge through a weaker label's digits misreads its
    # score); boxes and labels are each drawn weakest first, the strongest on top.
    order = [i for i in np.argsort(-scores, kind="stable") if drawable[i]]
    places = label_places([boxes[i] for i in order], [sizes[i] for i in order], (h, w))
    for i in reversed(order):
        x1, y1, x2, y2 = (int(round(v)) for v in boxes[i])
        cv2.rectangle(out, (x1, y1), (x2, y2), class_color(int(labels[i])), lw, cv2.LINE_AA)
    for i, (left, top) in reversed(list(zip(order, places))):
        color = class_color(int(labels[i]))
        (_, th), _ = cv2.getTextSize(texts[i], cv2.FONT_HERSHEY_SIMPLEX, font_scale, font_thickness)
        label_w, label_h = sizes[i]
        cv2.rectangle(out, (left, top), (left + label_w - 1, top + label_h - 1), color, -1)
        cv2.putText(out, texts[i], (left + 1, top + th + 1), cv2.FONT_HERSHEY_SIMPLEX, font_scale,
                    text_color_for(color), font_thickness, cv2.LINE_AA)
    return out


def _label_size(text: str, font_scale: float, thickness: int) -> Tuple[int, int]:
    """``(width, height)`` in pixels of a label's filled background: the text with a pixel or two of margin."""
    (tw, th), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, thickness)
    return tw + 3, th + baseline + 3


LABEL_MOVES = 6  # the most places inside its box a label tries before it stays where it belongs


def label_places(boxes: Sequence[Sequence[float]], sizes: Sequence[Tuple[int, int]],
                 image_hw: Tuple[int, int]) -> list:
    """The top-left corner ``(left, top)`` of each box's label, in the order given (the first keeps its place).

    A label (``sizes``: ``(width, height)`` in pixels) sits above its xyxy box, its bottom row on the box's top
    edge (just inside the box where there is no room above), its left edge at the box's, kept inside the image.
    When it would cover a label placed before (boxes sharing a corner), it moves into the box a label's height at
    a time, up to :data:`LABEL_MOVES` times, until it covers none; where no place is free, the usual one.
    """
    h, w = image_hw
    placed: list = []
    for (x1, y1, _, y2), (label_w, label_h) in zip(boxes, sizes):
        x1, y1, y2 = int(round(x1)), int(round(y1)), int(round(y2))
        left = min(max(x1, 0), max(w - label_w + 1, 0))
        usual = y1 - label_h + 1 if y1 - label_h + 1 >= 0 else y1
        inside = [t for t in range(max(y1, 0), max(y2, y1) - label_h + 1, label_h) if t != usual]
        tops = [usual] + inside[:LABEL_MOVES]  # bounded: a crowded frame is still drawn at once
        top = next((t for t in tops if 0 <= t <= h - label_h
                    and not any(_overlap((left, t, label_w, label_h), other) for other in placed)), usual)
        placed.append((left, top, label_w, label_h))
    return [(left, top) for left, top, _, _ in placed]


def _overlap(a: Tuple[int, int, int, int], b: Tuple[int, int, int, int]) -> bool:
    """Whether two ``(left, top, width, height)`` rectangles share any pixel."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


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
