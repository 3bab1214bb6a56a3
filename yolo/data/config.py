"""YAML dataset configs -> a validated :class:`DataConfig`.

A dataset YAML looks like::

    path: ${YOLO_ASSETS}/coco128     # dataset root; env vars expand, relative -> the YAML's folder
    train: images/train2017          # folder of images, a list file (Darknet train.txt), COCO .json or a
                                     # Pascal VOC split (ImageSets/Main/train.txt: yolo.data.voc)
    val: images/train2017
    names: [person, bicycle, ...]    # a list, {0: person, ...}, or a path to a .names file
    nc: 80                           # optional; checked against len(names)

``train``/``val`` resolve against ``path``. A COCO JSON split reads its images from
``train_images``/``val_images`` (default: ``path``); for a COCO split ``names`` may be left out
and is then taken from the JSON's categories. ``generate: shapes`` (or a mapping with
``name: shapes`` and keyword arguments) builds the synthetic shapes dataset on first use.

A Darknet ``.data`` file (``classes``, ``train``, ``valid``, ``names``; :mod:`yolo.data.darknet_data`) is
accepted wherever a dataset YAML is.

Every error is a :class:`DataError` that names the YAML file (and the key) that is wrong.
"""
from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import yaml

from yolo.counts import MAX_CLASSES
from yolo.data.darknet_data import is_darknet_data, read_darknet_data
from yolo.data.shapes import ensure_shapes_dataset
from yolo.errors import DataError, shown
from yolo.files.yaml_files import load_yaml, yaml_problem
from yolo.files.names import read_names

logger = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]

# ${VAR}, ${VAR:-default} and $VAR
_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_env(text: str, source: Optional[PathLike] = None) -> str:
    """Expand ``${VAR}``, ``${VAR:-default}`` and ``$VAR`` in ``text`` and a leading ``~``.

    An unset variable without a default is an error (a silent empty string would turn
    ``${YOLO_ASSETS}/coco128`` into ``/coco128``).
    """

    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        value = os.environ.get(name)
        if value:
            return value
        if default is not None:
            return default
        raise DataError(f"environment variable {name} is not set (used in '{text}')", source)

    return os.path.expanduser(_ENV_PATTERN.sub(replace, text))


def is_coco_json(path: PathLike) -> bool:
    return str(path).lower().endswith(".json")


@dataclass
class DataConfig:
    """A dataset: where its splits are and what its classes are called.

    Attributes:
        root: dataset root folder (absolute).
        train, val: absolute paths of an image folder, a list file (one image path per line,
            relative paths against the list file's folder) or a COCO ``.json``.
        names: class names; label ``i`` is ``names[i]``.
        num_classes: ``len(names)`` (given ``nc`` must agree).
        train_images, val_images: image folders of COCO JSON splits (default ``root``).
        generate: ``{"name": "shapes", ...kwargs}`` when the data is synthesized on first use.
        source: the YAML file this config came from (for error messages).
        names_file: the ``.names`` file the names were read from (None when the YAML lists them).
    """

    root: Path
    train: Path
    val: Path
    names: List[str]
    num_classes: int = -1
    train_images: Optional[Path] = None
    val_images: Optional[Path] = None
    generate: Optional[Dict[str, Any]] = None
    source: Optional[Path] = None
    names_file: Optional[Path] = None
    check_paths: bool = field(default=True, repr=False)

    def __post_init__(self):
        src = self.source or "<data config>"
        self.root = Path(self.root)
        self.train, self.val = Path(self.train), Path(self.val)
        if not isinstance(self.names, (list, tuple)) or not self.names:
            raise DataError("'names' must be a non-empty list of class names", src)
        self.names = [str(n) for n in self.names]
        duplicates = sorted({n for n in self.names if self.names.count(n) > 1})
        if duplicates:
            raise DataError(f"'names' has duplicate class names: {duplicates}", src)
        if self.num_classes == -1:
            self.num_classes = len(self.names)
        if self.num_classes != len(self.names):
            raise DataError(
                f"class count mismatch: nc={self.num_classes} but 'names' lists {len(self.names)} classes", src)
        for split in ("train", "val"):
            images_key = f"{split}_images"
            path: Path = getattr(self, split)
            if is_coco_json(path) and getattr(self, images_key) is None:
                setattr(self, images_key, self.root)
            if getattr(self, images_key) is not None:
                setattr(self, images_key, Path(getattr(self, images_key)))
            if not self.check_paths:
                continue
            if not path.exists():
                hint = "" if self.root.is_dir() else f" (the dataset root {self.root} does not exist either)"
                raise DataError(f"'{split}': {path} does not exist{hint}", src)
            images_dir = getattr(self, images_key)
            if images_dir is not None and not images_dir.is_dir():
                raise DataError(f"'{images_key}': {images_dir} is not a folder", src)

    def split(self, name: str) -> Path:
        """The path of split ``"train"`` or ``"val"``."""
        if name not in ("train", "val"):
            raise ValueError(f"unknown split {name!r}: use 'train' or 'val'")
        return getattr(self, name)

    def images_dir(self, name: str) -> Optional[Path]:
        """Image folder of a COCO JSON split, None for YOLO-layout splits."""
        return getattr(self, f"{name}_images")


def _names_from_coco(path: Path) -> List[str]:
    with open(path, encoding="utf-8") as f:
        categories = json.load(f).get("categories", [])
    return [c["name"] for c in sorted(categories, key=lambda c: c["id"])]


def _checked_names(raw: Any, yaml_path: Path) -> Any:
    """``raw`` when it is a names file, or at most :data:`MAX_CLASSES` names each of them a plain value."""
    if isinstance(raw, (dict, list, tuple)):
        if len(raw) > MAX_CLASSES:
            raise DataError(f"'names' lists {len(raw):,} classes, more than the {MAX_CLASSES:,} allowed", yaml_path)
        for value in (raw.values() if isinstance(raw, dict) else raw):
            if not isinstance(value, (str, int, float)):
                raise DataError(f"'names' holds a {type(value).__name__} where a class name belongs: one name "
                                "an entry", yaml_path)
    return raw


def _parse_names(raw: Any, yaml_path: Path, root: Path) -> Tuple[List[str], Optional[Path]]:
    """The class names of ``names:`` and the ``.names`` file they came from (None for a list or mapping)."""
    if isinstance(raw, dict):
        try:
            keys = sorted(int(k) for k in raw)
        except (TypeError, ValueError):
            raise DataError("'names' as a mapping must have integer keys (0: person, 1: bicycle, ...)",
                            yaml_path) from None
        if keys != list(range(len(keys))):
            raise DataError(f"'names' keys must be 0..{len(keys) - 1} without gaps, got {keys}", yaml_path)
        return [str(raw[k] if k in raw else raw[str(k)]) for k in keys], None
    if isinstance(raw, (list, tuple)):
        return [str(n) for n in raw], None
    if isinstance(raw, str):
        text = expand_env(raw, yaml_path)
        candidates = [Path(text)] if os.path.isabs(text) else [root / text, yaml_path.parent / text]
        for candidate in candidates:
            if candidate.exists() and not candidate.is_dir():  # a FIFO or a device is refused by read_names
                names = read_names(candidate)
                if not names:
                    raise DataError(f"'names' file {candidate} is empty", yaml_path)
                return names, candidate.resolve()
        raise DataError(f"'names' file {text} not found (looked in {', '.join(str(c.parent) for c in candidates)})",
                        yaml_path)
    raise DataError(f"'names' must be a list, a mapping or a .names file, got {type(raw).__name__}", yaml_path)


def _resolve(raw: Any, key: str, base: Path, yaml_path: Path) -> Path:
    if not isinstance(raw, (str, os.PathLike)):
        raise DataError(f"'{key}' must be a path, got {type(raw).__name__}", yaml_path)
    path = Path(expand_env(str(raw), yaml_path))
    # absolute and normalized, but links kept as written: a split folder that is a link to another dataset's
    # images takes the labels beside the link, as Darknet reads the path it is given
    return Path(os.path.abspath(path if path.is_absolute() else base / path))


def _resolve_split(raw: Any, key: str, root: Path, yaml_path: Path) -> Path:
    """A split's path (``train``, ``val``, ``*_images``) under ``root``; one starting ``../`` that is not there is
    looked for without it, as ultralytics does: Roboflow writes ``train: ../train/images`` in a ``data.yaml`` that
    sits in the dataset folder itself, beside ``train/``."""
    path = _resolve(raw, key, root, yaml_path)
    text = str(raw).replace("\\", "/")
    if not path.exists() and text.startswith("../"):
        beside = _resolve(text[3:], key, root, yaml_path)
        if beside.exists():
            logger.info("%s: '%s: %s' read as %s (the folder beside the YAML)", yaml_path, key, raw, beside)
            return beside
    return path


# The shapes generator's settings and their allowed ranges: checked before anything is generated, so a
# typo (num_train: 4000000) is an error with its line rather than hours of image drawing.
_GENERATE_RANGES = {"num_train": (0, 100_000), "num_val": (0, 100_000), "seed": (0, 2 ** 32 - 1),
                    "max_shapes": (1, 50)}
_GENERATE_SIDES = (32, 4096)


def _refuse_file_in_root(root: Path, text: Any, yaml_path: Path) -> None:
    """A dataset root at or under a file (``${YOLO_DATASETS}/shapes`` with ``YOLO_DATASETS`` set to a file) is a
    :class:`DataError` at the ``path:`` line naming the file and the variables the path is made of, not the
    ``File exists`` of a folder that cannot be made."""
    blocker = next((p for p in (root, *root.parents) if p.exists() and not p.is_dir()), None)
    if blocker is None:
        return
    variables = [m.group(1) or m.group(3) for m in _ENV_PATTERN.finditer(str(text))]
    hint = f"; {' and '.join(variables)} must name a folder" if variables else ""
    raise DataError(f"'path: {shown(text)}' is {shown(root)}, but {shown(blocker)} is a file, not a folder{hint}",
                    yaml_path, _key_line(yaml_path, "path"))


def _key_line(yaml_path: Path, key: Any) -> Optional[int]:
    """The first line of ``yaml_path`` that sets ``key`` (for messages), or None."""
    pattern = re.compile(rf"^\s*{re.escape(str(key))}\s*:")  # a YAML key may be a number
    for number, line in enumerate(yaml_path.read_text(encoding="utf-8").splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def _check_generate(generate: Dict[str, Any], yaml_path: Path) -> None:
    """Refuse unknown or out-of-range ``generate:`` settings with the YAML line."""
    for key, value in generate.items():
        if key == "name":
            continue
        line = _key_line(yaml_path, key)
        if key == "size_range":
            low, high = _GENERATE_SIDES
            ok = (isinstance(value, (list, tuple)) and len(value) == 2
                  and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                  and low <= value[0] <= value[1] <= high)
            if not ok:
                raise DataError(f"'generate: size_range' must be two integers [min, max] with {low} <= min <= max "
                                f"<= {high}, got {value!r}", yaml_path, line)
        elif key in _GENERATE_RANGES:
            low, high = _GENERATE_RANGES[key]
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise DataError(f"'generate: {key}' must be an integer from {low} to {high:,}, got {value!r}",
                                yaml_path, line)
        else:
            known = ", ".join(["name", "size_range", *_GENERATE_RANGES])
            raise DataError(f"'generate': unknown setting '{key}' (known: {known})", yaml_path, line)


def load_data_config(path: PathLike, prepare: bool = True, training: bool = True) -> DataConfig:
    """Read a dataset YAML, or a Darknet ``.data`` file (:mod:`yolo.data.darknet_data`).

    Args:
        path: the YAML file (or ``.data`` file).
        prepare: when the YAML has ``generate:``, create the dataset if it is missing
            (``False``: leave the disk alone; the paths are then not checked either).
        training: ``False`` for evaluation: a Darknet ``.data`` file then needs no ``train=``
            (:func:`yolo.data.darknet_data.read_darknet_data`).

    Raises:
        DataError: naming the YAML file, for any missing key, bad value or missing path.
    """
    yaml_path = Path(path).resolve()
    if not yaml_path.is_file():
        raise DataError("dataset config not found", yaml_path)
    if is_darknet_data(yaml_path):  # Darknet's obj.data: classes, train, valid, names
        return DataConfig(**read_darknet_data(yaml_path, training=training), source=yaml_path)
    try:
        raw = load_yaml(yaml_path)
    except yaml.YAMLError as e:
        problem, line = yaml_problem(e)
        raise DataError(f"not valid YAML: {shown(problem)}", yaml_path, line) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read it: {shown(e)}", yaml_path) from None
    if not isinstance(raw, dict):
        raise DataError("a dataset config must be a mapping with keys path, train, val, names", yaml_path)
    # An unknown key is refused, as in a --hyp file: a misspelt one (vall:, name:) would otherwise be dropped
    # without a word. test and download are read by other tools' dataset files, and roboflow (where a Roboflow
    # export came from: workspace, project, version, license, url) is written by Roboflow; all three are ignored here.
    known = ("path", "train", "val", "names", "nc", "train_images", "val_images", "generate", "test", "download",
             "roboflow")
    unknown = [key for key in raw if key not in known]
    if unknown:
        raise DataError(f"unknown key {shown(repr(unknown[0]))} (known: {', '.join(known)})", yaml_path,
                        _key_line(yaml_path, unknown[0]))
    for key in ("train", "val"):
        if key not in raw:
            raise DataError(f"missing required key '{key}'", yaml_path)

    root = _resolve(raw.get("path", "."), "path", yaml_path.parent, yaml_path)
    _refuse_file_in_root(root, raw.get("path", "."), yaml_path)
    train = _resolve_split(raw["train"], "train", root, yaml_path)
    val = _resolve_split(raw["val"], "val", root, yaml_path)
    images = {k: _resolve_split(raw[k], k, root, yaml_path) for k in ("train_images", "val_images") if raw.get(k)}

    generate = raw.get("generate")
    if generate is not None:
        if not isinstance(generate, (str, dict)):
            raise DataError(f"'generate' must be a generator name (shapes) or a mapping with 'name: shapes' and "
                            f"its settings, got {shown(repr(generate))}", yaml_path, _key_line(yaml_path, "generate"))
        generate = {"name": generate} if isinstance(generate, str) else dict(generate)
        if generate.get("name") != "shapes":
            raise DataError(f"'generate': unknown generator {generate.get('name')!r} (known: shapes)", yaml_path)
        _check_generate(generate, yaml_path)
        if prepare:
            kwargs = {k: v for k, v in generate.items() if k != "name"}
            ensure_shapes_dataset(root, **kwargs)

    names_file = None
    if "names" in raw:
        names, names_file = _parse_names(_checked_names(raw["names"], yaml_path), yaml_path, root)
    elif is_coco_json(train) and train.is_file():
        names = _names_from_coco(train)
    else:
        raise DataError("missing required key 'names' (a list, or a .names file)", yaml_path)

    nc = raw.get("nc", -1)
    if not isinstance(nc, int):
        raise DataError(f"'nc' must be an integer, got {nc!r}", yaml_path)
    return DataConfig(root=root, train=train, val=val, names=names, num_classes=nc,
                      train_images=images.get("train_images"), val_images=images.get("val_images"),
                      generate=generate, source=yaml_path, names_file=names_file,
                      check_paths=prepare or generate is None)
