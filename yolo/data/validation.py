"""Up-front dataset checks: every problem is listed with its file (and line) and the bad part dropped.

The checks catch what silently gives a mAP of 0 elsewhere: labels that are not where the
images say they are, pixel coordinates instead of normalized ones, class ids beyond the
class count, unreadable images. Images without a label file (or with an empty one) are
background images and are kept.
"""
from __future__ import annotations

import codecs
import logging
import math
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from yolo.errors import MAX_MESSAGE, DataError, shown

logger = logging.getLogger(__name__)

# Box edges may stick out of the image by this much (normalized) before the box is reported;
# smaller overshoots (rounding in converters) are clipped silently.
EDGE_TOLERANCE = 0.01
# Boxes narrower or lower than this (normalized) after clipping are degenerate.
MIN_BOX_SIDE = 1e-4
# A label file none of whose lines reads as a label, with at least this many lines, is not listed line by line.
NOT_LABELS_AFTER = 3
# The largest label file read (a line per box: Darknet's max_boxes is 90 a image by default; 16 MiB hold 400,000).
MAX_LABEL_FILE_BYTES = 16 << 20

# A label line's values as Darknet's read_boxes (src/data.c) reads them with fscanf("%d %f %f %f %f"): separated
# by C whitespace only, the class a whole decimal number, the others plain decimal numbers. Python's own int() and
# float() take more (``0.48_9``, Arabic-Indic digits, non-breaking spaces) and would read such a line as Darknet
# never does, so anything else is refused at its line.
_C_WHITESPACE = re.compile(r"[ \t\n\v\f\r]+")
_C_INTEGER = re.compile(r"[+-]?[0-9]+")
_C_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the data: ``path:line: reason``. ``line`` is None for whole files."""

    path: str
    reason: str
    line: Optional[int] = None
    # image: the image is dropped; file: a label file is unusable, its image is dropped;
    # box: one label line / annotation is dropped; orphan: a label file without image (ignored).
    kind: str = "box"
    # What went wrong, for the report's hints: unknown_class, pixel_coords, malformed, ... ("" if unclassified).
    code: str = ""
    # How many dropped entries this one problem stands for (the lines of a list file that name no image, said once).
    count: int = 1

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return shown(f"{where}: {self.reason}", MAX_MESSAGE)  # a label line may hold terminal escapes

    def to_json(self) -> list:
        return [self.path, self.reason, self.line, self.kind, self.code, self.count]

    @classmethod
    def from_json(cls, row: list) -> "Problem":
        return cls(*row)


# split -> the problem block last logged for it in this process (ValidationReport.log lists a block once)
_LOGGED_PROBLEMS: Dict[str, str] = {}


@dataclass
class ValidationReport:
    """The result of checking one split.

    ``problems`` lists everything dropped; the counts describe what was kept.
    """

    source: str
    problems: List[Problem] = field(default_factory=list)
    num_images: int = 0  # images listed by the source
    num_kept_images: int = 0  # readable images (labelled + background)
    num_background: int = 0  # kept images with no boxes
    num_boxes: int = 0  # boxes kept
    num_label_files: int = 0  # label files found for the listed images
    expected_labels_at: Optional[str] = None  # where label files are looked for (for hints)
    num_classes: Optional[int] = None

    @property
    def num_dropped_images(self) -> int:
        return sum(p.count for p in self.problems if p.kind in ("image", "file"))

    @property
    def num_dropped_boxes(self) -> int:
        return sum(p.count for p in self.problems if p.kind == "box")

    def count(self, code: str) -> int:
        return sum(p.count for p in self.problems if p.code == code)

    def hints(self) -> List[str]:
        """Likely causes behind the problems (the usual reasons for a mAP of 0)."""
        hints = []
        n = self.count("unknown_class")
        if n:
            classes = f"{self.num_classes} classes" if self.num_classes is not None else "the configured classes"
            hints.append(f"{n} labels use a class id outside {classes}: does 'names' in the dataset config "
                         "list every class, in the order of the ids?")
        n = self.count("pixel_coords")
        if n:
            hints.append(f"{n} labels look like pixel coordinates: YOLO labels are 'class cx cy w h' "
                         "normalized 0..1 by the image width and height")
        n = sum(1 for p in self.problems if p.kind == "orphan")
        if n:
            hints.append(f"{n} label files match no image: label files must have their image's name "
                         "with a .txt extension")
        missing = self.num_kept_images - self.num_label_files
        if self.num_kept_images and self.num_label_files and missing > self.num_kept_images // 2:
            where = f" (expected at {self.expected_labels_at})" if self.expected_labels_at else ""
            hints.append(f"{missing} of {self.num_kept_images} images have no label file{where}")
        return hints

    def summary(self) -> str:
        text = (f"{self.source}: {self.num_kept_images}/{self.num_images} images usable "
                f"({self.num_background} background), {self.num_boxes} boxes")
        if self.problems:
            text += (f"; {sum(p.count for p in self.problems)} problems: {self.num_dropped_images} images and "
                     f"{self.num_dropped_boxes} labels dropped")
        for hint in self.hints():
            text += f"\n  hint: {hint}"
        return text

    def details(self, limit: Optional[int] = None) -> str:
        shown = self.problems if limit is None else self.problems[:limit]
        lines = [f"  {p}" for p in shown]
        if limit is not None and len(self.problems) > limit:
            lines.append(f"  ... and {len(self.problems) - limit} more (see report.problems)")
        return "\n".join(lines)

    def log(self, log: logging.Logger = logger, limit: int = 50) -> None:
        """Log the summary (INFO, or WARNING when there are problems) and up to ``limit`` details; problems this
        process has already listed for the same split (a val split that is the train split, an evaluation after
        the training in one process) are referred to in one line, not listed again."""
        if not self.problems:
            log.info("%s", self.summary())
            return
        text = f"{self.summary()}\n{self.details(limit)}"
        if _LOGGED_PROBLEMS.get(self.source) == text:
            log.info("%s: the same %d problem(s) as listed above", self.source, len(self.problems))
            return
        _LOGGED_PROBLEMS[self.source] = text
        log.warning("%s", text)

    def raise_if_unusable(self) -> None:
        """Raise :class:`DataError` when no image has a usable box; the message says why."""
        if self.num_boxes > 0:
            return
        if self.num_kept_images == 0:
            reason = f"no usable images ({self.num_images} listed)"
        elif self.num_label_files == 0:
            where = f" at {self.expected_labels_at}" if self.expected_labels_at else ""
            reason = (f"no label files found{where} for {self.num_kept_images} images; labels are looked for "
                      "by replacing the last 'images' folder of each image path with 'labels' "
                      "and the extension with .txt")
        else:
            reason = f"no usable labels in {self.num_label_files} label files"
        text = reason + "".join(f"\nhint: {hint}" for hint in self.hints())
        details = self.details(limit=20)
        raise DataError(text + (f"\nproblems:\n{details}" if details else ""), self.source)


# ----------------------------------------------------------------------------- labels
def _pixel_hint(values: Iterable[float]) -> str:
    if any(v > 1.0 + EDGE_TOLERANCE for v in values):
        return ("; labels must be normalized 0..1 (cx, cy, w, h divided by the image width/height), "
                "these look like pixel coordinates")
    return ""


def parse_label_lines(lines: List[str], path: str, num_classes: int
                      ) -> Tuple[np.ndarray, List[Problem]]:
    """Parse YOLO label lines ``class cx cy w h`` (normalized to 0..1).

    Returns:
        labels: Float32[N, 5] rows (class, cx, cy, w, h), normalized; boxes whose edges stick out
            of the image are clipped to it.
        problems: one :class:`Problem` per dropped line (1-based line numbers).
    """
    rows: List[List[float]] = []
    problems: List[Problem] = []
    seen = set()

    def drop(lineno: int, reason: str, code: str = "malformed") -> None:
        problems.append(Problem(path, reason, lineno, "box", code))

    for lineno, raw in enumerate(lines, start=1):
        text = raw.strip(" \t\n\v\f\r")
        if not text or text.startswith("#"):
            continue
        if "," in text:
            drop(lineno, f"malformed label line '{text[:60]}': values separated by ','; Darknet reads them "
                         "separated by spaces ('class cx cy w h')")
            continue
        fields = _C_WHITESPACE.split(text)
        if len(fields) != 5:
            extra = " (polygon/segment labels are not supported)" if len(fields) > 5 else ""
            drop(lineno, f"malformed label line '{text[:60]}': expected 5 values 'class cx cy w h', "
                         f"got {len(fields)}{extra}")
            continue
        bad = next((v for v in fields if not _C_DECIMAL.fullmatch(v)), None)
        if bad is not None:
            drop(lineno, f"malformed label line '{text[:60]}': '{bad}' is not a number (plain decimal digits "
                         "0-9, as Darknet reads labels)")
            continue
        if not _C_INTEGER.fullmatch(fields[0]):
            drop(lineno, f"malformed label line: class '{fields[0]}' is not an integer (Darknet would read its "
                         "leading digits as the class and the rest as the next value)")
            continue
        values = [float(v) for v in fields]
        if not all(math.isfinite(v) for v in values):
            drop(lineno, f"malformed label line '{text[:60]}': non-finite value")
            continue
        cls, cx, cy, w, h = values
        cls = int(cls)
        if not 0 <= cls < num_classes:
            drop(lineno, f"unknown class {cls}: the dataset has {num_classes} classes (0..{num_classes - 1}); "
                         "check 'names' in the dataset config", "unknown_class")
            continue
        coords = (cx, cy, w, h)
        if any(v < 0.0 or v > 1.0 for v in coords):
            hint = _pixel_hint(coords)
            drop(lineno, f"coordinates out of range 0..1: cx={cx:g} cy={cy:g} w={w:g} h={h:g}" + hint,
                 "pixel_coords" if hint else "out_of_range")
            continue
        if w <= 0.0 or h <= 0.0:
            drop(lineno, f"box has zero width or height: w={w:g} h={h:g}", "zero_size")
            continue
        x1, y1, x2, y2 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
        overshoot = max(-x1, -y1, x2 - 1.0, y2 - 1.0)
        if overshoot > EDGE_TOLERANCE:
            drop(lineno, f"box extends outside the image by {overshoot:.3f} of its size "
                         f"(cx={cx:g} cy={cy:g} w={w:g} h={h:g})", "outside_image")
            continue
        x1, y1, x2, y2 = max(x1, 0.0), max(y1, 0.0), min(x2, 1.0), min(y2, 1.0)
        if x2 - x1 < MIN_BOX_SIDE or y2 - y1 < MIN_BOX_SIDE:
            drop(lineno, "degenerate box (zero area after clipping to the image)", "zero_size")
            continue
        row = (cls, (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1)
        key = tuple(round(v, 6) for v in row)
        if key in seen:
            drop(lineno, "duplicate of an earlier label line", "duplicate")
            continue
        seen.add(key)
        rows.append(list(row))
    labels = np.asarray(rows, dtype=np.float32).reshape(-1, 5)
    return labels, problems


def read_label_file(path: Path, num_classes: int) -> Tuple[np.ndarray, List[Problem]]:
    """Parse one label file; an unreadable file is one problem (and no boxes).

    Each line is decoded on its own, so a line that is not UTF-8 text is dropped and reported like any
    other malformed line while the image keeps its valid boxes. A byte-order mark is tolerated.
    """
    def unusable(reason: str, code: str = "bad_label_file") -> Tuple[np.ndarray, List[Problem]]:
        return np.zeros((0, 5), np.float32), [Problem(str(path), f"{reason}; its image is dropped", None, "file", code)]

    try:
        st = path.stat()
    except OSError as e:  # a broken link
        return unusable(f"cannot read label file ({e.strerror or e})")
    if stat.S_ISDIR(st.st_mode):
        return np.zeros((0, 5), np.float32), [Problem(str(path), "is a folder where the image's label file belongs; "
                                                      "its image is dropped (rename the folder)", None, "file",
                                                      "bad_label_file")]
    if not stat.S_ISREG(st.st_mode):  # reading a FIFO waits for a writer forever, a device never ends
        return unusable(f"not a regular file ({_file_type(st.st_mode)}): a label file must be a regular text file")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_LABEL_FILE_BYTES + 1)  # never more, whatever the file became since its stat
    except OSError as e:  # perhaps this time only (too many open files): never cached
        return unusable(f"cannot read label file ({e.strerror or e})", "unreadable_label_file")
    if len(data) > MAX_LABEL_FILE_BYTES:
        return unusable(f"label file of {st.st_size:,} bytes, more than the {MAX_LABEL_FILE_BYTES:,} a label file may "
                        "have (one line per box)")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    lines: List[str] = []
    undecodable: List[Problem] = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append("")  # keeps the line numbers of the lines after it
            undecodable.append(Problem(str(path), f"malformed label line {raw[:40]!r}: not UTF-8 text", lineno,
                                       "box", "malformed"))
    labels, problems = parse_label_lines(lines, str(path), num_classes)
    problems = sorted(undecodable + problems, key=lambda problem: problem.line or 0)
    if len(labels) == 0 and len(problems) >= NOT_LABELS_AFTER and all(p.code == "malformed" for p in problems):
        problems = [_not_a_label_file(path, problems)]
    return labels, problems


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _not_a_label_file(path: Path, problems: List[Problem]) -> Problem:
    """One problem, without the lines' text, for a "label file" that is some other file: a dataset may point an
    image's label path anywhere (a link to a private key, ``/etc/passwd``), and its lines must not reach a log."""
    numbers = ", ".join(str(p.line) for p in problems[:10]) + (", ..." if len(problems) > 10 else "")
    return Problem(str(path), f"not a label file: none of its {len(problems):,} lines reads as 'class cx cy w h' "
                   f"(lines {numbers}; their text is not shown); its image is kept without boxes",
                   problems[0].line, "box", "malformed", len(problems))
