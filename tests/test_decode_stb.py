"""``decode="stb"`` (:mod:`yolo.files.stb_decode`, ``--decode stb``) against Darknet's default build (``OPENCV=0``,
built from ../shared/darknet): the pixels its ``load_image_color`` (``load_image_stb``) decodes, byte for byte, on
JPEGs (baseline, progressive, grayscale, 4:2:0 and 4:4:4) and PNGs (gray, with alpha), and the percentages its
``darknet detector test`` prints on its sample images, digit for digit; a file stb_image cannot decode is a
one-line error naming it."""
import os
import shutil
import subprocess
import sys

import cv2
import numpy as np
import pytest
from PIL import Image

from cfg_snippets import TWO_HEAD_CFG
from conftest import asset
from darknet_ref.image_steps import darknet_decode, detector_test
from helpers import run_tool
from yolo.data.dataset import read_image
from yolo.errors import DataError, DecoderUnavailableError, ImageReadError, WeightsError
from yolo.export.traced import preprocessing_metadata
from yolo.files import stb_decode as stb_module
from yolo.files.images import load_image
from yolo.inference.detector import Detector
from yolo.engine import TrainOptions
from yolo.files.stb_decode import stb_decode
from yolo.models.checkpoint import load_checkpoint_file, model_checkpoint, save_checkpoint
from yolo.models.model import load_model



@pytest.fixture(scope="module", autouse=True)
def stb_cache(tmp_path_factory):
    """One ``YOLO_CACHE_DIR`` for the module: stb_image is compiled once here, never into the user's cache."""
    cache = tmp_path_factory.mktemp("stb_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("YOLO_CACHE_DIR", str(cache))
        patch.setattr(stb_module, "_LIBRARY", None)
        yield cache

# stb_image is compiled on first use: without a C compiler only the error that says so can be tested
needs_compiler = pytest.mark.skipif(not any(shutil.which(c) for c in (os.environ.get("CC") or "cc", "cc", "gcc")),
                                    reason="no C compiler (cc, gcc, $CC) to build stb_image with")

SAMPLES = ["dog.jpg", "eagle.jpg", "giraffe.jpg", "horses.jpg", "kite.jpg", "person.jpg", "scream.jpg"]


def photo(h: int = 61, w: int = 83) -> np.ndarray:
    """A smooth colour picture with edges (JPEG's IDCT and chroma upsampling show on both), BGR ``uint8``."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    image = np.stack([127 + 120 * np.sin(x / 7.0), 127 + 120 * np.cos(y / 5.0), (x * 3 + y * 2) % 256], axis=2)
    image[h // 3: h // 2, w // 4: w // 2] = (20, 200, 60)
    return np.clip(image, 0, 255).astype(np.uint8)


def written_images(folder):
    """Files made here with OpenCV and PIL: name -> path."""
    bgr = photo()
    files = {
        "baseline.jpg": lambda p: cv2.imwrite(str(p), bgr, [cv2.IMWRITE_JPEG_QUALITY, 90]),
        "progressive.jpg": lambda p: cv2.imwrite(str(p), bgr, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1]),
        "gray.jpg": lambda p: cv2.imwrite(str(p), cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)),
        "444.jpg": lambda p: Image.fromarray(bgr[:, :, ::-1]).save(p, quality=85, subsampling=0),
        "odd-size-420.jpg": lambda p: Image.fromarray(bgr[:37, :51, ::-1]).save(p, quality=75, subsampling=2),
        "rgb.png": lambda p: cv2.imwrite(str(p), bgr),
        "gray.png": lambda p: cv2.imwrite(str(p), cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)),
        "alpha.png": lambda p: cv2.imwrite(str(p), np.dstack([bgr, np.arange(bgr.size // 3, dtype=np.uint8)
                                                               .reshape(bgr.shape[:2])])),
    }
    paths = {}
    for name, write in files.items():
        write(folder / name)
        paths[name] = folder / name
    return paths


@pytest.mark.slow
@needs_compiler
def test_stb_pixels_equal_darknets_load_image_stb(darknet, tmp_path):
    """Byte for byte the image Darknet's default build feeds ``detector test``; OpenCV's decode differs on the
    JPEGs (so the comparison can tell the decoders apart)."""
    differs = []
    for name, path in written_images(tmp_path).items():
        ours = load_image(path, rgb=True, decode="stb")
        theirs = darknet_decode(darknet, path)
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs), name
        assert np.array_equal(load_image(path, decode="stb"), theirs[:, :, ::-1]), name  # BGR, as by default
        if not np.array_equal(load_image(path, rgb=True), theirs):
            differs.append(name)
    assert {"baseline.jpg", "progressive.jpg"} <= set(differs), differs


@pytest.mark.slow
@needs_compiler
def test_stb_pixels_equal_darknets_on_its_sample_images(darknet):
    for name in SAMPLES:
        path = asset(f"images/{name}")
        assert np.array_equal(load_image(path, rgb=True, decode="stb"), darknet_decode(darknet, path)), name


def printed(result):
    """(name, percent) as ``detector test`` prints them: C's ``%.0f`` of the float32 ``prob * 100``."""
    return sorted((name, int(f"{np.float32(score) * np.float32(100):.0f}"))
                  for score, name in zip(result["scores"].tolist(), result["names"]))


@needs_compiler
@pytest.mark.slow
def test_detector_with_stb_prints_darknet_default_builds_percentages(darknet, yolov3_tiny):
    """From the files themselves: every percentage Darknet's default build prints on its seven sample images
    (4 of them differ by one with OpenCV's decode, which the OpenCV build matches)."""
    paths = [asset(f"images/{name}") for name in SAMPLES]
    expected = detector_test(darknet, *yolov3_tiny, asset("cfg/coco.names"), paths)
    stb = Detector(*yolov3_tiny, device="cpu", multi_label=True, decode="stb")
    opencv = Detector(*yolov3_tiny, device="cpu", multi_label=True)
    assert (stb.decode, opencv.decode) == ("stb", "opencv")
    moved = 0
    for path, theirs, ours, other in zip(paths, expected, stb(paths), opencv(paths)):
        theirs = sorted((d.name, d.percent) for d in theirs)
        assert printed(ours) == theirs, path.name
        moved += printed(other) != theirs
    assert moved >= 2 and sum(len(t) for t in expected) >= 20  # the decode matters here; not vacuous


@pytest.mark.slow
@needs_compiler
def test_corrupt_file_is_one_line_error_naming_it(tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    with pytest.raises(ImageReadError, match=r"broken\.jpg: .*stb_image") as info:
        load_image(bad, decode="stb")
    assert "\n" not in str(info.value)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(ImageReadError, match=r"empty\.png"):
        load_image(empty, decode="stb")
    webp = tmp_path / "photo.webp"  # OpenCV reads it, stb_image (and so Darknet's default build) does not
    cv2.imwrite(str(webp), photo())
    with pytest.raises(DataError, match=r"photo\.webp: not a readable image \(stb_image: unknown image type\)$"):
        read_image(webp, "stb")  # evaluation's reader


@needs_compiler
@pytest.mark.slow
def test_detect_tool_decode_stb_corrupt_image(tmp_path, yolov3_tiny):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    result = run_tool("detect", "--cfg", yolov3_tiny[0], "--weights", yolov3_tiny[1], "--source", bad,
                      "--decode", "stb", "--nosave", "--device", "cpu")
    assert "broken.jpg" in result.stderr and "Traceback" not in result.stderr, result.stderr
    # no compiler and nothing compiled yet: one line, said before any image is read
    env = {**os.environ, "PATH": str(tmp_path), "CC": "", "YOLO_CACHE_DIR": str(tmp_path / "empty-cache")}
    result = run_tool("detect", "--cfg", yolov3_tiny[0], "--weights", yolov3_tiny[1], "--source", bad,
                      "--decode", "stb", "--nosave", "--device", "cpu", env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "C compiler" in lines[0], result.stderr


def test_no_compiler_is_one_line_error(monkeypatch, tmp_path):
    """Needed only while the cache folder has no compiled decoder."""
    monkeypatch.setattr(stb_module, "_LIBRARY", None)
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, no gcc
    with pytest.raises(DecoderUnavailableError, match="C compiler") as info:
        load_image(asset("images/dog.jpg"), decode="stb")
    assert "\n" not in str(info.value)


@needs_compiler
@pytest.mark.slow
def test_concurrent_builds_each_load_a_complete_library(tmp_path):
    """Two processes compiling at once into an empty cache: each writes its own temporary file and renames it
    into place; both decode."""
    script = ("import numpy as np; from yolo.files.stb_decode import stb_decode; "
              f"print(stb_decode(np.fromfile({str(asset('images/dog.jpg'))!r}, dtype=np.uint8), 'dog').sum())")
    env = {**os.environ, "YOLO_CACHE_DIR": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    sums = {p.communicate()[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(sums) == 1
    assert len(list((tmp_path / "cache" / "stb_image").glob("*.so"))) == 1
    assert not list((tmp_path / "cache" / "stb_image").glob(".*"))  # no temporary file left behind


@needs_compiler
@pytest.mark.slow
def test_checkpoint_record_names_the_decode(tmp_path):
    """A checkpoint's ``preprocessing.decode`` is the Detector's default and goes into an export's metadata; a
    record without it (every checkpoint written before it) decodes with OpenCV, as it was validated; a flag
    overrides it; an unknown one is refused naming the file."""
    cfg = tmp_path / "two-head.cfg"
    cfg.write_text(TWO_HEAD_CFG.format(bn=1))
    model = load_model(cfg)
    record = {"resize": "stretch", "resample": "darknet", "img_size": [96, 96], "pipeline": "darknet"}
    paths = {}
    for name, extra in (("stb", {"decode": "stb"}), ("old", {}), ("bad", {"decode": "jpeg"})):
        paths[name] = save_checkpoint(model_checkpoint(model, preprocessing={**record, **extra}),
                                      tmp_path / f"{name}.pt")
    assert Detector(None, paths["stb"], device="cpu").decode == "stb"
    assert Detector(None, paths["stb"], device="cpu", decode="opencv").decode == "opencv"
    assert Detector(None, paths["old"], device="cpu").decode == "opencv"
    assert preprocessing_metadata(load_model(weights=paths["stb"]))["decode"] == "stb"
    with pytest.raises(WeightsError, match=r"bad\.pt: malformed 'preprocessing'"):
        load_model(weights=paths["bad"])
    with pytest.raises(ValueError, match="unknown decode"):
        Detector(None, paths["old"], device="cpu", decode="libjpeg")


@pytest.mark.slow
def test_training_decodes_with_stb_when_asked_and_records_it(tmp_path, monkeypatch):
    """``TrainOptions(decode="stb")`` (``tools/train.py --decode stb``): the train images and the evaluation's are
    read by stb_image, and the checkpoints record it, so the trained model detects and evaluates as it was
    validated; the default reads with OpenCV and records that."""
    import yolo.files.images as images_module
    from training_helpers import run, shapes_training

    shapes = shapes_training(tmp_path / "shapes", num_train=8, num_val=4, seed=3)
    read = []

    def counted(data, *args, **kwargs):
        read.append(1)
        return stb_decode(data, *args, **kwargs)

    monkeypatch.setattr(images_module, "stb_decode", counted)
    for decode, reads in (("stb", 8 + 4), (None, 0)):
        read.clear()
        trainer = run(shapes, tmp_path / "runs", name=str(decode), epochs=1, decode=decode,
                      hyp={"batch": 8, "subdivisions": 1, "eval_interval": 1})
        assert trainer.result.status == "finished"
        assert len(read) >= reads and (reads or not read), (decode, len(read))  # every train and val image
        expected = decode or "opencv"
        assert load_checkpoint_file(trainer.result.last)["preprocessing"]["decode"] == expected
        assert Detector(None, trainer.result.last, device="cpu").decode == expected
    with pytest.raises(ValueError, match="unknown decode 'jpeg'"):
        TrainOptions(cfg=str(shapes["cfg"]), decode="jpeg")
