"""Timing our detection pipeline against OpenCV DNN (``tools/benchmark.py``).

- :mod:`yolo.benchmark.timing`: several callables timed interleaved over rounds; medians.
- :mod:`yolo.benchmark.opencv_dnn`: the reference pipeline, OpenCV's Darknet importer end to end.
- :mod:`yolo.benchmark.compare`: the measurements ``tools/benchmark.py`` reports (CPU and CUDA).
"""
