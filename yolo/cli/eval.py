"""Evaluate a detector on a dataset's val split with COCO metrics (pycocotools).

    python tools/eval.py --cfg weights/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights --data configs/coco128.yaml

Prints COCO's AP/AR summary, a per-class table and the time per image (with ``--darknet-map`` also Darknet's
``detector map`` report, :mod:`yolo.evaluation.darknet_map`); writes into the save folder
(``runs/eval/exp``, ``exp2``, ... never overwritten): ``metrics.json``, ``predictions.json`` (COCO
results: image_id, category_id, bbox [x, y, w, h] original pixels, score), ``pr_curves.png``,
``pr_curves_per_class.png`` and ``confusion_matrix.png``.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

from yolo.backends import load_runnable
from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.common import settings_from
from yolo.cli.flags.eval import parse_args
from yolo.data import build_dataset, create_dataloader, load_data_config
from yolo.data.loader import default_workers
from yolo.device import cpu_threads, parse_device
from yolo.errors import MAX_MESSAGE, CfgError, ConfigError, DataError, WeightsError, shown
from yolo.evaluation import Evaluator, evaluate_model
from yolo.evaluation.darknet_evaluator import DarknetMapEvaluator, check_darknet_map_model
from yolo.evaluation.tiled import evaluate_tiled
from yolo.inference.detector import Detector
from yolo.files.images import ready_decoder
from yolo.files.names import names_difference
from yolo.models.preprocessing import default_decode, default_resample, default_resize, model_input_choice
from yolo.ops.sizes import size_text
from yolo.progress import use_bars
from yolo.runs import increment_path, remove_if_empty, run_name
from yolo.settings.evaluate import EvalOptions
from yolo.settings.tiling import TileOptions

logger = logging.getLogger("yolo.eval")


def usable_workers(requested: Optional[int], batch_size: int) -> int:
    """``--workers``, at most the CPUs this process may run on: more only slow loading down (torch warns of a
    freeze over several lines), and the results do not depend on the count. Without it, the rule of the
    training loader (:func:`yolo.data.loader.default_workers`): those CPUs but one, at most ``batch_size``."""
    cpus = cpu_threads()
    if requested is None:
        return default_workers(batch_size, cpus=cpus)
    if requested > cpus:
        logger.warning("warning: --workers %d is more than the %d CPUs this process may use: using %d", requested,
                       cpus, cpus)
        return cpus
    return requested


def main(args: argparse.Namespace) -> Dict[str, Any]:
    """Evaluate as described by ``args`` (see :func:`parse_args`); returns the metrics dict."""
    opts, tile = settings_from(args, EvalOptions), settings_from(args, TileOptions)
    if tile.tile and opts.darknet_map:  # Darknet's report scores the network's own detections of each whole image
        fail("--darknet-map scores Darknet's detections of each whole image at the network's size: leave out --tile")
    if opts.save_dir and Path(opts.save_dir).is_dir() and any(Path(opts.save_dir).iterdir()):
        fail(f"--save-dir {opts.save_dir}: the folder is not empty; give an empty or new folder (the results go "
             "exactly there, and nothing in it is overwritten), or leave --save-dir out for a new folder under "
             "--project")
    try:
        device = parse_device(opts.device)
        data = load_data_config(opts.data, training=opts.split == "train")  # valid= alone does for val
        model = load_runnable(opts.cfg, opts.weights, device=device)  # an exported file runs in its own runtime
        if model.num_classes != data.num_classes:
            fail(f"the model predicts {model.num_classes} classes but {opts.data} names {data.num_classes}: "
                 "wrong --data or --cfg?")
        difference = names_difference(model.class_names, data.names) if model.class_names else None
        if difference:  # the metrics pair the model's class i with the data's class i, whatever their names
            logger.warning("warning: %s was trained with other class names than %s names: %s; each class is "
                           "scored by its number, so check that they mean the same classes", opts.weights,
                           opts.data, difference)
        model.eval().fuse()
        img_size, img_size_from = model_input_choice(model, opts.img_size, "--img-size")
        dataset = build_dataset(data, opts.split, img_size=img_size, augment=False)
        dataset.resize = opts.resize or default_resize(model)
        dataset.resample = opts.resample or default_resample(model)
        dataset.decode = ready_decoder(opts.decode or default_decode(model))  # stb compiled now, or said why not
        split = data.split(opts.split)
        evaluator = Evaluator(data.names, dataset.ground_truth(), category_ids=getattr(dataset, "category_ids", None),
                              use_pycocotools=not opts.fast,
                              annotation_file=split if split.suffix.lower() == ".json" else None)
        darknet = None
        if opts.darknet_map:
            check_darknet_map_model(model)
            darknet = DarknetMapEvaluator(data.names, dataset.ground_truth(), points=opts.points,
                                          iou_thresh=opts.darknet_iou_thresh, thresh=opts.darknet_thresh)
    # ValueError: e.g. an --img-size other than the one a YOLOv1 cfg's [connected] weights are tied to
    except (CfgError, ConfigError, WeightsError, DataError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    loader = create_dataloader(dataset, batch_size=opts.batch_size, shuffle=False,
                               num_workers=usable_workers(opts.workers, opts.batch_size), pin_memory=device.type == "cuda")
    save_dir = Path(opts.save_dir) if opts.save_dir else increment_path(Path(opts.project) / run_name(opts.name))
    save_dir.mkdir(parents=True, exist_ok=True)

    logger.info("evaluating %s on %s (%d images) at %s (%s), %s (%s), conf %g, NMS IoU %g", opts.weights,
                opts.data, len(dataset), size_text(img_size), img_size_from, dataset.resize, dataset.resample,
                opts.conf_thres, opts.iou_thres)
    try:
        if tile.tile:  # each image at its own size, on slices of the network's (the loader resizes them)
            tiled = Detector(opts.cfg, opts.weights, names=data.names, img_size=img_size, resize=dataset.resize,
                             resample=dataset.resample, decode=dataset.decode,
                             conf_thres=opts.conf_thres, iou_thres=opts.iou_thres, max_det=opts.max_det,
                             multi_label=opts.multi_label, device=device).tiled(tile.tile_overlap, tile.tile_merge)
            metrics = evaluate_tiled(tiled, dataset.ground_truth(), evaluator, use_bars(opts.progress))
        else:
            metrics = evaluate_model(model, loader, evaluator, conf_thres=opts.conf_thres, iou_thres=opts.iou_thres,
                                     device=device, max_det=opts.max_det, multi_label=opts.multi_label,
                                     amp=opts.amp, progress=use_bars(opts.progress), desc=f"eval {opts.split}",
                                     darknet_map=darknet)
    except KeyboardInterrupt:  # Ctrl-C: nothing was written; leave no empty run folder behind
        remove_if_empty(save_dir)
        raise
    except DataError as exc:  # an image unreadable now (changed since the scan), read by a loader worker or here
        remove_if_empty(save_dir)
        fail(str(exc))
    speed = metrics["speed_ms"]
    print(evaluator.summary_text(metrics))
    print(f"Speed: {speed['preprocess']:.1f} ms pre-process, {speed['inference']:.1f} ms inference, "
          f"{speed['nms']:.1f} ms NMS per image at {size_text(img_size)} "
          f"(batch {opts.batch_size}, {device.type})")
    if darknet is not None:
        print(f"\nDarknet's detector map (-points {opts.points} -iou_thresh {opts.darknet_iou_thresh:g} "
              f"-thresh {opts.darknet_thresh:g}):")
        print(darknet.report.text())

    evaluator.save_results_json(save_dir / "predictions.json")
    settings = {"cfg": opts.cfg, "weights": str(opts.weights), "data": str(opts.data), "split": opts.split,
                "img_size": list(img_size), "resize": dataset.resize, "resample": dataset.resample,
                "decode": dataset.decode, "conf_thres": opts.conf_thres, "iou_thres": opts.iou_thres,
                "max_det": opts.max_det, "multi_label": opts.multi_label, "darknet_map": opts.darknet_map,
                **({"tile_overlap": tile.tile_overlap, "tile_merge": tile.tile_merge} if tile.tile else {})}
    evaluator.save_metrics(save_dir / "metrics.json", {"settings": settings})
    if opts.plots:
        evaluator.save_plots(save_dir)
    print(f"Results saved to {shown(save_dir, MAX_MESSAGE)}")
    metrics["save_dir"] = str(save_dir)
    return metrics


def cli(argv: Optional[List[str]] = None) -> None:
    """Console entry point: ``yolo-eval``."""
    args = parse_args(argv)
    setup_logging(args.verbose)
    run_tool(main, args, reduce="--img-size, --batch-size or --workers")
