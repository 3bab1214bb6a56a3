"""Every setting of the tools and the Python API declared once: a dataclass field with its default, type,
command-line flag and help text (:func:`yolo.settings.declare.setting`).

* :mod:`~yolo.settings.train` - :class:`TrainOptions` (``tools/train.py``, ``Trainer``);
* :mod:`~yolo.settings.detect` - :class:`DetectorOptions` (``tools/detect.py``, ``Detector``);
* :mod:`~yolo.settings.evaluate` - :class:`EvalOptions` (``tools/eval.py``);
* :mod:`~yolo.settings.values` - reading command-line values (checked numbers, ``--img-size``).

The tools' parsers are generated from these declarations (:mod:`yolo.cli.flags`). Nothing here loads torch
(``--help`` answers at once); it imports only the standard library, :mod:`yolo.errors` and :mod:`yolo.ops.sizes`.
"""
