"""Install the ``yolo`` package (distribution name ``yolo-darknet``)."""
from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).parent

setup(
    name="yolo-darknet",
    version="0.1.0",
    description="Config-driven YOLOv3 in PyTorch: Darknet cfgs and weights, exact to Darknet.",
    long_description=(here / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="MIT",  # no "License ::" classifier: setuptools deprecates them for this field
    python_requires=">=3.9",
    packages=find_packages(include=["yolo", "yolo.*"]),
    # stb_image (Darknet's copy) and its wrapper, compiled on first use of --decode stb (yolo/files/stb_decode.py);
    # Darknet's resize in C, compiled on first use (yolo/ops/darknet_resize_kernel.py)
    package_data={"yolo.files": ["stb/*.h", "stb/*.c"], "yolo.ops": ["*.c"]},
    install_requires=[
        "torch>=2.1",
        # torchvision >= 0.29 pulls a matching torch with compiled ops (torchvision::nms);
        # an older pairing can leave a torch without the NMS kernel.
        "torchvision>=0.29",
        "numpy",
        # One OpenCV major version for everyone: its image decoding and resizing feed the training
        # augmentation (OpenCV 5 changes the pixels, and so the losses, from the first batch), and
        # OpenCV 5 removed the Darknet importer that tools/benchmark.py compares against.
        "opencv-python<5",
        "pyyaml",
        "tensorboard",
        "tqdm",
        "pycocotools",
        "matplotlib",
        "pillow",
    ],
    # The same commands as tools/NAME.py in a clone: yolo-train --cfg ..., yolo-detect --source ..., ...
    # yolo.cli.launch answers --help before the tool's module (and torch) loads.
    # Not tools/compare_darknet.py nor tools/gpu_report.py: lab tools that build Darknet from ../shared beside a
    # clone (their code is in tests/darknet_ref and tools/gpu_lab, outside the package), run from a clone only.
    entry_points={
        "console_scripts": [
            f"yolo-{name.replace('_', '-')} = yolo.cli.launch:{name}"
            for name in ("anchors", "benchmark", "convert", "convert_dataset", "demo", "detect", "eval", "export",
                         "train", "tune")
        ],
    },
    extras_require={
        # tools/export.py --format onnx: torch.onnx.export and the metadata need onnx, the check onnxruntime
        "export": ["onnx", "onnxruntime"],
        # tools/detect.py --track: ByteTrack, BoT-SORT, OC-SORT (Apache-2.0)
        "track": ["trackers>=2.6"],
        # tools/export.py --format openvino (converted from the ONNX export) and --int8 (NNCF's post-training
        # quantization); ~250 MB installed with scikit-learn
        "openvino": ["onnx", "openvino", "nncf"],
        # tools/tune.py: the hyperparameter search (its study in SQLite through SQLAlchemy, which Optuna brings)
        "tune": ["optuna>=3.6"],
        "dev": [
            "pytest",
            # tools/test.sh runs the whole suite in one process per core
            "pytest-xdist",
            "hypothesis",
            # OpenCV 5 removed the Darknet importer that the parity tests use as the reference.
            "opencv-python<5",
            "onnx",
            "onnxruntime",
            "onnxscript",
            "trackers>=2.6",
            # the tracking tests score tracks with MOTA, IDF1 and ID switches
            "motmetrics",
            "openvino",
            "nncf",
            "optuna>=3.6",
        ],
    },
)
