"""Darknet's data functions called in-process through ctypes: the OpenCV build's ``image_data_augmentation`` and
``load_data_detection`` (with scripted randomness), and ``blend_truth_mosaic`` of either build.

The randomness shim (``rand_script.c``, compiled on first use) is loaded with ``RTLD_GLOBAL`` before any
libdarknet.so, so Darknet's calls to ``random_gen`` / ``random_float`` / ``rand_int`` / ``rand_uniform_strong`` /
``rand_scale`` reach it (src/utils.c inlines random_gen into the last three, so those are defined too). The
libraries themselves are loaded ``RTLD_LOCAL``: the two builds export the same names and must not mix.

Formats are Darknet's: an image is Float32[3, h, w] RGB planes in [0, 1]; truths are rows ``(x, y, w, h,
class[, track id])`` normalized, a zero ``x`` ending the list.
"""
from __future__ import annotations

import ctypes
import subprocess
from ctypes import POINTER, c_char_p, c_float, c_int, c_uint, c_void_p
from pathlib import Path
from typing import Dict, Sequence, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
RAND_SCRIPT_C = HERE / "rand_script.c"
TRUTH_SIZE = 6  # x, y, w, h, class, track id (Darknet's l.truth_size for [yolo])


class Image(ctypes.Structure):
    _fields_ = [("w", c_int), ("h", c_int), ("c", c_int), ("data", POINTER(c_float))]


class Matrix(ctypes.Structure):
    _fields_ = [("rows", c_int), ("cols", c_int), ("vals", POINTER(POINTER(c_float)))]


class Data(ctypes.Structure):
    _fields_ = [("w", c_int), ("h", c_int), ("X", Matrix), ("y", Matrix), ("shallow", c_int),
                ("num_boxes", POINTER(c_int)), ("boxes", c_void_p)]


_LOADED: Dict[str, ctypes.CDLL] = {}


def _shim(workdir: Path) -> ctypes.CDLL:
    """The randomness shim, compiled into ``workdir`` and loaded globally once per process."""
    if "shim" not in _LOADED:
        out = workdir / "rand_script.so"
        cc = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(out), str(RAND_SCRIPT_C)],
                            capture_output=True, text=True)
        if cc.returncode != 0:
            raise RuntimeError(f"building the randomness shim failed:\n{cc.stderr[-3000:]}")
        shim = ctypes.CDLL(str(out), mode=ctypes.RTLD_GLOBAL)
        shim.rand_script_set.argtypes = [POINTER(c_uint), c_int]
        shim.rand_script_used.restype = c_int
        shim.rand_script_calls.restype = c_char_p
        _LOADED["shim"] = shim
    return _LOADED["shim"]


def _truth_buffer(rows: np.ndarray, max_boxes: int) -> np.ndarray:
    table = np.zeros((max_boxes, TRUTH_SIZE), np.float32)
    rows = np.asarray(rows, np.float32)
    if rows.size:
        rows = rows.reshape(len(rows), -1)[:max_boxes]
        table[:len(rows), :rows.shape[1]] = rows
    return table


def _rows(table: np.ndarray) -> np.ndarray:
    """Darknet's truth list (up to the first zero ``x``) as Float32[K, 5] ``(x, y, w, h, class)``."""
    table = table.reshape(-1, TRUTH_SIZE)
    end = int(np.argmax(table[:, 0] == 0)) if (table[:, 0] == 0).any() else len(table)
    return table[:end, :5].copy()


def _ptr(array: np.ndarray):
    return array.ctypes.data_as(POINTER(c_float))


class DarknetLib:
    """One libdarknet.so (``folder`` of a :func:`darknet_ref.build_reference` build) in this process."""

    def __init__(self, folder: Path, workdir: Path):
        self.shim = _shim(Path(workdir))
        key = str(Path(folder) / "libdarknet.so")
        if key not in _LOADED:
            _LOADED[key] = ctypes.CDLL(key)  # RTLD_LOCAL
        lib = self.lib = _LOADED[key]
        lib.blend_truth_mosaic.restype = None
        lib.blend_truth_mosaic.argtypes = [POINTER(c_float), c_int, c_int, POINTER(c_float), c_int, c_int, c_float,
                                           c_float, c_int, c_int, c_int, c_int, c_int, c_int, c_int, c_int]
        self.opencv = hasattr(lib, "image_data_augmentation")
        if self.opencv:
            lib.load_image_mat_cv.restype = c_void_p
            lib.load_image_mat_cv.argtypes = [c_char_p, c_int]
            lib.release_mat.argtypes = [POINTER(c_void_p)]
            lib.image_data_augmentation.restype = Image
            lib.image_data_augmentation.argtypes = [c_void_p, c_int, c_int, c_int, c_int, c_int, c_int, c_int,
                                                    c_float, c_float, c_float, c_int, c_int, c_int, c_int,
                                                    POINTER(c_float)]
            lib.free_image.argtypes = [Image]
            lib.load_data_detection.restype = Data
            lib.load_data_detection.argtypes = ([c_int, POINTER(c_char_p), c_int, c_int, c_int, c_int, c_int, c_int,
                                                 c_int, c_int, c_int, c_int, c_int]
                                                + [c_float] * 5 + [c_int] * 9)
            lib.free_data.argtypes = [Data]

    # ------------------------------------------------------------------------------ OpenCV build
    def image_data_augmentation(self, path: Path, net_hw: Tuple[int, int], pleft: int, ptop: int, swidth: int,
                                sheight: int, flip: bool, dhue: float, dsat: float, dexp: float,
                                gaussian_noise: int = 0, blur: int = 0, truths: Sequence = (),
                                max_boxes: int = 90) -> np.ndarray:
        """``image_data_augmentation(load_image_mat_cv(path, 1), ...)`` -> Float32[3, h, w]."""
        mat = c_void_p(self.lib.load_image_mat_cv(str(path).encode(), 1))
        if not mat.value:
            raise RuntimeError(f"Darknet's load_image_mat_cv could not read {path}")
        table = _truth_buffer(truths, max_boxes)
        net_h, net_w = net_hw
        image = self.lib.image_data_augmentation(mat, net_w, net_h, pleft, ptop, swidth, sheight, int(flip), dhue,
                                                 dsat, dexp, gaussian_noise, blur, max_boxes, TRUTH_SIZE,
                                                 _ptr(table))
        out = np.ctypeslib.as_array(image.data, shape=(image.c, image.h, image.w)).copy()
        self.lib.free_image(image)
        self.lib.release_mat(ctypes.byref(mat))
        return out

    def load_data_detection(self, paths: Sequence[Path], n: int, net_hw: Tuple[int, int], script: Sequence[int],
                            classes: int = 80, max_boxes: int = 90, flip: int = 1, gaussian_noise: int = 0,
                            blur: int = 0, mixup: int = 0, jitter: float = 0.2, resize: float = 1.0,
                            hue: float = 0.0, saturation: float = 1.0, exposure: float = 1.0, letter_box: int = 0,
                            mosaic_bound: int = 0) -> Tuple[np.ndarray, list, str]:
        """One ``load_data_detection`` call whose random draws are ``script`` (raw ``rand()`` values).

        ``mixup`` is Darknet's ``use_mixup`` (parser.c's mapping: 1 mixup, 2 cutmix, 3 mosaic, 4 both). Returns
        ``(X Float32[n, 3, h, w], truths per image Float32[K, 5], the calls made: 'g' random_gen, 'f'
        random_float, one letter per value used)``.
        """
        values = np.ascontiguousarray(script, dtype=np.uint32)
        self.shim.rand_script_set(values.ctypes.data_as(POINTER(c_uint)), len(values))
        names = [str(p).encode() for p in paths]
        array = (c_char_p * len(names))(*names)
        net_h, net_w = net_hw
        d = self.lib.load_data_detection(n, array, len(names), net_w, net_h, 3, max_boxes, TRUTH_SIZE, classes,
                                         flip, gaussian_noise, blur, mixup, jitter, resize, hue, saturation,
                                         exposure, 0, 0, 0, letter_box, mosaic_bound, 0, 0, 0, 0)
        X = np.stack([np.ctypeslib.as_array(d.X.vals[i], shape=(3, net_h, net_w)).copy() for i in range(n)])
        truths = [_rows(np.ctypeslib.as_array(d.y.vals[i], shape=(max_boxes * TRUTH_SIZE,))) for i in range(n)]
        self.lib.free_data(d)
        calls = self.shim.rand_script_calls().decode()[:self.shim.rand_script_used()]
        return X, truths, calls

    # ------------------------------------------------------------------------------ both builds
    def blend_truth_mosaic(self, current: np.ndarray, piece: np.ndarray, max_boxes: int, net_hw: Tuple[int, int],
                           cut_x: int, cut_y: int, i_mixup: int, shifts: Sequence[int], mosaic_bound: bool
                           ) -> np.ndarray:
        """``blend_truth_mosaic(new_truth=current, old_truth=piece, ...)`` -> the rows of ``new_truth``."""
        new, old = _truth_buffer(current, max_boxes), _truth_buffer(piece, max_boxes)
        net_h, net_w = net_hw
        left, right, top, bot = (int(v) for v in shifts)
        self.lib.blend_truth_mosaic(_ptr(new), max_boxes, TRUTH_SIZE, _ptr(old), net_w, net_h, cut_x, cut_y,
                                    i_mixup, left, right, top, bot, net_w, net_h, int(mosaic_bound))
        return _rows(new)
