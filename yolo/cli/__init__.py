"""The command-line tools: each module parses its arguments and calls the package.

``python tools/NAME.py ...`` (from a clone) and the installed ``yolo-NAME`` console script run the same
``yolo.cli.NAME.main``.
"""
