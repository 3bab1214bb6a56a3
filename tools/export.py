"""Export a Darknet model to ONNX, TorchScript or Darknet .weights, then check the written file.

The file is run once in its own runtime (onnxruntime, torch.jit.load, OpenCV DNN) at batch 1 and 2
(and with --dynamic at a second input size) and compared with the PyTorch model; a difference over
the tolerance is an error (exit status 1) and the file is removed.

    python tools/export.py --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --format onnx --dynamic
    python tools/export.py --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --format onnx --nms
    python tools/export.py --weights runs/train/exp/weights/best.pt --format torchscript
    python tools/export.py --weights runs/train/exp/weights/best.pt --format darknet   # best.weights + best.cfg
    python tools/export.py --cfg cfg/yolov3-tiny.cfg --weights yolov3-tiny.weights --format onnx \\
        --benchmark 50 --threads 2      # model-only latency: onnxruntime, PyTorch, OpenCV DNN
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Dict, Optional

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
if __name__ == "__main__":
    # OpenMP threads that spin after each parallel region fight onnxruntime's and OpenCV's threads
    # (timed in the same process by --benchmark) and anything else on a busy machine; passive
    # waiting costs little. Must be set before torch loads; an explicit setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from tools._common import (ToolParser, fail, fraction, image_side, non_negative_int, number, positive_int,  # noqa: E402
                           setup_logging)

logger = logging.getLogger("yolo.export")

FORMATS = {"onnx": ".onnx", "torchscript": ".torchscript", "darknet": ".weights"}


def parse_args(argv=None):
    p = ToolParser(description=__doc__.split("\n\n")[0],
                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cfg", type=Path, default=None, help="Darknet .cfg (optional for a .pt that carries its cfg)")
    p.add_argument("--weights", type=Path, required=True, help="Darknet .weights or a trained .pt checkpoint")
    p.add_argument("--format", required=True, choices=sorted(FORMATS), help="what to write")
    p.add_argument("--output", type=Path, default=None,
                   help="output file (default: the weights path with the format's suffix)")
    p.add_argument("--img-size", type=image_side, nargs="+", default=None,
                   help="input size S or H W, multiples of the stride (default: the cfg's [net] size)")
    p.add_argument("--dynamic", action="store_true", help="ONNX: dynamic height and width too (batch always is)")
    p.add_argument("--half", action="store_true", help="float16 weights and input (heads decode in float32)")
    p.add_argument("--nms", action="store_true",
                   help="ONNX: put NMS in the graph; outputs boxes, scores, labels, batch_index")
    p.add_argument("--conf-thres", type=fraction, default=0.25, help="with --nms: score threshold")
    p.add_argument("--iou-thres", type=fraction, default=0.45, help="with --nms: NMS IoU threshold")
    p.add_argument("--max-det", type=positive_int, default=300, help="with --nms: most detections per image")
    p.add_argument("--opset", type=number(int, 17, None, "the opset"), default=17, help="ONNX opset (17 or later)")
    p.add_argument("--names", type=Path, default=None, help="class names file, stored in the file's metadata")
    p.add_argument("--image", type=Path, default=None,
                   help="image for the check (default: drawn shapes scenes)")
    p.add_argument("--no-verify", action="store_true", help="skip running the written file")
    p.add_argument("--benchmark", type=non_negative_int, default=0, metavar="RUNS",
                   help="ONNX: also time onnxruntime, PyTorch and OpenCV DNN (model only, batch 1) over RUNS rounds")
    p.add_argument("--threads", type=positive_int, default=2, help="CPU threads for every runtime in --benchmark")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p.parse_args(argv)


def _img_size(values, model):
    if values is None:
        return tuple(model.input_size)
    if len(values) not in (1, 2):
        raise ValueError(f"--img-size takes S or H W, got {len(values)} numbers")
    size = (values[0], values[0]) if len(values) == 1 else (values[0], values[1])
    if min(size) <= 0 or size[0] % model.stride or size[1] % model.stride:
        raise ValueError(f"--img-size {size[0]} {size[1]} must be positive multiples of the network stride "
                         f"{model.stride}")
    return size


def _check_args(args) -> None:
    if args.cfg is not None and not args.cfg.is_file():
        raise FileNotFoundError(f"{args.cfg}: cfg not found")
    if not args.weights.is_file():
        raise FileNotFoundError(f"{args.weights}: weights not found")
    if args.weights.suffix not in (".weights", ".pt", ".pth"):
        raise ValueError(f"{args.weights}: expected a Darknet .weights file or a .pt checkpoint")
    if args.cfg is None and args.weights.suffix == ".weights":
        raise ValueError(f"{args.weights}: a Darknet .weights file needs --cfg")
    if args.format == "darknet" and (args.half or args.dynamic or args.nms):
        raise ValueError("--half, --dynamic and --nms apply to onnx/torchscript, not to darknet")
    if args.format != "onnx" and (args.nms or args.benchmark):
        raise ValueError("--nms and --benchmark apply to --format onnx")
    if args.names is not None and not args.names.is_file():
        raise FileNotFoundError(f"{args.names}: names file not found")
    if args.image is not None and not args.image.is_file():
        raise FileNotFoundError(f"{args.image}: image not found")


def _names(args, num_classes: int):
    from yolo.cfg import read_names

    if args.names is not None:
        names = read_names(args.names)
    elif args.weights.suffix in (".pt", ".pth"):
        from yolo.checkpoint import load_checkpoint_file
        names = load_checkpoint_file(args.weights).get("names")
    else:
        return None
    if names is not None and len(names) != num_classes:
        raise ValueError(f"{len(names)} class names but the model has {num_classes} classes")
    return names


def run(args) -> Dict[str, object]:
    """Export, verify and optionally benchmark; returns what was done (paths, difference, latencies)."""
    from yolo.export import (NMSOptions, export_darknet, export_onnx, export_torchscript, compare_latency,
                             opencv_reads, sample_input, second_size, verify_darknet, verify_onnx,
                             verify_torchscript)
    from yolo.model import load_model

    _check_args(args)
    model = load_model(args.cfg, args.weights, device="cpu").eval()
    size = _img_size(args.img_size, model)
    names = _names(args, model.num_classes)
    output = args.output or args.weights.with_suffix(FORMATS[args.format])
    if output.resolve() == args.weights.resolve():
        raise ValueError(f"{output}: the output would overwrite the input weights; choose --output")
    nms = NMSOptions(args.conf_thres, args.iou_thres, args.max_det) if args.nms else None
    inputs = [sample_input(size, 1, args.image, model.input_channels),
              sample_input(size, 2, args.image, model.input_channels)]
    if args.dynamic:
        inputs.append(sample_input(second_size(size, model.stride), 2, args.image, model.input_channels))
    result: Dict[str, object] = {"output": output, "img_size": size}

    cfg_out: Optional[Path] = None
    if args.format == "onnx":
        export_onnx(model, output, size, dynamic=args.dynamic, half=args.half, nms=nms, opset=args.opset,
                    names=names, example=inputs[0])
        runtime = "onnxruntime"
        verify = lambda: verify_onnx(output, model, inputs, nms=nms)  # noqa: E731
    elif args.format == "torchscript":
        export_torchscript(model, output, size, half=args.half, names=names, example=inputs[0])
        runtime = "torch.jit"
        verify = lambda: verify_torchscript(output, model, inputs)  # noqa: E731
    else:
        cfg_out = output.with_suffix(".cfg")
        if args.cfg is not None and cfg_out.resolve() == args.cfg.resolve():
            cfg_out = None  # the cfg is already there, unchanged
        export_darknet(model, output, cfg_out)
        result["cfg"] = cfg_out or args.cfg
        # OpenCV has no [detection] (YOLOv1) layer: the file is then checked by reading it back only.
        runtime = "OpenCV DNN" if opencv_reads(model) else "our loader (bit-exact read-back; OpenCV has no [detection])"
        verify = lambda: verify_darknet(output, cfg_out or args.cfg, model, inputs[:2])  # noqa: E731
    written = [p for p in (output, cfg_out) if p is not None]
    print(f"wrote {', '.join(str(p) for p in written)}")

    if not args.no_verify:
        from yolo.export import ExportError
        try:
            diff = verify()
        except ExportError:
            for p in written:
                p.unlink(missing_ok=True)
            raise
        result["max_difference"] = diff
        shapes = ", ".join("x".join(str(v) for v in x.shape) for x in inputs[:2 if args.format == "darknet" else None])
        print(f"verified in {runtime} on inputs {shapes}: largest difference to the PyTorch model {diff:.3g}")

    if args.benchmark:
        x = sample_input(size, 1, args.image, model.input_channels)
        with tempfile.TemporaryDirectory() as tmp:
            if not opencv_reads(model):
                darknet = None  # OpenCV DNN has no [detection] layer: timed without it
            elif args.weights.suffix == ".weights":
                darknet = (args.cfg, args.weights)
            else:
                darknet = export_darknet(model, Path(tmp) / "model.weights", Path(tmp) / "model.cfg")
            latency = compare_latency(model, output, x, runs=args.benchmark, threads=args.threads, darknet=darknet)
        result["latency_ms"] = latency
        print(f"model-only latency, batch 1, {size[0]}x{size[1]}, {args.threads} threads, "
              f"{args.benchmark} interleaved rounds (torch {torch.__version__}, "
              f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}):")
        for name, ms in latency.items():
            print(f"  {name:<15} median {ms['median_ms']:8.2f} ms   min {ms['min_ms']:8.2f} ms")
    return result


def main(args) -> Dict[str, object]:
    """Run the tool; a bad input or a failed check is a one-line error and a non-zero exit."""
    setup_logging(args.verbose)
    from yolo.cfg import CfgError
    from yolo.detector import ImageReadError
    from yolo.export import ExportError
    from yolo.weights import WeightsError

    try:
        return run(args)
    except ExportError as exc:
        fail(str(exc).splitlines()[0], code=1)
    except ImportError as exc:
        fail(f"{exc.name or exc}: not installed (needed to check this format; --no-verify skips the check)")
    except (CfgError, WeightsError, ImageReadError, ValueError, OSError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


if __name__ == "__main__":
    main(parse_args())
