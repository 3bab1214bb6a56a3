"""Darknet itself as a test reference: builds ../shared/darknet and drives it through ``harness.c``.

The source tree is found through ``YOLO_DARKNET_SRC`` or, by default, ``../shared/darknet`` beside the
repository. It is built once into a cache folder keyed by the hash of its sources and the harness
(``YOLO_TEST_CACHE``, default ``~/.cache/yolo-tests``), so only the first test run pays the ~20 s build. The
other builds (OpenCV, patched) reuse every object whose preprocessed source they share with an earlier one
(``object_cache.py``): the CUDA-training patches recompile 3 files, not 73.

Use the ``darknet`` fixture (tests/conftest.py): it skips with a reason when the source is absent (a user's
clone) and fails when it is present but does not build.

Conventions of the dumps (Darknet's, not ours):
* ``out(i)``: layer i's output, Float[batch, outputs] reshaped to (batch, out_c, out_h, out_w);
* ``delta(i)``: layer i's ``delta`` after ``train_network_datum``, same shape: the *negative* gradient of
  Darknet's loss summed over the batch. For a [yolo]/[region] layer it is w.r.t. the layer's input
  (the previous layer's output) and is left as the layer computed it; earlier layers' deltas have been
  through their own backward (a conv's delta is then w.r.t. its pre-activation output);
* ``wupd(i)``/``bupd(i)``/``supd(i)``: the parameter updates accumulated by backward (negative gradients);
* ``cost(i)``: the layer's ``cost[0]``.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from darknet_ref.object_cache import compiler_overrides

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HARNESS_C = HERE / "harness.c"
LETTERBOX_C = HERE / "letterbox.c"  # built on demand against the cached libdarknet (not part of the hash)


def darknet_source() -> Path:
    """The Darknet source tree: ``YOLO_DARKNET_SRC`` or ``../shared/darknet`` beside the repository."""
    return Path(os.environ.get("YOLO_DARKNET_SRC", REPO.parent / "shared" / "darknet")).resolve()


# Darknet's CPU build trains differently from its CUDA path (what Darknet users train with, and what our
# trainer follows) in four places of src/; each patch makes the CPU code do what the CUDA code does. Entries:
# (file, text to find exactly once, replacement, why). ``build_reference(patches=CUDA_TRAINING)`` builds with them.
CUDA_TRAINING = (
    ("src/network.c", "if(l.delta && state.train && l.train){", "if(l.delta && state.train){",
     "forward_network zeroed the deltas of layers with l.train only, so those of [route] and [upsample] summed "
     "over every mini-batch of the run (forward_network_gpu zeroes every layer's delta)"),
    ("src/col2im.c", "    caffe_set(height * width * channels, 0.0F, data_im);\n", "",
     "a convolution's backward overwrote the delta of its input layer, dropping what a [route] branch had "
     "already added there (cudnnConvolutionBackwardData adds to it, beta = 1)"),
    ("src/batchnorm_layer.c", '#include "blas.h"\n', '#include "blas.h"\n#include "convolutional_layer.h"\n',
     "backward_bias is declared there"),
    ("src/batchnorm_layer.c",
     "void backward_batchnorm_layer(const layer l, network_state state)\n{\n",
     "void backward_batchnorm_layer(const layer l, network_state state)\n{\n"
     "    backward_bias(l.bias_updates, l.delta, l.batch, l.out_c, l.out_w*l.out_h);\n",
     "the BatchNorm shift (bias) got no gradient and never trained (the CUDA path computes bias_updates)"),
    ("src/batchnorm_layer.c", "delta[index] * 1./(sqrt(variance[f]) + .00001f)",
     "delta[index] * 1./(sqrt(variance[f] + .00001f))",
     "the input gradient divided by sqrt(var) + eps instead of the forward's sqrt(var + eps), which inflates "
     "it for channels of small variance (cuDNN's backward is exact)"),
    ("src/batchnorm_layer.c",
     "scal_cpu(l.out_c, .9, l.rolling_mean, 1);\n        axpy_cpu(l.out_c, .1, l.mean, 1, l.rolling_mean, 1);\n"
     "        scal_cpu(l.out_c, .9, l.rolling_variance, 1);\n        axpy_cpu(l.out_c, .1, l.variance, 1, l.rolling_variance, 1);",
     "scal_cpu(l.out_c, .99, l.rolling_mean, 1);\n        axpy_cpu(l.out_c, .01, l.mean, 1, l.rolling_mean, 1);\n"
     "        scal_cpu(l.out_c, .99, l.rolling_variance, 1);\n        axpy_cpu(l.out_c, .01, l.variance, 1, l.rolling_variance, 1);",
     "the rolling mean and variance moved by 0.1 per mini-batch, cuDNN's by 0.01"),
)


# Darknet's OpenCV build (``build_reference(opencv=True)``): what Darknet users train with. Its
# load_data_detection is the ``#ifdef OPENCV`` branch of src/data.c (mosaic, blur, gaussian_noise, the OpenCV
# image_data_augmentation of src/image_opencv.cpp); the Makefile links OpenCV through pkg-config.
OPENCV_BUILD = ("Makefile", "\nOPENCV=0\n", "\nOPENCV=1\n", "Darknet's OpenCV build")
OPENCV_MISSING = ("Darknet's OpenCV build needs OpenCV's C++ development files: apt-get install libopencv-dev "
                  "(pkg-config --exists opencv4 failed)")


def opencv_version() -> Optional[str]:
    """The system OpenCV that Darknet's OpenCV build links (``pkg-config --modversion opencv4``), or None."""
    try:
        run = subprocess.run(["pkg-config", "--modversion", "opencv4"], capture_output=True, text=True)
    except OSError:
        return None
    return run.stdout.strip() if run.returncode == 0 and run.stdout.strip() else None


def _source_hash(src: Path, patches: Sequence[tuple] = ()) -> str:
    digest = hashlib.sha256()
    for patch in patches:
        digest.update(repr(patch[:3]).encode())
    files = [HARNESS_C, src / "Makefile", src / "build.sh"]
    for folder in ("src", "include"):
        files += sorted(p for p in (src / folder).rglob("*") if p.is_file())
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class BuildError(RuntimeError):
    """Darknet or the harness did not build."""


class OpenCVMissing(BuildError):
    """Darknet's OpenCV build was asked for and OpenCV's C++ development files are not installed."""


def _patched_source(src: Path, patches: Sequence[tuple], folder: Path) -> Path:
    """A copy of the source tree ``src`` in ``folder`` with ``patches`` (see CUDA_TRAINING) applied."""
    for name in ("build.sh", "Makefile", "LICENSE", "src", "include", "3rdparty"):
        (shutil.copytree if (src / name).is_dir() else shutil.copy)(src / name, folder / name)
    for file, find, replace, why in patches:
        path = folder / file
        text = path.read_text()
        if text.count(find) != 1:
            raise BuildError(f"patch for {file} ({why}): the text to replace occurs {text.count(find)} times, not once")
        path.write_text(text.replace(find, replace))
    return folder


def build_reference(src: Optional[Path] = None, cache: Optional[Path] = None,
                    patches: Sequence[tuple] = (), opencv: bool = False) -> "DarknetRef":
    """Build Darknet and the harness once (cached by source hash and ``patches``); returns a :class:`DarknetRef`.

    ``patches``: source changes applied to a copy before building, e.g. :data:`CUDA_TRAINING`.
    ``opencv``: Darknet's OpenCV build (its own cache entry, keyed also by the OpenCV version); raises
    :class:`OpenCVMissing` when ``pkg-config`` does not find ``opencv4``.
    """
    if opencv:
        version = opencv_version()
        if version is None:
            raise OpenCVMissing(OPENCV_MISSING)
        patches = tuple(patches) + (OPENCV_BUILD[:2] + (OPENCV_BUILD[2] + f"# opencv4 {version}\n",
                                                         OPENCV_BUILD[3]),)
    src = src or darknet_source()
    cache = Path(os.environ.get("YOLO_TEST_CACHE", Path.home() / ".cache" / "yolo-tests")) if cache is None else cache
    out = cache / f"darknet-{_source_hash(src, patches)}"
    # The OpenCV build is driven through ctypes (tests/darknet_ref/opencv.py), not the harness, which calls
    # blend_images of the build without OpenCV.
    built = out / ("libdarknet.so" if opencv else "harness")
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".darknet.lock", "w") as lock:  # one build at a time across processes
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.is_file():
            tmp = Path(tempfile.mkdtemp(prefix="darknet-build-", dir=cache))
            try:
                build_src = _patched_source(src, patches, Path(tempfile.mkdtemp(prefix="src-", dir=tmp))) \
                    if patches else src
                compilers = tmp / "compilers"
                compilers.mkdir()
                env = dict(os.environ)
                for name, value in compiler_overrides(compilers, cache).items():
                    env[name] = f"{env[name]} {value}" if env.get(name) else value
                run = subprocess.run(["bash", str(build_src / "build.sh"), str(tmp)], capture_output=True, text=True,
                                     env=env)
                if run.returncode != 0:
                    raise BuildError(f"building Darknet from {src} failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
                cc = subprocess.run(
                    ["gcc", "-O2", "-o", str(tmp / "harness"), str(HARNESS_C), f"-I{tmp / 'include'}",
                     f"-I{tmp / 'src'}", f"-L{tmp}", "-ldarknet", f"-Wl,-rpath,{out}", "-lm", "-fopenmp"],
                    capture_output=True, text=True) if not opencv else None
                if cc is not None and cc.returncode != 0:
                    raise BuildError(f"building the Darknet harness failed:\n{cc.stderr[-3000:]}")
                if patches:
                    shutil.rmtree(build_src)  # the build has its own copy of the patched files
                if out.exists():
                    shutil.rmtree(out)
                tmp.rename(out)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
    return DarknetRef(out)


# ------------------------------------------------------------------------------------------ cfg rewriting
_SECTION = re.compile(r"^\s*\[([^\]]+)\]")


def set_net_options(cfg_text: str, **options) -> str:
    """``cfg_text`` with the given ``[net]`` options set (replaced where present, else added).

    Written independently of ``yolo.models.cfg`` so that the reference does not depend on our parser.
    """
    lines = cfg_text.replace("\r\n", "\n").split("\n")
    start = next(i for i, line in enumerate(lines) if _SECTION.match(line))
    end = next((i for i in range(start + 1, len(lines)) if _SECTION.match(lines[i])), len(lines))
    body = []
    for line in lines[start + 1:end]:
        key = line.split("#")[0].split(";")[0].split("=")[0].strip()
        if "=" in line and key in options:
            continue
        body.append(line)
    added = [f"{key}={value}" for key, value in options.items()]
    return "\n".join(lines[:start + 1] + added + body + lines[end:]) + "\n"


# ------------------------------------------------------------------------------------------- the driver
@dataclass
class LayerMeta:
    index: int
    type: str
    out_c: int
    out_h: int
    out_w: int
    outputs: int
    batch: int
    cost: float
    bflops: float = 0.0  # Darknet's l.bflops (``layers`` mode only)


class LayerDump:
    """What the harness wrote for one run: per-layer arrays by index (see the module docstring)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.layers: List[LayerMeta] = []
        for line in (folder / "layers.txt").read_text().splitlines():
            i, kind, c, h, w, outputs, batch, cost = line.split()
            self.layers.append(LayerMeta(int(i), kind, int(c), int(h), int(w), int(outputs), int(batch), float(cost)))

    def _read(self, stem: str, i: int) -> Optional[np.ndarray]:
        path = self.folder / f"{stem}_{i}.f32"
        return np.fromfile(path, dtype=np.float32) if path.exists() else None

    def _shaped(self, stem: str, i: int) -> Optional[np.ndarray]:
        data = self._read(stem, i)
        if data is None:
            return None
        m = self.layers[i]
        if m.out_c * m.out_h * m.out_w == m.outputs:
            return data.reshape(m.batch, m.out_c, m.out_h, m.out_w)
        return data.reshape(m.batch, -1)

    def out(self, i: int) -> np.ndarray:
        return self._shaped("out", i)

    def delta(self, i: int) -> Optional[np.ndarray]:
        return self._shaped("delta", i)

    def wupd(self, i: int) -> Optional[np.ndarray]:
        return self._read("wupd", i)

    def bupd(self, i: int) -> Optional[np.ndarray]:
        return self._read("bupd", i)

    def supd(self, i: int) -> Optional[np.ndarray]:
        return self._read("supd", i)

    def cost(self, i: int) -> float:
        return self.layers[i].cost


def _write_truth(path: Path, truths: Sequence[np.ndarray]) -> None:
    """Per image: int32 count, then rows (x, y, w, h, class, track id) as float32, normalized to 0..1.
    A 1-D array is written as it is (count ``-len``): a layer's own truth layout, e.g. the per-cell grid of
    a [detection] layer (src/data.c ``fill_truth_region``)."""
    with open(path, "wb") as f:
        for rows in truths:
            rows = np.asarray(rows, dtype=np.float32)
            if rows.ndim == 1:
                np.array([-rows.size], dtype=np.int32).tofile(f)
                rows.tofile(f)
                continue
            rows = rows.reshape(-1, rows.shape[-1] if rows.size else 6)
            if rows.shape[1] == 5:  # no track id given
                rows = np.concatenate([rows, np.zeros((len(rows), 1), np.float32)], 1)
            np.array([len(rows)], dtype=np.int32).tofile(f)
            rows.tofile(f)


CfgLike = Union[str, Path]


class DarknetRef:
    """Runs the harness built in ``folder``. Every call works in a fresh temporary folder under ``workdir``."""

    def __init__(self, folder: Path, workdir: Optional[Path] = None):
        self.folder = Path(folder)
        self.harness = self.folder / "harness"
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="darknet-ref-"))
        self._count = 0

    def _job(self) -> Path:
        self._count += 1
        path = self.workdir / f"job{self._count}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _cfg(self, job: Path, cfg: CfgLike, options: Dict[str, object]) -> Path:
        text = Path(cfg).read_text(encoding="utf-8") if isinstance(cfg, Path) or (
            isinstance(cfg, str) and "\n" not in cfg and Path(cfg).is_file()) else str(cfg)
        path = job / "net.cfg"
        path.write_text(set_net_options(text, **options) if options else text)
        return path

    def _run(self, args: Iterable[str], threads: int = 2) -> str:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        run = subprocess.run([str(self.harness), *map(str, args)], capture_output=True, text=True, env=env)
        if run.returncode != 0:
            raise RuntimeError(f"Darknet harness {' '.join(map(str, args))} failed ({run.returncode}):\n"
                               f"{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        return run.stdout

    def program(self, source: Path) -> Path:
        """A small C program ``source`` built once against this build's ``libdarknet`` (in the work folder)."""
        program = self.workdir / source.stem
        if not program.is_file():
            cc = subprocess.run(["gcc", "-O2", "-o", str(program), str(source), f"-I{self.folder / 'include'}",
                                 f"-L{self.folder}", "-ldarknet", f"-Wl,-rpath,{self.folder}", "-lm", "-fopenmp"],
                                capture_output=True, text=True)
            if cc.returncode != 0:
                raise RuntimeError(f"building {source.name} against libdarknet failed:\n{cc.stderr[-3000:]}")
        return program

    def letterbox(self, image: np.ndarray, net_w: int, net_h: int) -> np.ndarray:
        """Darknet's ``letterbox_image`` on ``image`` Float[C, H, W] (0..1) -> Float[C, net_h, net_w]."""
        program = self.program(LETTERBOX_C)
        job = self._job()
        c, h, w = image.shape
        np.ascontiguousarray(image, dtype=np.float32).tofile(job / "in.bin")
        run = subprocess.run([str(program), str(job / "in.bin"), str(c), str(h), str(w), str(net_w), str(net_h),
                              str(job / "out.bin")], capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"Darknet letterbox failed ({run.returncode}): {run.stderr[-2000:]}")
        return np.fromfile(job / "out.bin", dtype=np.float32).reshape(c, net_h, net_w)

    def forward(self, cfg: CfgLike, weights: Optional[Path], x: np.ndarray, **net_options) -> LayerDump:
        """Inference on ``x`` Float[N, C, H, W] (RGB 0..1). ``net_options`` rewrite [net] (width, height, ...)."""
        job = self._job()
        x = np.ascontiguousarray(x, dtype=np.float32)
        opts = dict(net_options)
        opts.setdefault("height", x.shape[2])
        opts.setdefault("width", x.shape[3])
        opts.setdefault("channels", x.shape[1])
        cfg_path = self._cfg(job, cfg, opts)
        x.tofile(job / "input.f32")
        self._run(["forward", cfg_path, weights or "-", x.shape[0], job / "input.f32", job])
        return LayerDump(job)

    def sequence(self, cfg: CfgLike, weights: Optional[Path], x: np.ndarray, time_steps: int, calls: int = 1,
                 train: bool = False, **net_options) -> List[LayerDump]:
        """``calls`` forward passes with ``time_steps``, recurrent state kept between them; one dump per call.

        ``x`` is Float[calls * N, C, H, W]: call k reads images k*N .. k*N+N-1, a time-major batch of N = T x N/T
        (image t*N/T + s is time step t of sequence s). Each dump's arrays cover all N images. ``train=True``
        forwards with Darknet's training flag (training buffers, no backward).
        """
        job = self._job()
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.shape[0] % calls or (x.shape[0] // calls) % time_steps:
            raise ValueError(f"{x.shape[0]} images do not split into {calls} calls of time_steps={time_steps} x sequences")
        n = x.shape[0] // calls
        opts = {"height": x.shape[2], "width": x.shape[3], "channels": x.shape[1], "time_steps": time_steps,
                "batch": n // time_steps, "subdivisions": 1, **net_options}
        cfg_path = self._cfg(job, cfg, opts)
        x.tofile(job / "input.f32")
        self._run(["sequence", cfg_path, weights or "-", n, time_steps, calls, int(train), job / "input.f32", job])
        return [LayerDump(job / str(k)) for k in range(calls)]

    def train(self, cfg: CfgLike, weights: Optional[Path], x: np.ndarray, truths: Sequence[np.ndarray],
              subdivisions: int = 1, **net_options) -> LayerDump:
        """``train_network_datum`` over ``subdivisions`` sub-batches of ``x`` (no update); see :class:`LayerDump`.

        ``truths``: one array per image of rows (x, y, w, h, class[, track id]), normalized centre boxes, or a
        1-D array per image passed to Darknet as it is (a [detection] layer's per-cell truth grid).
        """
        job = self._job()
        self._prepare_train(job, cfg, x, truths, subdivisions, net_options)
        self._run(["train", job / "net.cfg", weights or "-", job / "input.f32", job / "truth.bin", job])
        return LayerDump(job)

    def step(self, cfg: CfgLike, weights: Optional[Path], x: np.ndarray, truths: Sequence[np.ndarray],
             out_weights: Path, subdivisions: int = 1, **net_options) -> float:
        """Forward + backward over every sub-batch, then one ``update_network``; writes ``out_weights``.

        Returns the learning rate Darknet used for the update.
        """
        job = self._job()
        self._prepare_train(job, cfg, x, truths, subdivisions, net_options)
        out = self._run(["step", job / "net.cfg", weights or "-", job / "input.f32", job / "truth.bin", out_weights])
        return float(re.search(r"^rate (\S+)$", out, re.M).group(1))

    def updates(self, cfg: CfgLike, weights: Optional[Path], x: np.ndarray, truths: Sequence[np.ndarray],
                rounds: int, subdivisions: int = 1, **net_options) -> "tuple[List[float], List[List[LayerDump]], Path]":
        """``rounds`` Darknet training iterations on the same data: each one ``train_network_datum`` per sub-batch
        of ``x`` then ``update_network`` (so momentum and the update counter carry over).

        Returns ``(rates, dumps, final_weights)``: the rate of each update, ``dumps[k][s]`` the train-mode dump
        (:class:`LayerDump`) after sub-batch ``s`` of round ``k`` (before that round's update), and the weights
        file written after the last update.
        """
        job = self._job()
        self._prepare_train(job, cfg, x, truths, subdivisions, net_options)
        out = self._run(["updates", job / "net.cfg", weights or "-", job / "input.f32", job / "truth.bin", rounds,
                         job])
        rates = [float(v) for v in re.findall(r"^rate (\S+)$", out, re.M)]
        dumps = [[LayerDump(job / f"{k}_{s}") for s in range(subdivisions)] for k in range(rounds)]
        return rates, dumps, job / "final.weights"

    def layers(self, cfg: CfgLike, **net_options) -> List[LayerMeta]:
        """Darknet's layer table for ``cfg`` (parse only, batch 1; ``cost`` is 0, ``bflops`` as Darknet counts).

        Raises ``RuntimeError`` with Darknet's message when Darknet refuses the cfg.
        """
        job = self._job()
        cfg_path = self._cfg(job, cfg, dict(net_options))
        out = self._run(["layers", cfg_path], threads=1)
        metas = []
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 9 and parts[0].isdigit():
                i, kind, c, h, w, outputs, batch, cost, bflops = parts
                metas.append(LayerMeta(int(i), kind, int(c), int(h), int(w), int(outputs), int(batch), float(cost),
                                       float(bflops)))
        return metas

    def kmeans(self, points: np.ndarray, init: Sequence[int]) -> "tuple[np.ndarray, int]":
        """Darknet's k-means of box sizes (``do_kmeans``' loop) from the rows ``init`` of ``points``.

        ``points``: Float[N, 2] widths, heights. Returns ``(centres Float32[K, 2] unsorted, iterations)``.
        """
        job = self._job()
        np.ascontiguousarray(points, dtype=np.float32).reshape(-1, 2).tofile(job / "points.f32")
        np.asarray(init, dtype=np.int32).tofile(job / "init.i32")
        out = self._run(["kmeans", len(init), job / "points.f32", job / "init.i32"], threads=1)
        centres = np.array([[float(v) for v in m] for m in re.findall(r"^center (\S+) (\S+)$", out, re.M)],
                           dtype=np.float32)
        return centres, int(re.search(r"^iterations (\d+)$", out, re.M).group(1))

    def augment(self, image: np.ndarray, net_hw: "tuple[int, int]", crop: Sequence[int], flip: bool, dhue: float,
                dsat: float, dexp: float, truths: np.ndarray, max_boxes: int = 200) -> "tuple[np.ndarray, np.ndarray]":
        """Darknet's detector augmentation of one image with its random draws given (harness mode ``augment``).

        ``image``: Float[3, H, W] RGB 0..1; ``crop``: (pleft, pright, ptop, pbot); ``truths``: Float[N, 4]
        (x, y, w, h) normalized, class 0. Returns ``(Float32[3, net_h, net_w], Float32[K, 4] kept truths in
        Darknet's (shuffled) order, x y w h normalized to the input)``.
        """
        job = self._job()
        image = np.ascontiguousarray(image, dtype=np.float32)
        image.tofile(job / "input.f32")
        lines = [f"0 {x:.9g} {y:.9g} {w:.9g} {h:.9g}" for x, y, w, h in np.asarray(truths, np.float32).reshape(-1, 4)]
        (job / "img.txt").write_text("\n".join(lines) + "\n")
        net_h, net_w = net_hw
        self._run(["augment", job / "input.f32", image.shape[2], image.shape[1], net_w, net_h, *map(int, crop),
                   int(flip), repr(float(dhue)), repr(float(dsat)), repr(float(dexp)), job / "img.jpg", max_boxes, job],
                  threads=1)
        out = np.fromfile(job / "image_0.f32", dtype=np.float32).reshape(3, net_h, net_w)
        rows = np.fromfile(job / "truth_0.f32", dtype=np.float32).reshape(-1, 6)
        return out, rows[rows[:, 2] > 0, :4]  # Darknet's truth list ends at the first empty row

    def mixup(self, new: np.ndarray, old: np.ndarray, new_truths: np.ndarray, old_truths: np.ndarray,
              max_boxes: int) -> "tuple[np.ndarray, np.ndarray]":
        """Darknet's mixup of two augmented images (harness mode ``mixup``): ``blend_images(new, 0.5, old, 0.5)``
        and ``blend_truth``. Truths are Float[K, 4] (x, y, w, h); returns the blended pixels (same shape as
        ``new``) and the truth rows Darknet keeps, in its order."""
        job = self._job()
        np.ascontiguousarray(new, dtype=np.float32).tofile(job / "new.f32")
        np.ascontiguousarray(old, dtype=np.float32).tofile(job / "old.f32")
        for name, rows in (("new_truth.f32", new_truths), ("old_truth.f32", old_truths)):
            table = np.zeros((max_boxes, 6), np.float32)
            rows = np.asarray(rows, np.float32).reshape(-1, 4)[:max_boxes]
            table[:len(rows), :4] = rows
            table.tofile(job / name)
        self._run(["mixup", np.asarray(new).size, job / "new.f32", job / "old.f32", job / "new_truth.f32",
                   job / "old_truth.f32", max_boxes, job], threads=1)
        image = np.fromfile(job / "image_0.f32", dtype=np.float32).reshape(np.shape(new))
        rows = np.fromfile(job / "truth_0.f32", dtype=np.float32).reshape(-1, 6)
        return image, rows[rows[:, 0] != 0, :4]

    def rates(self, cfg: CfgLike, updates: int, **net_options) -> np.ndarray:
        """``get_current_rate`` for update numbers 0..updates (Darknet's ``get_current_batch``)."""
        job = self._job()
        opts = {"batch": 1, "subdivisions": 1, **net_options}
        cfg_path = self._cfg(job, cfg, opts)
        out = self._run(["rate", cfg_path, updates])
        return np.array([float(v) for v in re.findall(r"^rate (\S+)$", out, re.M)])

    def _prepare_train(self, job: Path, cfg: CfgLike, x: np.ndarray, truths: Sequence[np.ndarray],
                       subdivisions: int, net_options: Dict[str, object]) -> None:
        x = np.ascontiguousarray(x, dtype=np.float32)
        n = x.shape[0]
        if n % subdivisions or len(truths) != n:
            raise ValueError(f"{n} images, {len(truths)} truth lists, subdivisions={subdivisions}")
        opts = {"batch": n, "subdivisions": subdivisions, "height": x.shape[2], "width": x.shape[3],
                "channels": x.shape[1], **net_options}
        self._cfg(job, cfg, opts)
        x.tofile(job / "input.f32")
        _write_truth(job / "truth.bin", truths)
