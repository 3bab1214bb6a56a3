"""How the user started a tool, to repeat it in advice (``continue with: yolo-train --resume ...``)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence


def invoked_command(tool: str, argv: Optional[Sequence[str]] = None) -> str:
    """The command that runs ``tool`` (``"train"``, ...) as the user ran it: ``yolo-train`` for the installed
    command, ``python tools/train.py`` (the path as typed) for the script, ``python -m yolo.cli.train`` for the
    module. Run from elsewhere (``tools/demo.py`` calls the tools in one process): the installed command."""
    argv = sys.argv if argv is None else argv
    argv0 = argv[0] if argv else ""
    path = Path(argv0)
    if path.name == f"yolo-{tool}":
        return path.name
    if path.name == f"{tool}.py":
        if path.parent.name == "cli" and path.parent.parent.name == "yolo":  # python -m yolo.cli.TOOL
            return f"python -m yolo.cli.{tool}"
        return f"python {argv0}"
    return f"yolo-{tool}"


__all__ = ["invoked_command"]
