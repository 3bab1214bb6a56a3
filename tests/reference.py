"""Helpers that run OpenCV's Darknet importer, an independent implementation of Darknet inference. Only the tests that
compare with OpenCV import this module: where OpenCV has no Darknet importer (OpenCV 5) it skips them, and only them."""
import re
from pathlib import Path

import numpy as np
import torch

cv2 = __import__("pytest").importorskip("cv2")
if not hasattr(cv2.dnn, "readNetFromDarknet"):
    __import__("pytest").skip("this OpenCV has no Darknet importer (needs opencv-python<5)", allow_module_level=True)


def cfg_with_thresh0(cfg: Path, out_dir: Path) -> Path:
    """Copy of ``cfg`` with ``thresh=0`` and ``nms_threshold=0`` in every [yolo]/[region] section.

    OpenCV zeroes class scores under the section's ``thresh`` (0.2 when absent), and its region layer
    runs NMS inside the layer unless ``nms_threshold=0``; with both at 0 it returns the raw decode.
    """
    text = Path(cfg).read_text()
    text = re.sub(r"^(thresh|nms_threshold)\s*=.*$", "", text, flags=re.M)
    text = re.sub(r"^\[(yolo|region)\]", r"[\1]\nthresh=0\nnms_threshold=0", text, flags=re.M)
    out = Path(out_dir) / Path(cfg).name
    out.write_text(text)
    return out


def opencv_forward(cfg: Path, weights: Path, blob: np.ndarray, tmp_path: Path) -> np.ndarray:
    """OpenCV's output rows for ``blob`` (Float[N,3,H,W] RGB 0..1) concatenated over the output layers.

    Rows are (cx, cy, w, h relative to the input, objectness, objectness * class probability...),
    ordered per head by cell then anchor. Returns Float[N, rows, 5+C].
    """
    net = cv2.dnn.readNetFromDarknet(str(cfg_with_thresh0(cfg, tmp_path)), str(weights))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setInput(blob)
    outs = net.forward(net.getUnconnectedOutLayersNames())
    n = blob.shape[0]
    return np.concatenate([o.reshape(n, -1, o.shape[-1]) for o in outs], 1)


def ours_in_opencv_layout(model, x: torch.Tensor) -> np.ndarray:
    """Our eval output for ``x`` in OpenCV's layout: boxes relative to the input, class scores times
    objectness, and rows reordered from (anchor, y, x) to (y, x, anchor) within each head."""
    model.eval()
    with torch.no_grad():
        out = model(x).numpy()
    n, _, in_h, in_w = x.shape
    rows = []
    start = 0
    for head in model.yolo_layers:
        h, w = round(in_h / head.stride[0]), round(in_w / head.stride[1])
        count = head.num_anchors * h * w
        part = out[:, start:start + count].reshape(n, head.num_anchors, h, w, -1).transpose(0, 2, 3, 1, 4)
        rows.append(part.reshape(n, count, -1))
        start += count
    ours = np.concatenate(rows, 1).copy()
    ours[..., 0:4] /= np.array([in_w, in_h, in_w, in_h], dtype=ours.dtype)
    ours[..., 5:] *= ours[..., 4:5]
    return ours


def darknet_nms_sort(rows: np.ndarray, thresh: float = 0.4) -> np.ndarray:
    """Darknet's ``do_nms_sort`` on one image's rows (cx, cy, w, h, obj, class scores...).

    OpenCV's region layer always applies it (threshold 0.4) and zeroes the class scores of
    suppressed boxes; we apply the same to our output before comparing [region] models.
    """
    rows = rows.copy()
    x1, y1 = rows[:, 0] - rows[:, 2] / 2, rows[:, 1] - rows[:, 3] / 2
    x2, y2 = rows[:, 0] + rows[:, 2] / 2, rows[:, 1] + rows[:, 3] / 2
    area = rows[:, 2] * rows[:, 3]
    iw = np.clip(np.minimum(x2[:, None], x2[None]) - np.maximum(x1[:, None], x1[None]), 0, None)
    ih = np.clip(np.minimum(y2[:, None], y2[None]) - np.maximum(y1[:, None], y1[None]), 0, None)
    inter = iw * ih
    iou = inter / (area[:, None] + area[None] - inter)
    for k in range(5, rows.shape[1]):
        order = np.argsort(-rows[:, k], kind="stable")
        for a, i in enumerate(order):
            if rows[i, k] == 0:
                continue
            later = order[a + 1:]
            rows[later[iou[i, later] > thresh], k] = 0
    return rows
