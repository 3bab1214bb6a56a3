"""Time our detection pipeline against OpenCV DNN on the same cfg, weights, input size and threads.

Both run in this process, interleaved (ours, OpenCV, ours, ... with the order alternating), so
machine noise hits both alike. Reported per pipeline: per-image latency at batch 1 (pre-process +
model + post-process), throughput at --batch-size (8; images/s), and model-only latency; then the ratios
ours / OpenCV (latency: below 1.0 means we are faster). With a GPU it also reports fp32/fp16 figures. Then where
our time goes, per batch at batch 1 and --batch-size: upload (on CUDA), pre-processing, model and post-processing
(synchronized stages, :mod:`yolo.benchmark.detection_stages`), on the CPU and, with a GPU, on CUDA in fp32 and fp16.

    python tools/benchmark.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --img-size 416
    python tools/benchmark.py --cfg weights/yolov3.cfg --img-size 416      # random weights

With ``--data``, it times the training data path instead: milliseconds of one CPU core per training image
(decode + augmentation + item tensor) for each augmentation pipeline with the cfg's settings; with
``--loader-workers``, also the training loader alone with those worker counts (:mod:`yolo.benchmark.loader`):

    python tools/benchmark.py --data configs/coco128.yaml --cfg weights/yolov3-tiny.cfg --img-size 416
    python tools/benchmark.py --data configs/coco128.yaml --cfg weights/yolov3-tiny.cfg --loader-workers 1 2
"""
from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

import cv2
import torch

from yolo.benchmark.compare import cpu_figures, cuda_figures, random_weights_file, synthetic_image
from yolo.benchmark.data import data_figures, training_settings
from yolo.benchmark.detection_stages import stage_figures
from yolo.benchmark.loader import loader_figures
from yolo.benchmark.neighbours import beside_neighbours
from yolo.benchmark.runtimes import RuntimeRow, runtime_table, weights_figures
from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.benchmark import parse_args
from yolo.data import DetectionDataset, build_dataset, load_data_config
from yolo.device import cpu_threads
from yolo.errors import CfgError, DataError, ExportError, ImageReadError
from yolo.files.images import load_image
from yolo.models.cfg import parse_cfg
from yolo.models.preprocessing import chosen_input_size
from yolo.ops.sizes import ImageSize, size_text


def input_size(args) -> ImageSize:
    """``--img-size``, else the cfg's [net] width/height, else 416 (the rule of every tool; the weights here are
    Darknet's, which record no training size); says which on stdout. The stride is checked where the model is
    built."""
    size, size_from = chosen_input_size(args.img_size, "--img-size", None, parse_cfg(args.cfg)[0])
    print(f"input size {size_text(size)} ({size_from})")
    return size


def data_main(args) -> Dict[str, float]:
    """``--data``: the training data path per pipeline (:func:`yolo.benchmark.data.data_figures`)."""
    threads = args.threads or 1
    torch.set_num_threads(threads)
    cv2.setNumThreads(threads)
    try:
        img_size = input_size(args)
        dataset = build_dataset(load_data_config(args.data), "train", img_size, augment=False)
        stage_device = torch.device("cuda" if torch.cuda.is_available() and not args.no_gpu else "cpu")
        figures = data_figures(dataset, args.cfg, img_size, args.images, args.iters or 5, min(args.warmup, 1),
                               stage_device)
        if args.loader_workers:
            training = DetectionDataset(dataset.records, dataset.names, img_size, augment=True,
                                        hyp=training_settings(args.cfg), seed=dataset.seed)
            if len(training) < args.batch_size:  # the loader makes whole mini-batches only: it would make none
                fail(f"{args.data}: {len(training)} train image(s), fewer than --batch-size {args.batch_size}: the "
                     "loader alone cannot be timed; give a smaller --batch-size")
            figures.update(loader_figures(training, args.batch_size, args.loader_workers,
                                          batches=max(1, args.images // args.batch_size)))
        return figures
    except (CfgError, DataError, FileNotFoundError) as exc:
        fail(str(exc))


def runtimes_main(args) -> List[RuntimeRow]:
    """``--runtimes``: the model in each installed runtime (:func:`yolo.benchmark.runtimes.weights_figures`)."""
    try:
        rows = weights_figures(args.cfg, args.weights, args.img_size, args.image, args.threads or cpu_threads(),
                               batch=args.batch_size, rounds=args.iters or 20, warmup=args.warmup, data=args.data,
                               runtimes=args.runtimes or None, calib_images=args.calib_images)
    except (ValueError, ImageReadError, FileNotFoundError, ExportError) as exc:
        fail(str(exc).strip().splitlines()[0])
    print(runtime_table(rows, args.batch_size))
    return rows


def main(args) -> Dict[str, float]:
    """Print the tables; returns the figures (see :func:`yolo.benchmark.compare.cpu_figures`)."""
    setup_logging(args.verbose, logging.WARNING)
    if args.runtimes is not None:
        if args.weights is None or not args.weights.is_file():
            fail(f"{args.weights}: weights not found" if args.weights else "--runtimes needs --weights")
        with beside_neighbours(args.neighbours):
            return runtimes_main(args)
    if args.cfg is None:
        fail("--cfg is needed (only --runtimes takes a .pt or an exported file alone)")
    if not args.cfg.is_file():
        fail(f"{args.cfg}: cfg not found")
    if args.data is not None:
        return data_main(args)
    if args.weights is not None and not args.weights.is_file():
        fail(f"{args.weights}: weights not found")
    try:
        with beside_neighbours(args.neighbours):
            return model_main(args)
    except (ValueError, ImageReadError, FileNotFoundError) as exc:  # ValueError: CfgError, WeightsError, a classifier
        fail(str(exc).strip().splitlines()[0])


def model_main(args) -> Dict[str, float]:
    """The detection pipeline's figures, ours against OpenCV's (:func:`main` without its error handling)."""
    img_size = input_size(args)
    threads = args.threads or cpu_threads()
    if threads > cpu_threads():  # more would only compete for the same cores (and each reserves its stack)
        print(f"warning: --threads {threads} is more than the {cpu_threads()} CPUs this process may use: using "
              f"{cpu_threads()}", file=sys.stderr)
        threads = cpu_threads()
    torch.set_num_threads(threads)
    cv2.setNumThreads(threads)
    image = load_image(args.image) if args.image else synthetic_image()
    common = dict(img_size=img_size, image=image, batch=args.batch_size, rounds=args.iters or 20, warmup=args.warmup,
                  resize=args.resize, resample=args.resample, conf_thres=args.conf_thres, iou_thres=args.iou_thres)
    with tempfile.TemporaryDirectory() as tmp:
        weights = args.weights or random_weights_file(args.cfg, Path(tmp))
        kind = "real" if args.weights else "random"
        print(f"{args.cfg.name} ({kind} weights) at {size_text(img_size)}, {threads} CPU threads, "
              f"image {size_text(image.shape[:2])}, torch {torch.__version__}, OpenCV {cv2.__version__}")
        figures = cpu_figures(args.cfg, weights, opencv=not args.no_opencv, compile=args.compile, **common)
        stage_rounds = max(3, common["rounds"] // 4)
        stages = dict(common, rounds=stage_rounds, warmup=min(args.warmup, 1))
        print(f"\nwhere the time goes, per batch (synchronized stages, median of {stage_rounds} rounds):")
        figures.update(stage_figures(args.cfg, weights, device="cpu", **stages))
        if torch.cuda.is_available() and not args.no_gpu:
            figures.update(cuda_figures(args.cfg, weights, **common))
            print(f"\nwhere the time goes on CUDA, per batch (synchronized stages, median of {stage_rounds} rounds):")
            for half in (False, True):
                figures.update(stage_figures(args.cfg, weights, device="cuda", half=half, **stages))
    return figures


def cli(argv=None) -> None:
    """Console entry point: ``yolo-benchmark``."""
    run_tool(main, parse_args(argv), reduce="--batch-size, --img-size or --threads")
