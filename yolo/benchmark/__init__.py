"""Timing our detection pipeline against OpenCV DNN (``tools/benchmark.py``).

- :mod:`yolo.benchmark.opencv_dnn`: the reference pipeline, OpenCV's Darknet importer
  (:mod:`yolo.models.opencv_importer`) end to end; the timing is :mod:`yolo.timing`'s.
- :mod:`yolo.benchmark.compare`: the measurements ``tools/benchmark.py`` reports (CPU and CUDA).
- :mod:`yolo.benchmark.data`: ``tools/benchmark.py --data``, the training data path per augmentation pipeline.
- :mod:`yolo.benchmark.gpu_report`: ``tools/gpu_report.py``, ours beside Darknet's GPU build in one table; its parts:
  :mod:`~yolo.benchmark.gpu_environment` (what can run here), :mod:`~yolo.benchmark.gpu_schedule` (the
  measurements within a time budget, streamed, stopped cleanly), :mod:`~yolo.benchmark.gpu_measure` (our detection
  and training step), :mod:`~yolo.benchmark.gpu_training` (end-to-end training through the trainer),
  :mod:`~yolo.benchmark.darknet_gpu` (Darknet's GPU build and its timings), :mod:`~yolo.benchmark.report_table`.
- :mod:`yolo.benchmark.detection_stages`: where a detection batch's time goes (upload, pre-processing, model,
  post-processing), for ``tools/benchmark.py`` and the GPU report.
- :mod:`yolo.benchmark.darknet_reference`: the previous implementation of Darknet's augmentation, the baseline
  ``--data`` times and the tests compare with.
"""
