"""The tools' argument parsers, one module per tool (``yolo.cli.flags.NAME.parse_args``).

They import neither torch nor OpenCV, so that ``tools/NAME.py --help`` answers at once (``tools/_launch.py``)
and a bad flag is refused before the heavy imports. Across the tools one idea has one flag: ``--project`` /
``--name`` for the parent and name of a run folder, ``--output`` for an output file, ``--batch-size``,
``--img-size`` (S or H W). Older spellings still work, hidden from ``--help``
(:func:`yolo.cli.flags.common.hidden_alias`).

A flag that sets a setting of the package is not written here: train's, detect's and eval's are generated from
the dataclasses that declare each setting once, with its default, type and help (:mod:`yolo.settings`;
:func:`yolo.cli.flags.common.add_setting_flags`), and the tool turns its parsed flags back into that dataclass
in one call (:func:`yolo.cli.flags.common.settings_from`). These modules add the tools' own flags
(``--source``, ``--verbose``, ...), the descriptions and the examples.
"""
