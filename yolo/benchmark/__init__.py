"""Timing our detection pipeline against OpenCV DNN (``tools/benchmark.py``).

- :mod:`yolo.benchmark.timing`: several callables timed interleaved over rounds; medians.
- :mod:`yolo.benchmark.opencv_dnn`: the reference pipeline, OpenCV's Darknet importer end to end.
- :mod:`yolo.benchmark.compare`: the measurements ``tools/benchmark.py`` reports (CPU and CUDA).
- :mod:`yolo.benchmark.data`: ``tools/benchmark.py --data``, the training data path per augmentation pipeline.
- :mod:`yolo.benchmark.darknet_reference`: the previous implementation of Darknet's augmentation, the baseline
  ``--data`` times and the tests compare with.
"""
