"""Darknet's image path of ``detector test`` / ``detector map`` as a test reference, on a built
:class:`darknet_ref.DarknetRef`: its ``resize_image`` and ``letterbox_image`` and its decode (``resize.c``, built
on demand against the cached libdarknet), and its own CLI, ``darknet detector test``, whose printed lines are
parsed here.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np

RESIZE_C = Path(__file__).resolve().parent / "resize.c"


def _program(ref) -> Path:
    return ref.program(RESIZE_C)


def _run(args: Sequence[object]) -> str:
    run = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({run.returncode}): {run.stderr[-2000:]}")
    return run.stdout


def darknet_fit(ref, pixels: np.ndarray, net_w: int, net_h: int, letterbox: bool = False) -> np.ndarray:
    """Darknet's ``resize_image`` (or ``letterbox_image``) of ``pixels`` (``uint8`` ``H x W x 3`` RGB, converted
    as ``load_image_stb`` converts its bytes) -> ``Float32[net_h, net_w, 3]``."""
    job = ref._job()
    h, w = pixels.shape[:2]
    np.ascontiguousarray(pixels, dtype=np.uint8).tofile(job / "in.bin")
    _run([_program(ref), "letterbox" if letterbox else "resize", job / "in.bin", h, w, net_w, net_h, job / "out.bin"])
    return np.fromfile(job / "out.bin", dtype=np.float32).reshape(3, net_h, net_w).transpose(1, 2, 0)


def darknet_decode(ref, path: Path) -> np.ndarray:
    """The image as this Darknet build's ``load_image_color`` decodes it (stb_image in the build without OpenCV):
    ``uint8`` ``H x W x 3`` RGB (its floats times 255, which are whole levels)."""
    job = ref._job()
    w, h, c = map(int, _run([_program(ref), "decode", path, job / "out.bin"]).split())
    values = np.fromfile(job / "out.bin", dtype=np.float32).reshape(c, h, w).transpose(1, 2, 0)
    return np.rint(values * 255).astype(np.uint8)


@dataclass(frozen=True)
class PrintedDetection:
    """One line of ``detector test -ext_output``: the class name, the printed percentage (``%.0f`` of the
    score times 100) and the box ``(left_x, top_y, width, height)`` in image pixels, rounded, not clipped."""

    name: str
    percent: int
    box: Tuple[int, int, int, int]


_LINE = re.compile(r"^(?P<name>[^:\n]+): (?P<percent>\d+)%\s*\(left_x:\s*(?P<x>-?\d+)\s+top_y:\s*(?P<y>-?\d+)\s+"
                   r"width:\s*(?P<w>-?\d+)\s+height:\s*(?P<h>-?\d+)\)")


def detector_test(ref, cfg: Path, weights: Path, names: Path, images: Sequence[Path], thresh: float = 0.25
                  ) -> List[List[PrintedDetection]]:
    """Darknet's own ``darknet detector test DATA CFG WEIGHTS -dont_show -ext_output -thresh T`` on ``images``
    (one process; the paths on its standard input, as its prompt reads them), run in a job folder (it writes
    ``predictions.jpg`` and ``bad.list`` there). Returns the printed detections of each image."""
    job = ref._job()
    data = job / "test.data"
    data.write_text(f"names = {names}\n")
    run = subprocess.run([str(ref.folder / "darknet"), "detector", "test", str(data), str(cfg), str(weights),
                          "-dont_show", "-ext_output", "-thresh", repr(float(thresh))],
                         input="".join(f"{p}\n" for p in images), capture_output=True, text=True, cwd=job,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    if run.returncode != 0:
        raise RuntimeError(f"darknet detector test failed ({run.returncode}):\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    # Each image's block starts with "<path>: Predicted in ... milli-seconds."
    blocks = re.split(r"^.*: Predicted in [\d.]+ milli-seconds\.$", run.stdout, flags=re.M)[1:]
    if len(blocks) != len(images):
        raise RuntimeError(f"darknet detector test answered for {len(blocks)} of {len(images)} images:\n"
                           f"{run.stdout[-2000:]}")
    out = []
    for block in blocks:
        found = [m for m in (_LINE.match(line) for line in block.splitlines()) if m]
        out.append([PrintedDetection(m["name"], int(m["percent"]), (int(m["x"]), int(m["y"]), int(m["w"]),
                                                                    int(m["h"]))) for m in found])
    return out
