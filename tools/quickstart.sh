#!/usr/bin/env bash
# The main job, start to finish, on a fresh machine: install into .venv, then generate the shapes data,
# train a small YOLOv3-tiny-style model from scratch on the CPU, evaluate it (COCO mAP) and draw its
# detections on held-out images. Results: runs/train/shapes, runs/eval/shapes, runs/detect/shapes.
#
#   bash tools/quickstart.sh            # extra arguments go to tools/demo.py (e.g. --epochs 60)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/venv.sh
. tools/venv.sh
ensure_venv
exec .venv/bin/python tools/demo.py "$@"
