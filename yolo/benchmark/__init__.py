"""Timing our detection pipeline against OpenCV DNN (``tools/benchmark.py``).

- :mod:`yolo.benchmark.opencv_dnn`: the reference pipeline, OpenCV's Darknet importer
  (:mod:`yolo.models.opencv_importer`) end to end; the timing is :mod:`yolo.timing`'s.
- :mod:`yolo.benchmark.compare`: the measurements ``tools/benchmark.py`` reports (CPU and CUDA).
- :mod:`yolo.benchmark.detection_stages`: where a detection batch's time goes (upload, pre-processing, model,
  post-processing), for ``tools/benchmark.py`` and the GPU report.
- :mod:`yolo.benchmark.runtimes`: ``tools/benchmark.py --runtimes``, the model in PyTorch, onnxruntime and OpenVINO.
- :mod:`yolo.benchmark.data`: ``tools/benchmark.py --data``, the training data path per augmentation pipeline;
  :mod:`yolo.benchmark.loader`: ``--loader-workers``, the training loader alone.

The GPU report against Darknet's GPU build (``tools/gpu_report.py``: its build driver, time-budget schedule and
markdown tables) is lab tooling and lives outside the package, in ``tools/gpu_lab/``.
"""
