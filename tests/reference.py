"""Helpers that run OpenCV's Darknet importer, an independent implementation of Darknet inference."""
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


def randomize_model(model, seed: int = 0, calibrate_hw=(96, 96)) -> None:
    """Give ``model`` random but well-scaled weights: random conv weights, random BN affine terms and
    running statistics taken from a forward pass, so activations neither vanish nor explode."""
    g = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / fan_in ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
        for bn in bns:
            bn.weight.copy_(0.5 + torch.rand(bn.weight.shape, generator=g))
            bn.bias.copy_((torch.rand(bn.bias.shape, generator=g) - 0.5) * 0.4)
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average: one pass sets the stats
        # Small gamma on the last conv of each residual branch, so that 20+ shortcuts do not
        # grow activations without bound (trained networks behave the same way).
        from yolo.models.layer_types.shortcut import Shortcut
        for i, module in enumerate(model.module_list):
            prev = model.module_list[i - 1]
            if isinstance(module, Shortcut) and getattr(prev, "bn", None) is not None:
                prev.bn.weight.mul_(0.2)
        model.train()
        model(torch.rand(2, model.input_channels, *calibrate_hw, generator=g))
        for bn in bns:
            bn.momentum = 0.01
        # Damp the convs that feed a head so that exp(tw) stays in a realistic range.
        for i, module in enumerate(model.module_list):
            if i + 1 < len(model.module_list) and model.module_list[i + 1] in model.yolo_layers \
                    and hasattr(module, "conv"):
                module.conv.weight.mul_(0.3)
    model.eval()


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
