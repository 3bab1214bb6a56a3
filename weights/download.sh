#!/usr/bin/env bash
# Download official Darknet weights and cfgs, and the COCO class names they detect (coco.names), into this
# folder. Usage: bash weights/download.sh [NAME ...]
set -euo pipefail
cd "$(dirname "$0")"

PJ=https://pjreddie.com/media/files
PJ_CFG=https://raw.githubusercontent.com/pjreddie/darknet/master/cfg
AB=https://github.com/AlexeyAB/darknet/releases/download
AB_CFG=https://raw.githubusercontent.com/AlexeyAB/darknet/master/cfg
PJ_DATA=https://raw.githubusercontent.com/pjreddie/darknet/master/data

fetch() {  # url file
  if [ -s "$2" ]; then echo "have $2"; return; fi
  echo "downloading $2"
  if command -v curl >/dev/null; then curl -fL --retry 3 -o "$2.part" "$1"; else wget -O "$2.part" "$1"; fi
  mv "$2.part" "$2"
}

[ $# -eq 0 ] && set -- yolov3-tiny
for name in "$@"; do
  case "$name" in
    yolov3-tiny|yolov3|yolov3-spp)
      fetch "$PJ/$name.weights" "$name.weights"; fetch "$PJ_CFG/$name.cfg" "$name.cfg" ;;
    darknet53)
      # the backbone's first 74 layers, to train yolov3.cfg from (Darknet's "detector train ... darknet53.conv.74")
      fetch "$PJ/darknet53.conv.74" darknet53.conv.74; fetch "$PJ_CFG/yolov3.cfg" yolov3.cfg ;;
    yolov4)
      fetch "$AB/darknet_yolo_v3_optimal/yolov4.weights" yolov4.weights; fetch "$AB_CFG/yolov4.cfg" yolov4.cfg ;;
    yolov4-tiny)
      fetch "$AB/darknet_yolo_v4_pre/yolov4-tiny.weights" yolov4-tiny.weights; fetch "$AB_CFG/yolov4-tiny.cfg" yolov4-tiny.cfg ;;
    *) echo "unknown name '$name' (known: yolov3-tiny yolov3 yolov3-spp yolov4 yolov4-tiny darknet53)" >&2; exit 2 ;;
  esac
done
# Every model above was trained on COCO: its 80 class names, found beside the cfg by detect and the Detector
fetch "$PJ_DATA/coco.names" coco.names
# md5 of the official yolov3-tiny.weights, to catch a truncated download
if [ -f yolov3-tiny.weights ] && command -v md5sum >/dev/null; then
  echo "3bcd6b390912c18924b46b26a9e7ff53  yolov3-tiny.weights" | md5sum -c -
fi
