#!/usr/bin/env python
"""Measure ours against Darknet's GPU build on this GPU and print one markdown table with the ratios. The code is
in yolo/cli/gpu_report.py (it builds Darknet from ../shared/darknet beside a clone, so it is not an installed
command); ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

try:
    from yolo.cli.gpu_report import cli
except ModuleNotFoundError as exc:  # a fresh machine: name the module the package needs, not a traceback
    raise SystemExit(f"error: the Python module '{exc.name}' is not installed; the report needs it "
                     "(PyTorch, torchvision, numpy and OpenCV at least)")

if __name__ == "__main__":
    cli()
