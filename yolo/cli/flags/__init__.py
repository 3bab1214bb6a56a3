"""The tools' argument parsers, one module per tool (``yolo.cli.flags.NAME.parse_args``).

They import neither torch nor OpenCV, so that ``tools/NAME.py --help`` answers at once (``tools/_launch.py``)
and a bad flag is refused before the heavy imports. Across the tools one idea has one flag: ``--project`` /
``--name`` for the parent and name of a run folder, ``--output`` for an output file, ``--batch-size``,
``--img-size`` (S or H W). Older spellings still work, hidden from ``--help``
(:func:`yolo.cli.flags.common.hidden_alias`).

No flag is written here: each tool's are generated from the dataclasses that declare each setting once, with its
default, type and help (:mod:`yolo.settings`; :func:`yolo.cli.flags.common.add_setting_flags`), ``--img-size``
from one declaration (:func:`yolo.settings.common.img_size_setting`). The tool turns its parsed flags back into
that dataclass in one call (:func:`yolo.cli.flags.common.settings_from`), or reads them with each declared value
already converted (:func:`yolo.cli.flags.common.parse_declared`: ``--img-size`` as ``(height, width)``). These
modules choose which settings a tool takes, in which order, the hidden older spellings, the descriptions and
the examples.
"""
