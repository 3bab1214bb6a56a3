"""Every error the package raises on bad input. Each message is one line that names where the problem is
(file, and line when known), so the tools can print it as it is instead of a traceback."""
from __future__ import annotations

import os
from typing import Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

# The longest value a message echoes (a label line, a name, a path, a YAML snippet), and the longest message.
MAX_SHOWN = 200
MAX_MESSAGE = 2000


def shown(text: object, limit: int = MAX_SHOWN, keep: str = "") -> str:
    """``text`` as it may be echoed in a message: control and invisible characters written as escapes
    (``\\x1b``: a terminal escape sequence in a label line cannot clear the screen), except those in ``keep``;
    and at most ``limit`` characters, the rest counted (``... (312,000,000 characters)``)."""
    text = str(text)
    cut = text[:limit]
    out = "".join(ch if ch.isprintable() or ch in keep else ch.encode("unicode_escape").decode("ascii")
                  for ch in cut)
    return out if len(text) <= limit else f"{out}... ({len(text):,} characters)"


class CfgError(ValueError):
    """A problem in a Darknet cfg, located at ``source:line``."""

    def __init__(self, message: str, source: str = "<cfg>", line: Optional[int] = None):
        self.source = source
        self.line = line
        self.problem = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(shown(f"{where}: {message}", MAX_MESSAGE))


class WeightsError(ValueError):
    """A weights file that does not fit the model, or is not a Darknet weights file."""


class DataError(ValueError):
    """A problem with a dataset or its config, located at ``source`` (file, and line when known)."""

    def __init__(self, message: str, source: Optional[PathLike] = None, line: Optional[int] = None):
        if source is None and line is None:
            message = _from_loader_worker(message)
        self.source = str(source) if source is not None else None
        self.line = line
        self.problem = message
        if source is None:
            text = message
        elif line is None:
            text = f"{source}: {message}"
        else:
            text = f"{source}:{line}: {message}"
        super().__init__(shown(text, MAX_MESSAGE, keep="\n"))  # DataError may list problems, one a line


def _from_loader_worker(message: str) -> str:
    """The message of a :class:`DataError` raised in a data loader worker process. PyTorch raises it again in the
    main process as ``DataError(text)``, ``text`` being ``Caught DataError in DataLoader worker process N.``, the
    worker's traceback, and last the error's own line ``yolo.errors.DataError: MESSAGE``: only MESSAGE (the file
    and what is wrong with it) is for the user."""
    if not message.startswith("Caught DataError in DataLoader worker process"):
        return message
    marker = "\nyolo.errors.DataError: "
    at = message.rfind(marker)
    return message[at + len(marker):].rstrip("\n") if at >= 0 else message


class ImageReadError(OSError):
    """An image file that is missing, unreadable or not a decodable image."""


class DecoderUnavailableError(ValueError):
    """A decode that cannot run on this machine (``stb``: no C compiler to build stb_image with); the message
    says what is missing."""


class NativeBuildError(RuntimeError):
    """C code of the package (:mod:`yolo.files.native`) that is not built and cannot be. ``reason``: ``"no
    compiler"``, ``"cache folder"`` (not writable) or ``"compile"`` (the compiler failed); ``details``: the
    folder, the compiler, the source and the compiler's last line (``why``) where they apply. Each user says it
    in its own terms."""

    def __init__(self, message: str, reason: str, **details):
        super().__init__(message)
        self.reason, self.details = reason, details


class ConfigError(ValueError):
    """A bad training setting; names where it came from."""


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; the message names the epoch and iteration."""


class LoaderWorkerError(RuntimeError):
    """A data loader worker process died (``kill -9``, the OOM killer) where the run cannot save and stop on
    its own (under DDP); the message names the worker."""


class TrainingProcessLost(RuntimeError):
    """Another process of a distributed run died (``kill -9``, the OOM killer, a lost node): this one cannot go
    on; the message says which collective failed."""


class ExportError(RuntimeError):
    """An export that could not be written, or whose file does not reproduce the PyTorch model."""


class AnchorCfgError(ValueError):
    """A cfg that cannot take the new anchors; the message names the file and line."""


class OutputError(OSError):
    """A file or folder that could not be written (the disk is full, the file system is read-only, no
    permission); the message names it, says why and what to do (:mod:`yolo.files.write_errors`)."""
