"""The GPU report (``tools/gpu_report.py``): ours beside Darknet's GPU build on one GPU, in one markdown table.

Lab tooling, kept out of the ``yolo`` package: it builds Darknet's GPU version from ``../shared/darknet`` beside a
clone and reads ``../shared/assets``, so it runs from a clone only (no installed command). The launcher
``tools/gpu_report.py`` runs :mod:`gpu_lab.cli` with ``tools/`` on ``sys.path``; its flags stay declared in the
package (:mod:`yolo.settings.gpu_report`, :mod:`yolo.cli.flags.gpu_report`), so that ``--help`` answers without
torch and the flag checks of ``tests/test_tool_flags.py`` cover them as every tool's.

- :mod:`gpu_lab.cli`: the tool (settings from the flags, the report printed as it is measured).
- :mod:`gpu_lab.gpu_report`: the measurements and the report; its parts: :mod:`gpu_lab.gpu_environment` (what can
  run here), :mod:`gpu_lab.gpu_schedule` (the measurements within a time budget, streamed, stopped cleanly),
  :mod:`gpu_lab.gpu_measure` (our detection and training step), :mod:`gpu_lab.gpu_training` (end-to-end training
  through the trainer), :mod:`gpu_lab.darknet_gpu` (Darknet's GPU build and its timings),
  :mod:`gpu_lab.report_table` (the markdown tables).

Where a detection batch's time goes comes from the package (:mod:`yolo.benchmark.detection_stages`), as
``tools/benchmark.py`` prints it.
"""
