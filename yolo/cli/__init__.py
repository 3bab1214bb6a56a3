"""The command-line tools: each module parses its arguments (its parser is in :mod:`yolo.cli.flags`, which
loads no torch) and calls the package.

``python tools/NAME.py ...`` (from a clone) and the installed ``yolo-NAME`` console script run the same
``yolo.cli.NAME.main``.
"""
