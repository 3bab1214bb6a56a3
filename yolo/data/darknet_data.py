"""Darknet's ``.data`` files (``obj.data``, ``coco.data``) as a dataset config, so Darknet users pass theirs as it is.

A ``.data`` file is ``key=value`` lines (Darknet's ``read_data_cfg``, src/option_list.c; ``#`` and ``;`` start
comments)::

    classes = 2
    train   = data/train.txt        # a list of image paths, one a line
    valid   = data/valid.txt        # default: the train list (Darknet's detector map does the same)
    names   = data/obj.names        # one class name a line
    backup  = backup/               # ignored: checkpoints go to the run folder (a note says so)

Relative paths are read as Darknet reads them, from the working directory (Darknet opens them with ``fopen``
from where it runs); when one is not there, the ``.data`` file's own folder is tried, then the folder above it
(``data/obj.data`` naming ``data/train.txt``: Darknet's layout, run from the folder that holds ``data/``). Only
evaluation needs no ``train=`` (``read_darknet_data(path, training=False)``). The image lists are read
by :func:`yolo.data.yolo_layout.list_images` (relative lines as Darknet reads them, from the working directory; then
from the list's folder, the folder above it, the ``.data`` file's folder and the one above it) and every
image's label file is found by Darknet's rule (:func:`yolo.data.yolo_layout.label_path_for`: ``images`` or
``JPEGImages`` becomes ``labels``, the extension ``.txt``; else beside the image).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, Tuple

from yolo.errors import DataError
from yolo.files.names import read_names
from yolo.files.small_text import read_small_text

logger = logging.getLogger(__name__)

# Keys Darknet's detector reads from a .data file that do not concern a dataset here.
IGNORED_KEYS = {"backup": "checkpoints are written to the run folder (runs/train/NAME)",
                "eval": "evaluation is COCO mAP", "results": "results go to the run folder",
                "map": "class ids map to themselves", "difficult": "no difficult-image list is used",
                "labels": "names= is read instead", "top": "classifier option", "test": "no test split is used"}
TRAINING_KEYS = {"backup"}  # read by training only: evaluation does not mention them


def is_darknet_data(path) -> bool:
    """Whether ``path`` names a Darknet ``.data`` file (by its suffix)."""
    return str(path).lower().endswith(".data")


def read_data_options(path: Path) -> Dict[str, Tuple[str, int]]:
    """``key -> (value, line number)`` of a ``.data`` file; a line without ``=`` is a :class:`DataError`."""
    try:
        text = read_small_text(path, "Darknet .data file")
    except FileNotFoundError:
        raise DataError("Darknet .data file not found", path) from None
    except UnicodeDecodeError:
        raise DataError("not a text file (a Darknet .data file is key=value lines)", path) from None
    options: Dict[str, Tuple[str, int]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise DataError(f"expected key=value (classes, train, valid, names), got {line!r}", path, number)
        options[key.strip()] = (value.strip(), number)
    return options


def _resolve(value: str, key: str, line: int, data_path: Path) -> Path:
    """``value`` of ``key`` as an existing path: from the working directory as Darknet, else the file's folder, else
    the folder above it."""
    path = Path(os.path.expanduser(os.path.expandvars(value)))
    bases = [Path.cwd(), data_path.parent, data_path.parent.parent]
    candidates = [path] if path.is_absolute() else list(dict.fromkeys(base / path for base in bases))
    for candidate in candidates:
        if candidate.exists():
            return Path(os.path.abspath(candidate))  # links kept, as Darknet opens the path it is given
    where = " or ".join(str(c.parent) for c in candidates)
    raise DataError(f"{key}={value}: not found (relative paths are read from the working directory, as Darknet "
                    f"does, then from the .data file's folder and the one above it; looked in {where})",
                    data_path, line)


def read_darknet_data(path, training: bool = True) -> Dict[str, Any]:
    """The fields of a :class:`yolo.data.config.DataConfig` from the ``.data`` file ``path``: ``root`` (the
    working directory, the base Darknet reads relative paths from), ``train``, ``val``, ``names`` and
    ``num_classes``, and ``names_file``. Every problem is a :class:`DataError` naming the file and line.

    ``training=False`` (evaluation): ``train=`` may be absent when ``valid=`` is there (``train`` is then the
    ``valid`` list, never read), and keys only training reads (``backup=``) pass without a note."""
    data_path = Path(path).resolve()
    options = read_data_options(data_path)
    if "names" not in options and "labels" in options:  # Darknet's get_metadata reads labels= without names=
        options["names"] = options.pop("labels")
    if "names" not in options:
        raise DataError("missing 'names=' (a Darknet .data file needs train= and names=)", data_path)
    if "train" not in options and (training or "valid" not in options):
        needs = "train= and names=" if training else "valid= (or train=) and names= to evaluate"
        raise DataError(f"missing '{'train' if training else 'valid'}=' (a Darknet .data file needs {needs})",
                        data_path)
    for key, why in IGNORED_KEYS.items():
        if key in options and (training or key not in TRAINING_KEYS):
            logger.info("%s:%d: %s=%s ignored: %s", data_path, options[key][1], key, options[key][0], why)
    unknown = sorted(set(options) - set(IGNORED_KEYS) - {"classes", "train", "valid", "names"})
    if unknown:
        logger.warning("%s: ignoring keys Darknet's detector does not read: %s", data_path, unknown)
    train = _resolve(options["train"][0], "train", options["train"][1], data_path) if "train" in options else None
    valid_value, valid_line = options.get("valid") or options["train"]  # Darknet: valid defaults to train
    val = _resolve(valid_value, "valid", valid_line, data_path)
    train = train or val  # evaluation without train=: never read
    names_value, names_line = options["names"]
    names_file = _resolve(names_value, "names", names_line, data_path)
    if not names_file.is_file():
        raise DataError(f"names={names_value}: {names_file} is not a file", data_path, names_line)
    names = read_names(names_file)
    if not names:
        raise DataError(f"names={names_value}: {names_file} lists no class name", data_path, names_line)
    num_classes = len(names)
    if "classes" in options:
        value, line = options["classes"]
        try:
            num_classes = int(value)
        except ValueError:
            raise DataError(f"classes={value} is not an integer", data_path, line) from None
        if num_classes != len(names):
            raise DataError(f"classes={num_classes} but {names_file} lists {len(names)} names", data_path, line)
    return {"root": Path.cwd().resolve(), "train": train, "val": val, "names": names, "num_classes": num_classes,
            "names_file": names_file}


__all__ = ["IGNORED_KEYS", "is_darknet_data", "read_darknet_data", "read_data_options"]
