"""Darknet's GPU build (``GPU=1 CUDNN=1``, no OpenCV) from its source folder, and the timing of its own CLI.

The build is a copy of the source (``src``, ``include``, ``3rdparty``, ``Makefile``) made with ``make`` and
``nvcc`` for the GPU's own compute capability. CUDA and cuDNN need not sit in ``/usr/local/cuda`` and
``/usr/local/cudnn`` (where Darknet's Makefile looks): the toolkit is found from ``nvcc``, cuDNN (and cuBLAS,
cuRAND where the toolkit lacks them) from the ``nvidia-*`` Python packages PyTorch installs, whose libraries
carry only versioned names (``libcudnn.so.9``): the build links them through unversioned links of its own.

What is timed is what Darknet itself prints:

- ``detector test`` (batch 1): ``<image>: Predicted in X milli-seconds.`` per image, the network alone
  (``network_predict``), image after image through one process;
- ``detector train``: per update, ``Loaded: X seconds`` (the wait for the loader thread) and
  `` N: loss, avg avg loss, rate rate, S seconds, I images, H hours left`` (the update itself).
"""
from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from yolo.models.head_sections import MULTISCALE_HEADS

__all__ = ["BuildError", "CudaLibraries", "DarknetTrainIteration", "predicted_ms", "train_iterations",
           "arch_flag", "find_cuda_libraries", "patch_makefile", "make_command", "copy_source", "build_key",
           "build_darknet_gpu", "BackgroundBuild",
           "steady_detect_ms", "steady_train_throughput", "training_cfg", "write_darknet_data", "darknet_detect_ms",
           "darknet_train_throughput", "run_environment", "link_folder"]

# Darknet's own lines (src/detector.c test_detector, train_detector).
_PREDICTED = re.compile(r": Predicted in ([0-9.]+) milli-seconds\.")
_LOADED = re.compile(r"^Loaded: ([0-9.]+) seconds")
_ITERATION = re.compile(r"^\s*(\d+): \S+, \S+ avg loss, \S+ rate, ([0-9.]+) seconds, (\d+) images")

# The headers and libraries GPU=1 CUDNN=1 compiles and links with.
HEADERS = ("cuda_runtime.h", "cublas_v2.h", "curand.h", "cudnn.h")
LIBRARIES = ("cuda", "cudart", "cublas", "curand", "cudnn")


class BuildError(RuntimeError):
    """The GPU build cannot be made here (what is missing, or the tail of the failed build's log)."""


@dataclass
class DarknetTrainIteration:
    """One ``detector train`` update: its number, the seconds waiting for data, the seconds of the update
    (forward, backward and weight update on the GPU) and the images seen so far."""

    iteration: int
    load_s: float
    train_s: float
    images: int


def predicted_ms(text: str) -> List[float]:
    """The network milliseconds of each ``Predicted in X milli-seconds.`` line of ``detector test``, in order."""
    return [float(m.group(1)) for m in _PREDICTED.finditer(text)]


def train_iterations(text: str) -> List[DarknetTrainIteration]:
    """Each update's line of ``detector train`` with the ``Loaded:`` line before it (0 when there is none)."""
    out, load = [], 0.0
    for line in text.splitlines():
        loaded = _LOADED.match(line)
        if loaded:
            load = float(loaded.group(1))
            continue
        it = _ITERATION.match(line)
        if it:
            out.append(DarknetTrainIteration(int(it.group(1)), load, float(it.group(2)), int(it.group(3))))
            load = 0.0
    return out


def steady_detect_ms(times_ms: Sequence[float], warmup: int) -> float:
    """The median network time after the first ``warmup`` images (cuDNN picks its algorithms on the first)."""
    steady = list(times_ms)[warmup:] or list(times_ms)
    if not steady:
        raise ValueError("Darknet printed no 'Predicted in' line")
    return statistics.median(steady)


def steady_train_throughput(iterations: Sequence[DarknetTrainIteration], batch: int, warmup: int) -> float:
    """Images per second over the updates after the first ``warmup``: ``batch`` images per (data wait +
    update), the mean over those updates."""
    steady = list(iterations)[warmup:] or list(iterations)
    if not steady:
        raise ValueError("Darknet printed no training iteration line")
    return batch * len(steady) / sum(i.load_s + i.train_s for i in steady)


def arch_flag(capability: Tuple[int, int]) -> str:
    """Darknet's ``ARCH`` for one compute capability: ``(9, 0)`` -> ``-gencode arch=compute_90,code=[sm_90,compute_90]``
    (machine code for the GPU, and PTX for newer ones)."""
    cc = f"{capability[0]}{capability[1]}"
    return f"-gencode arch=compute_{cc},code=[sm_{cc},compute_{cc}]"


@dataclass
class CudaLibraries:
    """Where the GPU build finds CUDA: ``nvcc``, the include folders, the library folders (for the link and,
    as ``LD_LIBRARY_PATH``, for the run), and what is missing (header and library names)."""

    nvcc: Path
    include_dirs: List[Path] = field(default_factory=list)
    library_dirs: List[Path] = field(default_factory=list)
    libraries: Dict[str, Path] = field(default_factory=dict)  # name -> a file of it (maybe versioned)
    missing: List[str] = field(default_factory=list)


def _toolkit_root(nvcc: Path) -> Optional[Path]:
    """The CUDA toolkit folder of ``nvcc`` (whose ``include`` has ``cuda_runtime.h``): ``CUDA_HOME`` or
    ``CUDA_PATH``, the folder above ``nvcc``'s (links resolved), or the target of a wrapper script's ``exec``."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), nvcc.resolve().parent.parent]
    try:
        head = nvcc.read_text(errors="replace")[:2000] if nvcc.stat().st_size < 100_000 else ""
    except OSError:
        head = ""
    candidates += [Path(m).parent.parent for m in re.findall(r"(/\S+/bin/nvcc)\b", head)]
    candidates += ["/usr/local/cuda"]
    for c in candidates:
        if c and (Path(c) / "include" / "cuda_runtime.h").is_file():
            return Path(c)
    return None


def _system_library_dirs() -> List[Path]:
    """The folders ``ldconfig -p`` lists libraries in (the driver's ``libcuda.so.1`` lives there)."""
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        listing = ""
    dirs = {Path(m).parent for m in re.findall(r"=> (\S+)", listing)}
    return sorted(dirs | {Path(p) for p in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib")
                          if Path(p).is_dir()})


def find_cuda_libraries(nvcc: Path, package_dirs: Sequence[Path]) -> CudaLibraries:
    """The CUDA headers and libraries for ``nvcc``: the toolkit's, then each Python package folder in
    ``package_dirs`` (``site-packages/nvidia/cudnn``, ``.../nvidia/cu13``, ...), then the system's (the
    driver). ``missing`` names what none of them has."""
    found = CudaLibraries(nvcc=nvcc)
    root = _toolkit_root(nvcc)
    roots = ([root] if root else []) + list(package_dirs)
    for r in roots:
        found.include_dirs += [d for d in (r / "include",) if d.is_dir()]
        for d in (r / "lib64", r / "lib", r / "lib64" / "stubs", r / "lib" / "stubs"):
            if d.is_dir() and d.resolve() not in {x.resolve() for x in found.library_dirs}:
                found.library_dirs.append(d)
    for header in HEADERS:
        if not any((d / header).is_file() for d in found.include_dirs):
            found.missing.append(header)
    search = found.library_dirs + _system_library_dirs()
    for name in LIBRARIES:
        files = [f for d in search for f in sorted(glob.glob(str(d / f"lib{name}.so*")))]
        if files:
            chosen = Path(min(files, key=len))  # the unversioned name when there is one
            found.libraries[name] = chosen
            if chosen.parent not in found.library_dirs:
                found.library_dirs.append(chosen.parent)
        else:
            found.missing.append(f"lib{name}.so")
    return found


def link_folder(libs: CudaLibraries, folder: Path) -> Path:
    """``folder`` with ``lib<name>.so`` links to the versioned files the linker would not find by ``-l<name>``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in libs.libraries.items():
        link = folder / f"lib{name}.so"
        if path.name != link.name and not link.exists():
            link.symlink_to(path)
    return folder


def copy_source(src: Path, out: Path) -> Path:
    """Copy Darknet's source (``src``, ``include``, ``3rdparty``, ``Makefile``, ``LICENSE``) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("src", "include", "3rdparty"):
        shutil.copytree(src / name, out / name, dirs_exist_ok=True)
    for name in ("Makefile", "LICENSE"):
        shutil.copy2(src / name, out / name)
    return out


def patch_makefile(makefile: Path, include_dirs: Sequence[Path], library_dirs: Sequence[Path]) -> None:
    """Point Darknet's Makefile at these CUDA/cuDNN folders instead of ``/usr/local/cuda`` and
    ``/usr/local/cudnn``, and drop its ``chmod +x *.sh`` (the copy has no scripts)."""
    text = makefile.read_text()
    includes = " ".join(f"-I{d}" for d in include_dirs)
    libraries = " ".join(f"-L{d}" for d in library_dirs)
    replacements = [("-I/usr/local/cuda/include/", includes), ("-L/usr/local/cuda/lib64", libraries),
                    ("-I/usr/local/cudnn/include", includes), ("-L/usr/local/cudnn/lib64", libraries),
                    ("\tchmod +x *.sh", "\ttrue")]
    for old, new in replacements:
        if old not in text:
            raise BuildError(f"{makefile}: '{old.strip()}' not found: not the Makefile this build expects")
        text = text.replace(old, new)
    makefile.write_text(text)


def make_command(nvcc: Path, capability: Tuple[int, int], jobs: int) -> List[str]:
    """``make`` for the GPU build: ``GPU=1 CUDNN=1``, no OpenCV, no shared library, ``ARCH`` for ``capability``."""
    return ["make", f"-j{jobs}", "GPU=1", "CUDNN=1", "CUDNN_HALF=0", "OPENCV=0", "LIBSO=0",
            f"ARCH={arch_flag(capability)}", f"NVCC={nvcc}"]


def run_environment(libs: CudaLibraries) -> Dict[str, str]:
    """The environment the GPU build runs in: its library folders first on ``LD_LIBRARY_PATH``."""
    paths = [str(d) for d in libs.library_dirs] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    return dict(os.environ, LD_LIBRARY_PATH=":".join(paths))


SOURCE_PARTS = ("src", "include", "3rdparty", "Makefile", "LICENSE")


def build_key(src: Path, libs: CudaLibraries, capability: Tuple[int, int]) -> str:
    """A hash of what the build is made of: every file of the source (its path and bytes) and the ``make``
    command with the CUDA folders. A build folder whose ``build.key`` holds the same hash is reused as it is."""
    digest = hashlib.sha256()
    for part in SOURCE_PARTS:
        root = src / part
        files = sorted(f for f in root.rglob("*") if f.is_file()) if root.is_dir() else [root]
        for f in files:
            digest.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes() + b"\0")
    flags = make_command(libs.nvcc, capability, 1)[2:] + [str(d) for d in libs.include_dirs + libs.library_dirs]
    digest.update("\0".join(flags).encode())
    return digest.hexdigest()


def _built(out: Path, key: str) -> bool:
    """Whether ``out`` holds a finished build whose :func:`build_key` is ``key``."""
    saved = out / "build.key"
    return (out / "darknet").is_file() and saved.is_file() and saved.read_text() == key


def _make(command: List[str], cwd: Path, log: Path, env: Dict[str, str], timeout: float,
          cancel: Optional[threading.Event]) -> int:
    """Run ``make`` in its own process group (its compilers with it); stopped, the whole group with it, when
    ``cancel`` is set or ``timeout`` passes (exit status -1)."""
    with open(log, "w") as f:
        proc = subprocess.Popen(command, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    return proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline or (cancel is not None and cancel.is_set()):
                        break
        finally:
            if proc.poll() is None:  # stopped (or an exception here): the compilers go with it
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                proc.wait()
    return -1


def build_darknet_gpu(src: Path, out: Path, libs: CudaLibraries, capability: Tuple[int, int],
                      jobs: Optional[int] = None, timeout: float = 1800,
                      cancel: Optional[threading.Event] = None) -> Path:
    """Build ``out/darknet`` from a copy of ``src``; returns its path. A folder that holds a build of the same
    sources and flags (:func:`build_key`) is reused without compiling. :class:`BuildError` with the log's tail
    when the build fails (``out/build.log`` keeps all of it) or is cancelled (``cancel`` set)."""
    if libs.missing:
        raise BuildError(f"CUDA files not found: {', '.join(libs.missing)}")
    key = build_key(src, libs, capability)
    if _built(out, key):
        return out / "darknet"
    for stale in ("build.key", "darknet", "obj"):  # another build's objects would look newer than the sources
        path = out / stale
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    copy_source(src, out)
    links = link_folder(libs, out / "cuda-links")
    patch_makefile(out / "Makefile", libs.include_dirs, [links] + libs.library_dirs)
    log = out / "build.log"
    code = _make(make_command(libs.nvcc, capability, jobs or os.cpu_count() or 1), out, log, run_environment(libs),
                 timeout, cancel)
    if cancel is not None and cancel.is_set():
        raise BuildError(f"Darknet's GPU build stopped before it finished (see {log})")
    if code != 0 or not (out / "darknet").is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise BuildError(f"Darknet's GPU build failed (see {log}): " + " | ".join(tail))
    (out / "build.key").write_text(key)
    return out / "darknet"


class BackgroundBuild:
    """:func:`build_darknet_gpu` on a thread (it needs only the CPU, all cores but two), so that the GPU measures
    ours meanwhile.
    :meth:`done`, :meth:`result` (the path, or the exception raised again), :meth:`cancel` (stops ``make``)."""

    def __init__(self, src: Path, out: Path, libs: CudaLibraries, capability: Tuple[int, int],
                 clock=time.perf_counter):
        self._cancel = threading.Event()
        self._path: Optional[Path] = None
        self._error: Optional[BaseException] = None
        self.start, self.seconds, self._clock = clock(), None, clock
        self.reused = _built(out, build_key(src, libs, capability))
        self._thread = threading.Thread(target=self._run, args=(src, out, libs, capability), daemon=True,
                                        name="darknet-gpu-build")
        self._thread.start()

    def _run(self, src, out, libs, capability) -> None:
        try:
            # two cores left to the measurements that run meanwhile (their kernel launches, the host's part)
            jobs = max(1, (os.cpu_count() or 1) - 2)
            self._path = build_darknet_gpu(src, out, libs, capability, jobs=jobs, cancel=self._cancel)
        except BaseException as exc:  # noqa: BLE001  given to whoever asks for the result
            self._error = exc
        finally:
            self.seconds = self._clock() - self.start

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, timeout: Optional[float] = None) -> Path:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise BuildError("Darknet's GPU build has not finished yet")
        if self._error is not None:
            raise self._error
        return self._path

    def cancel(self) -> None:
        self._cancel.set()
        self._thread.join()


# ------------------------------------------------------------------------------------------ timing runs
def training_cfg(cfg_text: str, batch: int, subdivisions: int, size: int, max_batches: int) -> str:
    """The cfg with ``[net]`` set for a timed run (``batch``, ``subdivisions``, ``width = height = size``,
    ``max_batches``) and ``random=0`` in every head (a fixed input size): Darknet's own text, keys replaced
    where present and added at the end of ``[net]`` otherwise."""
    net = {"batch": batch, "subdivisions": subdivisions, "width": size, "height": size, "max_batches": max_batches}
    out, section, pending = [], None, {}

    def flush() -> None:
        out.extend(f"{k}={v}" for k, v in pending.items())
        pending.clear()

    for line in cfg_text.splitlines():
        header = re.match(r"^\s*\[([^\]]+)\]", line)
        if header:
            flush()
            section = header.group(1).strip()
            pending = dict(net) if section in ("net", "network") else {}
        else:
            key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith(("#", ";")) else None
            if key in pending:
                line = f"{key}={pending.pop(key)}"
            elif key == "random" and section.lower() in MULTISCALE_HEADS:
                line = "random=0"
        out.append(line)
    flush()
    return "\n".join(out) + "\n"


def write_darknet_data(folder: Path, images: Sequence[Path], names: Path, repeat: int = 1) -> Path:
    """``folder/train.txt`` (the images, ``repeat`` times over) and ``folder/coco.data`` (classes, train,
    valid, names, backup) for Darknet and our trainer alike; returns the ``.data`` path. Labels are found
    as Darknet finds them (``images/`` -> ``labels/``, ``.jpg`` -> ``.txt``)."""
    folder.mkdir(parents=True, exist_ok=True)
    listing = folder / "train.txt"
    listing.write_text("".join(f"{p.resolve()}\n" for _ in range(repeat) for p in images))
    classes = sum(1 for line in names.read_text().splitlines() if line.strip())
    (folder / "backup").mkdir(exist_ok=True)
    data = folder / "coco.data"
    data.write_text(f"classes={classes}\ntrain={listing}\nvalid={listing}\nnames={names.resolve()}\n"
                    f"backup={folder / 'backup'}\n")
    return data


def run_darknet(darknet: Path, args: Sequence[str], cwd: Path, env: Dict[str, str], stdin: str = "",
                timeout: float = 600, partial: bool = False) -> str:
    """Run Darknet's CLI in ``cwd``; its standard output (stderr appended). :class:`RuntimeError` with the
    last lines when it fails. With ``partial``, a run still going after ``timeout`` seconds is stopped and what it
    printed so far is returned (its output is line-buffered through ``stdbuf`` where there is one, so that
    nothing printed waits in its buffer); otherwise :class:`subprocess.TimeoutExpired` is raised."""
    command = [str(darknet), *map(str, args)]
    if partial and shutil.which("stdbuf"):
        command = [shutil.which("stdbuf"), "-oL", "-eL", *command]
    try:
        run = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=cwd, env=env,
                             timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired as exc:
        if not partial:
            raise
        return "".join(part.decode(errors="replace") if isinstance(part, bytes) else part
                       for part in (exc.stdout, exc.stderr) if part)
    if run.returncode != 0:
        tail = (run.stdout + run.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"darknet {' '.join(map(str, args[:2]))} failed (exit {run.returncode}): "
                           + " | ".join(tail))
    return run.stdout + run.stderr


def darknet_detect_ms(darknet: Path, data: Path, cfg: Path, weights: Path, images: Sequence[Path], size: int,
                      folder: Path, env: Dict[str, str], warmup: int = 3, timeout: float = 600) -> float:
    """Darknet's network milliseconds per image at batch 1 (``detector test``, steady state): the images fed
    one after another to one process, the median after the first ``warmup``; a run still going after ``timeout``
    seconds is stopped and the images it did count."""
    folder.mkdir(parents=True, exist_ok=True)
    sized = folder / f"{cfg.stem}-test.cfg"
    sized.write_text(training_cfg(cfg.read_text(), 1, 1, size, 1))
    out = run_darknet(darknet, ["detector", "test", data, sized, weights, "-dont_show"], folder, env,
                      stdin="".join(f"{p.resolve()}\n" for p in images), timeout=timeout, partial=True)
    return steady_detect_ms(predicted_ms(out), warmup)


def darknet_train_throughput(darknet: Path, data: Path, cfg: Path, weights: Optional[Path], batch: int,
                             subdivisions: int, size: int, updates: int, warmup: int, folder: Path,
                             env: Dict[str, str], timeout: float = 1200) -> Dict[str, float]:
    """Darknet's training images/s (``detector train``, ``updates`` after ``warmup``): ``steady`` from its
    per-update lines (data wait + update), ``command`` from the whole command's wall time. A run still going
    after ``timeout`` seconds is stopped; the updates it printed count (``updates``: how many after ``warmup``)."""
    folder.mkdir(parents=True, exist_ok=True)
    sized = folder / f"{cfg.stem}-train.cfg"
    sized.write_text(training_cfg(cfg.read_text(), batch, subdivisions, size, warmup + updates))
    args = ["detector", "train", data, sized] + ([weights] if weights else []) + ["-dont_show", "-clear"]
    start = time.perf_counter()
    out = run_darknet(darknet, args, folder, env, timeout=timeout, partial=True)
    seconds = time.perf_counter() - start
    iterations = train_iterations(out)
    if len(iterations) <= warmup:
        raise RuntimeError(f"Darknet made {len(iterations)} updates in {seconds:.0f} s, none after the {warmup} "
                           "warm-up ones")
    return {"steady": steady_train_throughput(iterations, batch, warmup),
            "command": batch * len(iterations) / seconds, "updates": float(len(iterations) - warmup)}
