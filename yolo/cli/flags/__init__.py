"""The tools' argument parsers, one module per tool (``yolo.cli.flags.NAME.parse_args``).

They import neither torch nor OpenCV, so that ``tools/NAME.py --help`` answers at once (``tools/_launch.py``)
and a bad flag is refused before the heavy imports. Across the tools one idea has one flag: ``--project`` /
``--name`` for the parent and name of a run folder, ``--output`` for an output file, ``--batch-size``,
``--img-size`` (S or H W). Older spellings still work, hidden from ``--help``
(:func:`yolo.cli.flags.common.hidden_alias`).
"""
