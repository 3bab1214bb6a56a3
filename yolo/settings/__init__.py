"""Every setting of the tools and the Python API declared once: a dataclass field with its default, type,
command-line flag and help text (:func:`yolo.settings.declare.setting`).

* :mod:`~yolo.settings.train` - :class:`TrainOptions` (``tools/train.py``, ``Trainer``);
* :mod:`~yolo.settings.detect` - :class:`DetectorOptions` (``tools/detect.py``, ``Detector``), and the detect
  tool's own (:class:`DetectRunOptions`, :class:`DetectToolOptions`);
* :mod:`~yolo.settings.evaluate` - :class:`EvalOptions` (``tools/eval.py``);
* :mod:`~yolo.settings.anchors`, :mod:`~yolo.settings.benchmark`, :mod:`~yolo.settings.convert`,
  :mod:`~yolo.settings.export`, :mod:`~yolo.settings.gpu_report`, :mod:`~yolo.settings.demo` - the settings of
  the tools without a Python API of their own;
* :mod:`~yolo.settings.common` - the flags several tools share (``--device``, ``--verbose``, ``--no-progress``,
  ``--img-size``);
* :mod:`~yolo.settings.values` - reading command-line values (checked numbers, ``--img-size``).

The tools' parsers are generated from these declarations (:mod:`yolo.cli.flags`). Nothing here loads torch
(``--help`` answers at once); it imports only the standard library, :mod:`yolo.errors`, :mod:`yolo.counts`,
:mod:`yolo.ops.sizes`, :mod:`yolo.ops.postprocess_defaults` and :mod:`yolo.files.paths`.
"""
