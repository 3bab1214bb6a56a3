#!/usr/bin/env python
"""Measure ours against Darknet's GPU build on this GPU and print one markdown table with the ratios. The code is
in tools/gpu_lab/ (it builds Darknet from ../shared/darknet beside a clone, so it is lab tooling, not part of the
package nor an installed command); ``--help`` shows examples."""
import _launch  # noqa: F401  (first: see tools/_launch.py)

try:
    from gpu_lab.cli import cli  # tools/gpu_lab, beside this script (on sys.path as the script's folder)
except ModuleNotFoundError as exc:  # a fresh machine: name the module the package needs, not a traceback
    raise SystemExit(f"error: the Python module '{exc.name}' is not installed; the report needs it "
                     "(PyTorch, torchvision, numpy and OpenCV at least)")

if __name__ == "__main__":
    cli()
