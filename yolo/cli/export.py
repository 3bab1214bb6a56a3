"""Export a Darknet model to ONNX, TorchScript, OpenVINO (float32 or INT8) or Darknet .weights; check the file.
What it does, where the files go and examples: ``--help`` (:mod:`yolo.cli.flags.export`)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

from yolo.cli.args import fail, run_tool, setup_logging
from yolo.cli.flags.export import parse_args
from yolo.errors import MAX_MESSAGE, CfgError, ExportError, ImageReadError, WeightsError, shown
from yolo.export import NMSOptions
from yolo.export.heads import check_runtime
from yolo.export.checked import INSTALL_EXPORT, RUNTIMES, SUFFIXES, export_checked, missing_package
from yolo.export.names import export_names
from yolo.export.onnx import check_opset
from yolo.export.openvino import check_output_name
from yolo.export.int8 import export_int8
from yolo.export.latency import compare_latency_with_darknet_pair, latency_report
from yolo.export.samples import check_inputs
from yolo.files.atomic import output_target
from yolo.files.overwrite import refuse_overwriting_inputs, same_file
from yolo.models.model import load_model
from yolo.models.preprocessing import model_input_choice
from yolo.ops.sizes import size_text
from yolo.runs import increment_path, remove_if_empty, run_name


def _check_args(args) -> None:
    for path, what in ((args.cfg, "cfg"), (args.weights, "weights"), (args.names, "names file"),
                       (args.image, "image")):
        if path is not None and not path.is_file():
            raise FileNotFoundError(f"{path}: {what} not found")
    if args.weights.suffix not in (".weights", ".pt", ".pth"):
        raise ValueError(f"{args.weights}: expected a Darknet .weights file or a .pt checkpoint")
    if args.cfg is None and args.weights.suffix == ".weights":
        raise ValueError(f"{args.weights}: a Darknet .weights file needs --cfg")
    if args.format == "darknet" and (args.half or args.dynamic or args.nms):
        raise ValueError("--half, --dynamic and --nms apply to onnx/torchscript, not to darknet")
    if args.format != "onnx" and (args.nms or args.benchmark):
        raise ValueError("--nms and --benchmark apply to --format onnx")
    if args.format == "openvino" and args.half:
        raise ValueError("--half applies to onnx/torchscript: OpenVINO picks its CPU's precision (--int8 quantizes)")
    if args.int8 and args.format != "openvino":
        raise ValueError("--int8 applies to --format openvino")
    if args.int8 and args.data is None:
        raise ValueError("--int8 needs --data: the dataset whose train images calibrate it and whose val split "
                         "scores it")
    if args.data is not None and not args.int8:
        raise ValueError("--data applies to --int8")
    if args.data is not None and not args.data.is_file():
        raise FileNotFoundError(f"{args.data}: data file not found")
    if args.format == "openvino" and args.output is not None:
        check_output_name(args.output)
    if args.format == "onnx":
        check_opset(args.opset, "--opset")  # before the model is read: the installed torch's range
    if args.output is not None:  # a link's target; a device, a FIFO or a folder: refused before the work
        args.output = output_target(args.output)
        if args.format == "darknet":
            output_target(args.output.with_suffix(".cfg"))


def run(args) -> Dict[str, object]:
    """Export, verify and optionally benchmark; returns what was done (paths, difference, latencies)."""
    _check_args(args)
    missing = missing_package(args.format, verify=not args.no_verify, benchmark=bool(args.benchmark), int8=args.int8)
    if missing:
        raise ValueError(missing)
    model = load_model(args.cfg, args.weights, device="cpu").eval()
    size, size_from = model_input_choice(model, args.img_size, "--img-size")
    print(f"input size {size_text(size)} ({size_from})")
    run_dir = None
    if args.output is None:  # a new run folder, never beside the inputs (an assets folder, say)
        run_dir = increment_path(args.project / run_name(args.name))
    output = args.output or run_dir / args.weights.with_suffix(SUFFIXES[args.format]).name
    try:
        return _export(args, model, size, output)
    finally:
        if run_dir is not None:
            remove_if_empty(run_dir)  # a failed export leaves no empty run folder


def _export(args, model, size, output: Path) -> Dict[str, object]:
    """Write ``model`` at input ``size`` ``(h, w)`` to ``output``, check it and optionally time it."""
    inputs = {"--weights": args.weights, "--cfg": args.cfg, "--names": args.names, "--image": args.image}
    refuse_overwriting_inputs(output, inputs)
    if args.format == "darknet" and not (args.cfg is not None and same_file(output.with_suffix(".cfg"), args.cfg)):
        # the cfg written beside the weights (the model's own --cfg is used as it is)
        refuse_overwriting_inputs(output.with_suffix(".cfg"), inputs)
    if args.format == "openvino":  # the IR's weights, beside its .xml
        refuse_overwriting_inputs(output.with_suffix(".bin"), inputs)
    inputs = check_inputs(size, model.stride, args.image, model.input_channels, dynamic=args.dynamic)
    nms = NMSOptions(conf_thres=args.conf_thres, iou_thres=args.iou_thres, max_det=args.max_det) if args.nms else None
    names = export_names(args.names, args.weights, args.cfg, model.num_classes)
    if args.int8:
        return _export_int8(args, model, size, output, inputs, names)
    done = export_checked(model, args.format, output, inputs, verify=not args.no_verify, dynamic=args.dynamic,
                          half=args.half, nms=nms, opset=args.opset, names=names, source_cfg=args.cfg)
    result: Dict[str, object] = {"output": output, "img_size": size}
    if args.format == "darknet":
        result["cfg"] = done.cfg
    print(f"wrote {', '.join(shown(p, MAX_MESSAGE) for p in done.files)}")
    if done.max_difference is not None:
        result["max_difference"] = done.max_difference
        shapes = ", ".join("x".join(str(v) for v in shape) for shape in done.checked_on)
        runtime = check_runtime(model) if args.format == "darknet" else RUNTIMES[args.format]
        print(f"verified in {runtime} on inputs {shapes}: largest difference to the PyTorch model "
              f"{done.max_difference:.3g}")
    if args.benchmark:
        result["latency_ms"] = compare_latency_with_darknet_pair(model, output, inputs[0], args.weights, args.cfg,
                                                                 runs=args.benchmark, threads=args.threads)
        print(latency_report(result["latency_ms"], size, args.threads, args.benchmark))
    return result


def _export_int8(args, model, size, output: Path, inputs, names) -> Dict[str, object]:
    """``--int8``: the INT8 IR at ``output``, and the mAP50 of the float32 and the INT8 IR on --data's val split."""
    done = export_int8(model, output, inputs, args.data, calib_images=args.calib_images, names=names,
                       dynamic=args.dynamic, opset=args.opset, verify=not args.no_verify)
    print(f"wrote {', '.join(str(p) for p in done.files)} (INT8, NNCF, calibrated on {done.calibration_images} "
          f"images of {args.data})")
    if done.fp32_difference is not None:
        print(f"float32 IR verified in OpenVINO: largest difference to the PyTorch model {done.fp32_difference:.3g}")
    print(f"INT8 IR: largest difference to the PyTorch model {done.int8_difference:.3g} (quantization moves it)")
    print(f"mAP50 on {args.data} val: float32 {done.fp32_map['mAP50']:.4f}, INT8 {done.int8_map['mAP50']:.4f} "
          f"({(done.int8_map['mAP50'] - done.fp32_map['mAP50']) * 100:+.2f} points); mAP50-95: float32 "
          f"{done.fp32_map['mAP50_95']:.4f}, INT8 {done.int8_map['mAP50_95']:.4f}")
    return {"output": output, "img_size": size, "max_difference": done.fp32_difference,
            "int8_difference": done.int8_difference, "fp32_map": done.fp32_map, "int8_map": done.int8_map}


def main(args) -> Dict[str, object]:
    """Run the tool; a bad input or a failed check is a one-line error and a non-zero exit."""
    setup_logging(args.verbose)
    try:
        return run(args)
    except ExportError as exc:
        fail(str(exc).splitlines()[0], code=1)
    except ImportError as exc:
        fail(f"{exc.name or exc}: not installed ({INSTALL_EXPORT})")
    except BrokenPipeError:  # the reader of the output has gone: run_tool ends quietly
        raise
    except (CfgError, WeightsError, ImageReadError, ValueError, OSError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def cli(argv=None) -> None:
    """Console entry point: ``yolo-export``."""
    run_tool(main, parse_args(argv), reduce="--img-size")
