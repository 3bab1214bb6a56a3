"""Evaluate a detector on a dataset's val split with COCO metrics (pycocotools).

    python tools/eval.py --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --data configs/coco128.yaml

Prints COCO's AP/AR summary, a per-class table and the time per image; writes into the save folder
(``runs/eval/exp``, ``exp2``, ... never overwritten): ``metrics.json``, ``predictions.json`` (COCO
results: image_id, category_id, bbox [x, y, w, h] original pixels, score), ``pr_curves.png``,
``pr_curves_per_class.png`` and ``confusion_matrix.png``.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.eval import parse_args
from yolo.data import build_dataset, create_dataloader, load_data_config
from yolo.device import parse_device
from yolo.errors import CfgError, ConfigError, DataError, WeightsError
from yolo.evaluation import Evaluator, evaluate_model
from yolo.models.model import load_model
from yolo.models.preprocessing import default_img_size, default_resize
from yolo.progress import use_bars
from yolo.runs import increment_path, remove_if_empty, run_name

logger = logging.getLogger("yolo.eval")


def _img_size(values: Optional[Sequence[int]], model) -> Tuple[int, int]:
    """``--img-size`` (none: the training size a checkpoint records, else the cfg's; one value: square, two:
    height width), checked against the stride."""
    if not values:
        size = default_img_size(model) or tuple(model.input_size)
    elif len(values) <= 2:
        size = (values[0], values[-1])
    else:
        fail(f"--img-size takes one value or two (height width), got {values}")
    if size[0] % model.stride or size[1] % model.stride:
        fail(f"--img-size {size[0]}x{size[1]} must be a multiple of the network stride {model.stride}")
    return size


def main(args: argparse.Namespace) -> Dict[str, Any]:
    """Evaluate as described by ``args`` (see :func:`parse_args`); returns the metrics dict."""
    try:
        device = parse_device(args.device)
        data = load_data_config(args.data)
        model = load_model(args.cfg, args.weights, device=device)
        if model.num_classes != data.num_classes:
            fail(f"the model predicts {model.num_classes} classes but {args.data} names {data.num_classes}: "
                 "wrong --data or --cfg?")
        model.eval().fuse()
        img_size = _img_size(args.img_size, model)
        dataset = build_dataset(data, args.split, img_size=img_size, augment=False)
        dataset.resize = args.resize or default_resize(model)
        split = data.split(args.split)
        evaluator = Evaluator(data.names, dataset.ground_truth(), category_ids=getattr(dataset, "category_ids", None),
                              use_pycocotools=not args.fast,
                              annotation_file=split if split.suffix.lower() == ".json" else None)
    except (CfgError, ConfigError, WeightsError, DataError, FileNotFoundError) as exc:
        fail(str(exc))
    loader = create_dataloader(dataset, batch_size=args.batch_size, shuffle=False, num_workers=args.workers,
                               pin_memory=device.type == "cuda")
    save_dir = Path(args.save_dir) if args.save_dir else Path(args.project) / run_name(args.name)
    if not args.save_dir or (save_dir.exists() and any(save_dir.iterdir())):  # never overwrite a run
        save_dir = increment_path(save_dir)
    save_dir.mkdir(parents=True, exist_ok=True)

    logger.info("evaluating %s on %s (%d images) at %dx%d, %s, conf %g, NMS IoU %g", args.weights, args.data,
                len(dataset), img_size[0], img_size[1], dataset.resize, args.conf_thres, args.iou_thres)
    try:
        metrics = evaluate_model(model, loader, evaluator, conf_thres=args.conf_thres, iou_thres=args.iou_thres,
                                 device=device, max_det=args.max_det, multi_label=not args.single_label,
                                 amp=args.amp, progress=use_bars(not args.no_progress), desc=f"eval {args.split}")
    except KeyboardInterrupt:  # Ctrl-C: nothing was written; leave no empty run folder behind
        remove_if_empty(save_dir)
        raise
    speed = metrics["speed_ms"]
    print(evaluator.summary_text(metrics))
    print(f"Speed: {speed['preprocess']:.1f} ms pre-process, {speed['inference']:.1f} ms inference, "
          f"{speed['nms']:.1f} ms NMS per image at {img_size[0]}x{img_size[1]} "
          f"(batch {args.batch_size}, {device.type})")

    evaluator.save_results_json(save_dir / "predictions.json")
    settings = {"cfg": args.cfg, "weights": str(args.weights), "data": str(args.data), "split": args.split,
                "img_size": list(img_size), "resize": dataset.resize, "conf_thres": args.conf_thres,
                "iou_thres": args.iou_thres, "max_det": args.max_det, "multi_label": not args.single_label}
    evaluator.save_metrics(save_dir / "metrics.json", {"settings": settings})
    if not args.no_plots:
        evaluator.save_plots(save_dir)
    print(f"Results saved to {save_dir}")
    metrics["save_dir"] = str(save_dir)
    return metrics


def cli(argv: Optional[List[str]] = None) -> None:
    """Console entry point: ``yolo-eval``."""
    setup_logging()
    run_tool(main, parse_args(argv))
