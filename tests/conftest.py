"""Shared test fixtures: the real Darknet assets are reached through ``YOLO_ASSETS``.

When ``YOLO_ASSETS`` is unset (a user's fresh clone), tests that need the assets skip
with a clear reason; when it is set and a file is missing, the test fails.

The fixtures several test files share live here too (the one-head training files and a trained run of them, a tiny
model's files and checkpoint, a small disk); a module's own fixture of the same name overrides the shared one.
"""
import os
import sys
from pathlib import Path

import cv2
import pytest
import torch

from yolo.ops.darknet_resize_kernel import kernel_library

# Under pytest-xdist the cores are shared by the worker processes: each gets its share of threads (torch's,
# OpenCV's, and those of the processes its tests start), so that the workers do not oversubscribe the cores.
# (Measured on 2 cores, two workers: 1 thread each ran a 6-file sample in 137-146 s, 2 threads each in 165-185 s.)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
TEST_THREADS = max(1, min(2, _CORES // _WORKERS))
torch.set_num_threads(TEST_THREADS)
if _WORKERS > 1:
    cv2.setNumThreads(TEST_THREADS)
    os.environ.setdefault("OMP_NUM_THREADS", str(TEST_THREADS))

# tools/gpu_lab, the GPU report's modules (lab tooling beside the launcher tools/gpu_report.py, not in the package);
# appended, so that no launcher in tools/ (detect.py, train.py, ...) shadows a module of the same name
sys.path.append(str(Path(__file__).resolve().parent.parent / "tools"))

# The shared helper modules assert too: their failures get pytest's detailed messages.
pytest.register_assert_rewrite("helpers", "darknet_parity")

ASSETS_ENV = "YOLO_ASSETS"


def assets_root() -> Path:
    """The folder named by ``YOLO_ASSETS``; skip the calling test when it is unset."""
    root = os.environ.get(ASSETS_ENV)
    if not root:
        pytest.skip(f"{ASSETS_ENV} is not set: point it at the Darknet test assets to run this test")
    path = Path(root)
    if not path.is_dir():
        pytest.fail(f"{ASSETS_ENV}={root} is not a folder")
    return path


def asset(relpath: str) -> Path:
    """Absolute path of one asset file (``cfg/yolov3.cfg``); fails if it is missing."""
    path = assets_root() / relpath
    if not path.exists():
        pytest.fail(f"asset {relpath} is missing from {path.parent}")
    return path


def darknet_file(relpath: str) -> Path:
    """One file of Darknet's source tree (``cfg/yolov3-tiny.cfg``): skips the calling test when the tree is absent
    (a user's clone: no ../shared/darknet and no ``YOLO_DARKNET_SRC``), fails when it is there without the file."""
    from darknet_ref import darknet_source

    src = darknet_source()
    if not (src / "build.sh").is_file():
        pytest.skip(f"Darknet source not found at {src} (set YOLO_DARKNET_SRC): this test reads its {relpath}")
    path = src / relpath
    if not path.exists():
        pytest.fail(f"{relpath} is missing from the Darknet source at {src}")
    return path


def require_cuda() -> torch.device:
    """The CUDA device; skip the calling test when this machine has none."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available on this machine: the CUDA tests run only where it is")
    return torch.device("cuda")


@pytest.fixture
def cuda_device() -> torch.device:
    """:func:`require_cuda` as a fixture (mark such tests ``@pytest.mark.cuda``)."""
    return require_cuda()


@pytest.fixture(scope="session", autouse=True)
def darknet_resize_kernel(tmp_path_factory):
    """Darknet's resize in C (yolo.ops.darknet_resize_kernel), compiled once per test process into a cache folder
    of the session's (never the user's) and kept loaded: every test of the default resampler runs through it where
    a C compiler is found. Returns the library, or None without a compiler (the numpy path then runs)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("YOLO_CACHE_DIR", str(tmp_path_factory.mktemp("native_cache")))
        return kernel_library()


@pytest.fixture
def keep_tf32():
    """The test (or the run it starts) may set PyTorch's TF32 flags (matmul and cuDNN); later tests get theirs
    back (use it in a whole module with ``pytestmark = pytest.mark.usefixtures("keep_tf32")``)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture
def no_tf32(keep_tf32):
    """Full float32 matmuls and convolutions on CUDA while the test runs (TF32 would move outputs ~1e-3);
    the flags are restored after (:func:`keep_tf32`)."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


@pytest.fixture(scope="session")
def yolov3_tiny():
    """``(cfg, weights)`` of the real yolov3-tiny in the assets."""
    return asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")


@pytest.fixture
def private_cache(tmp_path, monkeypatch) -> Path:
    """A ``YOLO_CACHE_DIR`` of the test's own, so no test reads or fills the user's label and image caches
    (use it in a whole module with ``pytestmark = pytest.mark.usefixtures("private_cache")``)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("YOLO_CACHE_DIR", str(cache))
    return cache


@pytest.fixture
def assets():
    """The ``asset`` function as a fixture: ``assets('images/dog.jpg')``."""
    return asset


# Every detection cfg shipped with the assets (classifier cfgs are listed separately).
DETECTION_CFGS = [
    "yolov2.cfg", "yolov2-tiny.cfg", "yolov2-voc.cfg", "yolov2-tiny-voc.cfg",
    "yolov3.cfg", "yolov3-tiny.cfg", "yolov3-spp.cfg", "yolov3-voc.cfg", "yolov3-tiny-prn.cfg",
    "yolov4.cfg", "yolov4-tiny.cfg", "yolo-fastest-1.1.cfg", "yolo-fastest-1.1-xl.cfg",
]
CLASSIFIER_CFGS = ["tiny.cfg"]


def _darknet_build(tmp_path_factory, name: str, **build_options):
    """A cached Darknet build as a :class:`DarknetRef`: skips when ../shared/darknet is absent (or, for the OpenCV
    build, OpenCV's C++ development files are), fails when the source is present and the build fails."""
    from darknet_ref import BuildError, DarknetRef, OpenCVMissing, build_reference, darknet_source

    src = darknet_source()
    if not (src / "build.sh").is_file():
        pytest.skip(f"Darknet source not found at {src} (set YOLO_DARKNET_SRC): the Darknet reference tests need it")
    try:
        ref = build_reference(src, **build_options)
    except OpenCVMissing as exc:
        pytest.skip(str(exc))
    except BuildError as exc:
        pytest.fail(str(exc))
    return DarknetRef(ref.folder, tmp_path_factory.mktemp(name))


@pytest.fixture(scope="session")
def darknet(tmp_path_factory):
    """Darknet itself (tests/darknet_ref): built once, cached; skips when ../shared/darknet is absent."""
    return _darknet_build(tmp_path_factory, "darknet")


@pytest.fixture(scope="session")
def darknet_opencv(tmp_path_factory):
    """Darknet's OpenCV build (tests/darknet_ref, ``build_reference(opencv=True)``): built once, cached.

    Skips when ../shared/darknet is absent or OpenCV's C++ development files are not installed (``pkg-config
    --exists opencv4`` fails); fails when both are present and the build fails.
    """
    return _darknet_build(tmp_path_factory, "darknet_opencv", opencv=True)


@pytest.fixture(autouse=True)
def keep_threads():
    """A test may set this process's torch or OpenCV thread count (the benchmark tools do): the next test gets the
    worker's count back, so that numbers compared across tests come from the same summation order."""
    torch_threads, cv2_threads = torch.get_num_threads(), cv2.getNumThreads()
    yield
    if torch.get_num_threads() != torch_threads:
        torch.set_num_threads(torch_threads)
    if cv2.getNumThreads() != cv2_threads:
        cv2.setNumThreads(cv2_threads)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """The one-head training files (data.yaml, tiny.cfg, hyp.yaml, data/), made once for each module that uses them;
    tests copy what they change (``own_shapes``). A module's own ``shapes`` fixture overrides this one."""
    from training_helpers import write_one_head_training

    return write_one_head_training(tmp_path_factory.mktemp("datasets"))


@pytest.fixture
def own_shapes(shapes, tmp_path):
    """A copy of the module's training files that a test may change (its data.yaml points to the copy)."""
    import shutil

    from training_helpers import write_data

    folder = shutil.copytree(shapes, tmp_path / "shapes")
    write_data(folder, folder / "data")
    return folder


@pytest.fixture(scope="module")
def trained_setup(tmp_path_factory):
    """The one-head training files, with a finished one-epoch run of them in ``runs/run`` (made once for each
    module that uses them)."""
    from training_helpers import HYP, write_one_head_training
    from yolo.engine import TrainOptions, Trainer

    folder = write_one_head_training(tmp_path_factory.mktemp("hostile"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("YOLO_CACHE_DIR", str(folder / "cache"))
        Trainer.from_options(TrainOptions(cfg=str(folder / "tiny.cfg"), data=str(folder / "data.yaml"),
                                          hyp=dict(HYP), epochs=1, device="cpu", project=str(folder / "runs"),
                                          name="run", progress=False)).fit()
    return folder


@pytest.fixture
def train_setup(tmp_path):
    """8 tiny shapes images, the one-head cfg and its settings (training_helpers.HYP)."""
    from training_helpers import write_one_head_training

    return write_one_head_training(tmp_path)


@pytest.fixture
def tiny(tmp_path):
    """The tiny one-head cfg (5 classes), its .pt checkpoint and its Darknet .weights, random weights."""
    from training_helpers import write_one_head_model

    return write_one_head_model(tmp_path)


@pytest.fixture
def tiny_pt(tmp_path):
    """A .pt checkpoint of the tiny one-head cfg (5 classes) with random weights."""
    from cfg_snippets import ONE_HEAD_CFG
    from yolo.data import SHAPE_NAMES
    from yolo.models.checkpoint import model_checkpoint, save_checkpoint
    from yolo.models.model import Darknet

    torch.manual_seed(0)
    cfg = tmp_path / "tiny.cfg"
    cfg.write_text(ONE_HEAD_CFG)
    path = tmp_path / "tiny.pt"
    save_checkpoint(model_checkpoint(Darknet(cfg), names=list(SHAPE_NAMES)), path)
    return path


@pytest.fixture
def small_disk(tmp_path):
    """A 300 kB file system (a tmpfs), unmounted after the test."""
    from helpers import mounted

    path = tmp_path / "small"
    unmount = mounted(path, "size=300k")
    yield path
    unmount()


@pytest.fixture
def stray_label_shapes(tmp_path, monkeypatch):
    """Tiny shapes data (``training_helpers.shapes_training``) with a label file that belongs to no image; its val
    split is its train split."""
    from training_helpers import shapes_training

    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    shapes = shapes_training(tmp_path, num_train=16, num_val=0, seed=3, val="images/train")
    (shapes["root"] / "labels" / "train" / "renamed_image.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    return shapes
