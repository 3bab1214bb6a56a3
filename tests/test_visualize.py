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


# ---------------------------------------------------------------------------------------------- drawings
def test_labels_of_boxes_sharing_a_corner_do_not_cover_each_other():
    """Two boxes with the same top-left corner: each label's background keeps its class colour in the drawing
    (before, the stronger label was drawn over the weaker one)."""
    from yolo.visualize import class_color, draw_detections, label_places

    image = np.zeros((240, 320, 3), np.uint8)
    boxes = torch.tensor([[60.0, 80.0, 200.0, 220.0], [60.0, 80.0, 160.0, 180.0]])
    scores, labels = torch.tensor([0.9, 0.6]), torch.tensor([0, 1])
    drawn = draw_detections(image, boxes, scores, labels, ["person", "dog"], line_width=2)
    # where the labels went, by the drawing's own rule; checked against the pixels below
    font_scale, thickness = 2 / 3, 1
    import cv2
    sizes = []
    for text in ("person 0.90", "dog 0.60"):
        (tw, th), baseline = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, thickness)
        sizes.append((tw + 3, th + baseline + 3))
    places = label_places(boxes.tolist(), sizes, image.shape[:2])
    rects = [(left, top, w, h) for (left, top), (w, h) in zip(places, sizes)]
    (l0, t0, w0, h0), (l1, t1, w1, h1) = rects
    assert l0 + w0 <= l1 or l1 + w1 <= l0 or t0 + h0 <= t1 or t1 + h1 <= t0, rects
    for (left, top, w, h), label in zip(rects, (0, 1)):
        patch = drawn[top:top + h, left:left + w].reshape(-1, 3)
        share = (patch == np.array(class_color(label), np.uint8)).all(1).mean()
        assert share > 0.5, f"label {label}'s background is mostly covered ({share:.0%} of its colour left)"


def test_a_lone_label_sits_on_its_box_as_before():
    from yolo.visualize import label_places

    assert label_places([[50, 40, 90, 90]], [(30, 12)], (100, 100)) == [(50, 29)]  # bottom row on the edge y=40
    assert label_places([[50, 5, 90, 90]], [(30, 12)], (100, 100)) == [(50, 5)]  # no room above: inside
    assert label_places([[90, 40, 99, 90]], [(30, 12)], (100, 100)) == [(71, 29)]  # kept inside the image


# ------------------------------------------------------------------------------- diverging boxes, hooks
def test_drawing_clips_absurd_boxes_like_detection_and_skips_non_finite_ones():
    """A diverging model's box (about +-2.2e9 pixels, beyond OpenCV's 32-bit coordinates) is drawn as the
    box clipped to the image, the way detection clips; a NaN box is not drawn."""
    from yolo.visualize import draw_detections

    image = np.full((96, 96, 3), 40, np.uint8)
    scores, labels = torch.tensor([0.9]), torch.tensor([1])
    absurd = draw_detections(image, torch.tensor([[-2.2e9, -2.2e9, 2.2e9, 2.2e9]]), scores, labels, ["a", "b"])
    clipped = draw_detections(image, torch.tensor([[0.0, 0.0, 96.0, 96.0]]), scores, labels, ["a", "b"])
    assert np.array_equal(absurd, clipped) and not np.array_equal(absurd, image)
    nan = draw_detections(image, torch.tensor([[float("nan"), 0.0, 5.0, 5.0]]), scores, labels, ["a", "b"])
    assert np.array_equal(nan, image)


def test_training_sample_drawing_survives_a_diverged_model():
    """The TensorBoard sample images of a model whose boxes diverged (the hook that ended such runs)."""
    from yolo.engine.hooks.writers import sample_predictions

    class Diverged(torch.nn.Module):
        yolo_layers = []

        def forward(self, x):  # one box per image: centre 48, 4.4e9 pixels wide and high, a sure class 0
            row = torch.tensor([48.0, 48.0, 4.4e9, 4.4e9, 1.0, 1.0, 0.0])
            return row.expand(x.shape[0], 1, 7).clone()

    dataset = [(torch.zeros(3, 96, 96, dtype=torch.uint8), torch.zeros(0, 6), None)] * 2
    drawn = sample_predictions(Diverged(), dataset, 2, ["a", "b"], torch.device("cpu"))
    assert drawn.shape == (2, 96, 96, 3) and drawn.any()
