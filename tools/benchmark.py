"""Time our detection pipeline against OpenCV DNN on the same cfg, weights, input size and threads.

Both run in this process, interleaved (ours, OpenCV, ours, ... with the order alternating), so
machine noise hits both alike. Reported per pipeline: per-image latency at batch 1 (pre-process +
model + post-process), throughput at batch 8 (images/s), and model-only latency; then the ratios
ours / OpenCV (latency: below 1.0 means we are faster). With a GPU it also reports fp32/fp16 figures.

    python tools/benchmark.py --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --img-size 416
    python tools/benchmark.py --cfg cfg/yolov3.cfg --img-size 416      # random weights
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Both libraries run thread pools in this one process. OpenMP's default spin-waiting after each
# parallel region steals the cores OpenCV's threads need right after (and the other way round on a
# busy machine); passive waiting keeps the interleaved timings fair. Must be set before torch loads.
if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import cv2  # noqa: E402
import torch  # noqa: E402

from yolo.cli.args import ToolParser, fail, fraction, image_side, non_negative_int, positive_int  # noqa: E402
from yolo.inference.detector import Detector, load_image, preprocess  # noqa: E402


# ------------------------------------------------------------------------------ OpenCV pipeline
class OpenCVPipeline:
    """The reference: ``cv2.dnn`` Darknet importer + ``blobFromImage`` + threshold + per-class NMS."""

    def __init__(self, cfg: Path, weights: Path, img_size, conf_thres: float, iou_thres: float):
        self.net = cv2.dnn.readNetFromDarknet(str(cfg), str(weights))
        self.net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        self.net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        self.outputs = self.net.getUnconnectedOutLayersNames()
        self.h, self.w = img_size
        self.conf, self.iou = conf_thres, iou_thres

    def blob(self, images: Sequence[np.ndarray]) -> np.ndarray:
        return cv2.dnn.blobFromImages(list(images), 1 / 255.0, (self.w, self.h), swapRB=True, crop=False)

    def forward(self, blob: np.ndarray) -> List[np.ndarray]:
        self.net.setInput(blob)
        return self.net.forward(self.outputs)

    def postprocess(self, outs: List[np.ndarray], shapes) -> List[Dict[str, np.ndarray]]:
        """Rows ``[cx, cy, w, h (relative), obj, obj * p...]`` -> boxes in original pixels after NMS."""
        n = len(shapes)
        rows = np.concatenate([o.reshape(n, -1, o.shape[-1]) for o in outs], 1)
        results = []
        for r, (h, w) in zip(rows, shapes):
            scores_all = r[:, 5:]
            labels = scores_all.argmax(1)
            scores = scores_all[np.arange(len(r)), labels]
            keep = scores > self.conf
            r, labels, scores = r[keep], labels[keep], scores[keep]
            xywh = np.stack([(r[:, 0] - r[:, 2] / 2) * w, (r[:, 1] - r[:, 3] / 2) * h, r[:, 2] * w, r[:, 3] * h], 1)
            idx = cv2.dnn.NMSBoxesBatched(xywh.tolist(), scores.tolist(), labels.tolist(), self.conf, self.iou) \
                if len(r) else []
            idx = np.asarray(idx, dtype=np.int64).reshape(-1)
            results.append({"boxes_xywh": xywh[idx], "scores": scores[idx], "labels": labels[idx]})
        return results

    def __call__(self, images: Sequence[np.ndarray]):
        return self.postprocess(self.forward(self.blob(images)), [im.shape[:2] for im in images])


# ------------------------------------------------------------------------------------ utilities
def random_weights_file(cfg: Path, folder: Path, seed: int = 0) -> Path:
    """Write Darknet weights for ``cfg`` with random, well-scaled values (conv ~ N(0, 1/fan_in),
    BN gamma ~ 1, beta/mean small, variance ~ 1) so activations neither vanish nor overflow."""
    from yolo.models.model import Darknet

    model = Darknet(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / m.weight[0].numel() ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            elif isinstance(m, torch.nn.BatchNorm2d):
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
                m.bias.copy_((torch.rand(m.bias.shape, generator=g) - 0.5) * 0.2)
                m.running_mean.copy_((torch.rand(m.running_mean.shape, generator=g) - 0.5) * 0.2)
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
    path = folder / (cfg.stem + "-random.weights")
    model.save_darknet_weights(path)
    return path


def synthetic_image(h: int = 576, w: int = 768, seed: int = 0) -> np.ndarray:
    """A smooth random BGR image (a photo-like size), used when no --image is given."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 32, w // 32, 3), dtype=np.uint8)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def interleaved(tasks: Dict[str, Callable[[], None]], iters: int, warmup: int, sync: Callable[[], None]):
    """Run every task ``warmup`` times, then ``iters`` rounds, one call each, rotating the order.

    Returns name -> list of seconds.
    """
    names = list(tasks)
    for _ in range(warmup):
        for name in names:
            tasks[name]()
            sync()
    times = {name: [] for name in names}
    for i in range(iters):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            tasks[name]()
            sync()
            times[name].append(time.perf_counter() - t0)
    return times


def summarize(seconds: List[float]) -> float:
    """Median in milliseconds (robust to the spikes of a shared machine)."""
    return statistics.median(seconds) * 1e3


# ------------------------------------------------------------------------------------------ main
def parse_args(argv=None):
    p = ToolParser(description=__doc__.split("\n\n")[0],
                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cfg", required=True, type=Path, help="Darknet .cfg")
    p.add_argument("--weights", type=Path, default=None, help="Darknet .weights (default: random weights)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=[416], help="input size: S or H W")
    p.add_argument("--image", type=Path, default=None, help="image to run on (default: a synthetic 768x576)")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads for both (default: all cores)")
    p.add_argument("--batch", type=positive_int, default=8, help="batch size for the throughput figures")
    p.add_argument("--iters", type=positive_int, default=20, help="timed rounds per measurement")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="untimed rounds first")
    p.add_argument("--resize", default="stretch", choices=["stretch", "letterbox"],
                   help="our pre-processing (OpenCV always stretches)")
    p.add_argument("--conf-thres", type=fraction, default=0.25)
    p.add_argument("--iou-thres", type=fraction, default=0.45)
    p.add_argument("--compile", action="store_true", help="also time our model under torch.compile")
    p.add_argument("--no-opencv", action="store_true", help="time only our pipeline")
    p.add_argument("--no-gpu", action="store_true", help="skip the CUDA figures (run when CUDA is available)")
    return p.parse_args(argv)


def main(args) -> Dict[str, float]:
    if not args.cfg.is_file():
        fail(f"{args.cfg}: cfg not found")
    if args.weights is not None and not args.weights.is_file():
        fail(f"{args.weights}: weights not found")
    img_size = (args.img_size[0], args.img_size[0]) if len(args.img_size) == 1 else tuple(args.img_size[:2])
    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    cv2.setNumThreads(threads)
    image = load_image(args.image) if args.image else synthetic_image()
    images_b = [image] * args.batch
    figures: Dict[str, float] = {}

    with tempfile.TemporaryDirectory() as tmp:
        weights = args.weights or random_weights_file(args.cfg, Path(tmp))
        kind = "real" if args.weights else "random"
        print(f"{args.cfg.name} ({kind} weights) at {img_size[0]}x{img_size[1]}, {threads} CPU threads, "
              f"image {image.shape[1]}x{image.shape[0]}, torch {torch.__version__}, OpenCV {cv2.__version__}, "
              f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
        ours = Detector(args.cfg, weights, device="cpu", img_size=img_size, conf_thres=args.conf_thres,
                        iou_thres=args.iou_thres, resize=args.resize)
        ref = None if args.no_opencv else OpenCVPipeline(args.cfg, weights, img_size, args.conf_thres,
                                                         args.iou_thres)
        x1, _ = preprocess([image], img_size, args.resize)

        cpu = {
            "ours_latency": lambda: ours([image]),
            "ours_batch": lambda: ours(images_b),
            "ours_model": lambda: _run(ours.net, x1),
        }
        if ref is not None:
            blob1, blobb = ref.blob([image]), ref.blob(images_b)
            cpu.update({
                "opencv_latency": lambda: ref([image]),
                "opencv_batch": lambda: ref(images_b),
                "opencv_model": lambda: ref.forward(blob1),
            })
        if args.compile:
            compiled = torch.compile(ours.net, dynamic=False)
            cpu["ours_compiled_model"] = lambda: _run(compiled, x1)

        # Interleave like with like: latency with latency, batch with batch, model with model.
        results: Dict[str, List[float]] = {}
        for group in ("latency", "batch", "model"):
            tasks = {k: v for k, v in cpu.items() if k.endswith(group)}
            n = args.iters if group != "batch" else max(3, args.iters // 4)
            results.update(interleaved(tasks, n, args.warmup if group != "batch" else 1, lambda: None))

        print(f"\nCPU ({threads} threads), median of rounds (pipeline = pre-process + model + post-process):")
        print(_header(args.batch))
        for who in ("ours", "opencv"):
            if f"{who}_latency" not in results:
                continue
            lat1 = summarize(results[f"{who}_latency"])
            lat8 = summarize(results[f"{who}_batch"])
            mod = summarize(results[f"{who}_model"])
            figures.update({f"{who}_latency_ms": lat1, f"{who}_throughput_b1": 1e3 / lat1,
                            f"{who}_throughput": args.batch * 1e3 / lat8, f"{who}_model_ms": mod})
            print(_row(who, lat1, lat8, mod, args.batch))
        if "ours_compiled_model" in results:
            figures["ours_compiled_model_ms"] = summarize(results["ours_compiled_model"])
            print(f"{'compiled':<10}{'':>52}{figures['ours_compiled_model_ms']:>14.2f}")
        if ref is not None:
            figures["latency_ratio"] = figures["ours_latency_ms"] / figures["opencv_latency_ms"]
            figures["throughput_ratio"] = figures["ours_throughput"] / figures["opencv_throughput"]
            figures["model_ratio"] = figures["ours_model_ms"] / figures["opencv_model_ms"]
            print(f"ratios ours/OpenCV: latency b=1 {figures['latency_ratio']:.3f}, model-only b=1 "
                  f"{figures['model_ratio']:.3f} (<= 1.0: ours faster); throughput b={args.batch} "
                  f"{figures['throughput_ratio']:.3f} (>= 1.0: ours faster)")

        if torch.cuda.is_available() and not args.no_gpu:
            figures.update(gpu_figures(args, weights, img_size, image))
    return figures


def _header(batch: int) -> str:
    return (f"{'':<10}{'b=1 ms':>12}{'b=1 img/s':>12}{f'b={batch} ms':>14}{f'b={batch} img/s':>14}"
            f"{'model b=1 ms':>14}")


def _row(name: str, lat1: float, lat_batch: float, model: float, batch: int) -> str:
    return (f"{name:<10}{lat1:>12.2f}{1e3 / lat1:>12.1f}{lat_batch:>14.1f}{batch * 1e3 / lat_batch:>14.1f}"
            f"{model:>14.2f}")


def _run(fn, x):
    with torch.inference_mode():
        fn(x)


def gpu_figures(args, weights: Path, img_size, image: np.ndarray) -> Dict[str, float]:
    """fp32 / fp16 latency (batch 1) and throughput (batch ``args.batch``) on CUDA."""
    out: Dict[str, float] = {}
    sync = torch.cuda.synchronize
    torch.backends.cudnn.benchmark = True
    print(f"\nCUDA ({torch.cuda.get_device_name()}), median of rounds:")
    print(_header(args.batch))
    for half in (False, True):
        det = Detector(args.cfg, weights, device="cuda", img_size=img_size, conf_thres=args.conf_thres,
                       iou_thres=args.iou_thres, resize=args.resize, half=half)
        x1, _ = preprocess([image], img_size, args.resize, "cuda", det.dtype)
        images_b = [image] * args.batch
        tasks = {"latency": lambda: det([image]), "batch": lambda: det(images_b),
                 "model": lambda: _run(det.net, x1)}
        res = {k: interleaved({k: v}, args.iters, args.warmup, sync)[k] for k, v in tasks.items()}
        name = "fp16" if half else "fp32"
        lat1, lat8, mod = summarize(res["latency"]), summarize(res["batch"]), summarize(res["model"])
        out.update({f"cuda_{name}_latency_ms": lat1, f"cuda_{name}_throughput": args.batch * 1e3 / lat8,
                    f"cuda_{name}_model_ms": mod})
        print(_row(name, lat1, lat8, mod, args.batch))
    return out


if __name__ == "__main__":
    main(parse_args())
