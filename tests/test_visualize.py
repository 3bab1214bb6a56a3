"""Drawing detections (yolo/visualize.py): what a label shows is what was detected."""
import cv2
import numpy as np
import torch

from yolo.visualize import class_color, draw_detections, label_places


def test_no_box_line_crosses_a_label():
    """A weak detection's label (``horse 0.28``) under the left edge of a stronger box: the edge, drawn after the
    label, turned a digit into another (``0.23``, below the threshold). Every box is drawn before any label now,
    so the label's rectangle holds its own colour and its text only, no pixel of the other box's colour."""
    image = np.zeros((320, 480, 3), np.uint8)
    boxes = torch.tensor([[180.0, 150.0, 260.0, 250.0], [200.0, 50.0, 400.0, 300.0]])  # weak, strong
    scores, labels = torch.tensor([0.275, 0.9]), torch.tensor([0, 1])
    drawn = draw_detections(image, boxes, scores, labels, ["horse", "person"], line_width=2)
    # the weak label's rectangle, by the drawing's own placement rule (strongest first) and its font
    sizes = []
    for text in ("person 0.90", "horse 0.28"):
        (tw, th), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, 2 / 3, 1)
        sizes.append((tw + 3, th + baseline + 3))
    (_, (left, top)) = label_places([boxes[1].tolist(), boxes[0].tolist()], sizes, image.shape[:2])
    width, height = sizes[1]
    assert left <= 200 < left + width  # the strong box's left edge runs through the weak label's columns
    patch = drawn[top:top + height, left:left + width].reshape(-1, 3)
    strong = (patch == np.array(class_color(1), np.uint8)).all(1).sum()
    assert strong == 0, f"{strong} pixels of the stronger box's line inside the weaker box's label"
    assert (patch == np.array(class_color(0), np.uint8)).all(1).mean() > 0.5  # its own background
    # the strong box's edge is drawn below and above the label all the same
    assert (drawn[top + height + 5, 199:202] == np.array(class_color(1), np.uint8)).all(1).any()
