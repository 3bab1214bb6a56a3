"""Darknet's OpenCV-build augmentation (yolo.data.darknet_opencv_augment) against Darknet's own C code.

* ``image_data_augmentation`` of Darknet's OpenCV build (called through ctypes on ``load_image_mat_cv(path, 1)``
  of the real JPEG files) against ours on the pixels our reader decodes, for many drawn crops, flips, HSV
  changes and both blur modes: every pixel within 1/255 and at least 99.9% exactly equal (measured: all equal;
  pip's cv2 and the system OpenCV could differ by a SIMD rounding, never by a formula).
* ``gaussian_noise``: OpenCV's ``cv::randn`` cannot be replayed, so the noise is compared by its statistics: in
  Darknet's output the noise (noisy minus noiseless output) is never negative (a ``uint8`` noise Mat), and its
  mean, spread and share of zeros equal those of our field.
* the whole ``load_data_detection`` (OpenCV build) with its randomness replayed from one script of ``rand()``
  values on both sides (tests/darknet_ref/rand_script.c): the same calls in the same order, the same ``d.X``
  and the same truths, for plain batches, ``mixup=1``, mosaic with and without ``mosaic_bound``, cutmix,
  ``letter_box``, both blur modes and the batch coin that turns mixup / mosaic off.
* ``blend_truth_mosaic`` alone against the build without OpenCV as well (it is compiled there), so the truth
  bookkeeping is checked where libopencv-dev is missing.
"""
import shutil

import cv2
import numpy as np
import pytest

from cfg_snippets import TWO_HEAD_CFG
from conftest import asset as assets_file
from training_helpers import FAST
from yolo.data.darknet_opencv_augment import (RAND_MAX, blend_truth_mosaic, effective_mixup, image_data_augmentation,
                                              load_data_detection, mat_to_image, noise_field)

IMAGES = ["images/dog.jpg", "images/eagle.jpg", "images/horses.jpg", "coco128/images/train2017/000000000009.jpg",
          "coco128/images/train2017/000000000025.jpg", "coco128/images/train2017/000000000030.jpg"]


@pytest.fixture(scope="module")
def cv_lib(darknet_opencv, tmp_path_factory):
    from darknet_ref.opencv import DarknetLib

    return DarknetLib(darknet_opencv.folder, tmp_path_factory.mktemp("cv_lib"))


def _rgb(path):
    return cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)


def _close(ours, theirs, what, equal=0.999):
    """|diff| <= 1/255 everywhere and at least ``equal`` of the values exactly equal."""
    diff = np.abs(np.asarray(ours, np.float32) - np.asarray(theirs, np.float32))
    assert diff.max() <= np.float32(1 / 255) + 1e-7, f"{what}: max |diff| {diff.max() * 255:.3f} / 255"
    assert (diff == 0).mean() >= equal, f"{what}: only {(diff == 0).mean():.5f} of the values equal"


def _truths(rng, n):
    x, y = rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n)
    w, h = rng.uniform(0.03, 0.4, n), rng.uniform(0.03, 0.4, n)
    return np.stack([x, y, w, h, rng.integers(0, 80, n)], 1).astype(np.float32)


@pytest.mark.parametrize("name", IMAGES)
def test_image_data_augmentation_matches_darknet(cv_lib, assets, name):
    path = assets(name)
    image = _rgb(path)
    oh, ow = image.shape[:2]
    rng = np.random.default_rng(abs(hash(name)) % 1000)
    cases = [(0, 0, ow, oh, False, 0.0, 1.0, 1.0, 0)]  # the whole image: resize only
    for k in range(7):
        pleft, ptop = int(rng.integers(-ow // 4, ow // 4)), int(rng.integers(-oh // 4, oh // 4))
        swidth = int(rng.integers(ow // 3, ow + ow // 3))
        sheight = int(rng.integers(oh // 3, oh + oh // 3))
        blur = (0, 0, 1, 1, 5, 9, 0)[k]
        cases.append((pleft, ptop, swidth, sheight, bool(k % 2), float(rng.uniform(-0.5, 0.5)),
                      float(rng.uniform(0.4, 2.5)), float(rng.uniform(0.4, 2.5)), blur))
    for pleft, ptop, swidth, sheight, flip, dhue, dsat, dexp, blur in cases:
        net_hw = (int(rng.integers(8, 20)) * 16, int(rng.integers(2, 6)) * 64)
        truths = _truths(rng, 6)
        theirs = cv_lib.image_data_augmentation(path, net_hw, pleft, ptop, swidth, sheight, flip, dhue, dsat, dexp,
                                                blur=blur, truths=truths)
        ours = mat_to_image(image_data_augmentation(image, net_hw, pleft, ptop, swidth, sheight, flip, dhue, dsat,
                                                    dexp, blur, truths))
        _close(ours, theirs, f"{name} crop {(pleft, ptop, swidth, sheight)} flip {flip} hsv {(dhue, dsat, dexp)} "
                             f"blur {blur}")


@pytest.mark.parametrize("net_hw", [(100, 100), (128, 160), (96, 200)])
def test_hsv_rows_whose_width_is_not_a_multiple_of_64(cv_lib, assets, net_hw):
    """OpenCV's uint8 HSV -> RGB computes blocks of 16 pixels x its vector width in SIMD code and the rest of a row
    in scalar code that rounds differently; pip's cv2 and the system OpenCV split a row differently (here the
    system's AVX-512 blocks of 64), so where a row's width is not a multiple of 64 some pixels differ by one
    level. Rows of a multiple of 64 (the test above) are equal. Measured here: at least 89% of the values equal."""
    path = assets("images/dog.jpg")
    image = _rgb(path)
    for dhue, dsat, dexp in [(0.05, 1.3, 0.7), (0.0, 1.0, 1.01), (-0.3, 2.0, 1.5)]:
        theirs = cv_lib.image_data_augmentation(path, net_hw, 0, 0, 768, 576, False, dhue, dsat, dexp)
        ours = mat_to_image(image_data_augmentation(image, net_hw, 0, 0, 768, 576, False, dhue, dsat, dexp))
        _close(ours, theirs, f"{net_hw} hsv {(dhue, dsat, dexp)}", equal=0.85)


def test_blur_keeps_the_boxes_sharp(cv_lib, assets):
    """blur=1 blurs the background only: inside the truths Darknet's pixels are the unblurred ones."""
    path = assets("images/dog.jpg")
    truths = np.array([[0.3, 0.4, 0.2, 0.3, 1], [0.7, 0.6, 0.3, 0.2, 2]], np.float32)
    sharp = cv_lib.image_data_augmentation(path, (160, 192), 0, 0, 768, 576, False, 0, 1, 1)
    background = cv_lib.image_data_augmentation(path, (160, 192), 0, 0, 768, 576, False, 0, 1, 1, blur=1,
                                                truths=truths)
    inside = np.zeros((160, 192), bool)
    for x, y, w, h, _ in truths:
        inside[int((y - h / 2) * 160):int((y - h / 2) * 160) + int(h * 160),
               int((x - w / 2) * 192):int((x - w / 2) * 192) + int(w * 192)] = True
    assert np.array_equal(background[:, inside], sharp[:, inside])
    assert np.abs(background[:, ~inside] - sharp[:, ~inside]).mean() > 0.01


def test_gaussian_noise_is_non_negative_with_darknets_statistics(cv_lib, assets, tmp_path):
    sigma, net_hw = 20, (256, 256)
    gray = np.full((300, 300, 3), 120, np.uint8)  # far from 255: no saturation at the top
    path = tmp_path / "gray.png"
    cv2.imwrite(str(path), gray)
    clean = cv_lib.image_data_augmentation(path, net_hw, 0, 0, 300, 300, False, 0, 1, 1)
    noisy = cv_lib.image_data_augmentation(path, net_hw, 0, 0, 300, 300, False, 0, 1, 1, gaussian_noise=sigma)
    theirs = np.rint((noisy - clean) * 255)
    ours_clean = mat_to_image(image_data_augmentation(gray, net_hw, 0, 0, 300, 300, False, 0, 1, 1))
    np.testing.assert_array_equal(ours_clean, clean)
    field = noise_field(7, net_hw + (3,), sigma)
    ours = np.rint((mat_to_image(image_data_augmentation(gray, net_hw, 0, 0, 300, 300, False, 0, 1, 1,
                                                         noise=field)) - ours_clean) * 255)
    assert theirs.min() == 0 and ours.min() == 0  # uint8 noise: negative draws saturate to 0
    # rint(N(0, sigma)) clipped at 0: P(0) = Phi(0.5 / sigma), mean 0.40 sigma; 196608 draws on each side
    for stat in (lambda a: (a == 0).mean(), lambda a: a.mean() / sigma, lambda a: a.std() / sigma):
        assert abs(stat(ours) - stat(theirs)) < 0.01, (stat(ours), stat(theirs))
    assert 0.5 < (theirs == 0).mean() < 0.53 and abs(theirs.mean() / sigma - 0.399) < 0.01


# ------------------------------------------------------------------------------------ blend_truth_mosaic
def _mosaic_cases(seed):
    rng = np.random.default_rng(seed)
    net_hw = (int(rng.integers(4, 12)) * 32, int(rng.integers(4, 12)) * 32)
    cut = (int(rng.integers(net_hw[1] // 5, net_hw[1] * 4 // 5)), int(rng.integers(net_hw[0] // 5, net_hw[0] * 4 // 5)))
    shifts = (int(rng.integers(0, cut[0] + 1)), int(rng.integers(0, net_hw[1] - cut[0] + 1)),
              int(rng.integers(0, cut[1] + 1)), int(rng.integers(0, net_hw[0] - cut[1] + 1)))
    current = _truths(rng, int(rng.integers(0, 5)))
    piece = _truths(rng, int(rng.integers(1, 30)))
    piece[:, 2:4] *= rng.uniform(0.05, 2.5, (len(piece), 1)).astype(np.float32)  # some tiny, some huge
    return net_hw, cut, shifts, current, piece, int(rng.integers(6, 40))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bound", [False, True])
def test_blend_truth_mosaic_matches_darknet(darknet, tmp_path_factory, seed, bound):
    """In the build without OpenCV (compiled there too): runs where libopencv-dev is missing."""
    from darknet_ref.opencv import DarknetLib

    lib = DarknetLib(darknet.folder, tmp_path_factory.mktemp("plain_lib"))
    net_hw, cut, shifts, current, piece, max_boxes = _mosaic_cases(seed)
    for i_mixup in range(4):
        theirs = lib.blend_truth_mosaic(current, piece, max_boxes, net_hw, cut[0], cut[1], i_mixup, shifts, bound)
        ours = blend_truth_mosaic(current, piece, max_boxes, net_hw, cut[0], cut[1], i_mixup, shifts, bound)
        assert ours.shape == theirs.shape, (i_mixup, ours.shape, theirs.shape)
        np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=0)


# ------------------------------------------------------------------------------------ load_data_detection
class Replay:
    """A generator stand-in replaying raw ``rand()`` values as Darknet's shim does: ``random()`` is
    ``random_float`` ('f'), ``integers(k)`` is ``random_gen() % k`` ('g')."""

    def __init__(self, values):
        self.values, self.calls = [int(v) for v in values], []

    def _next(self, kind):
        self.calls.append(kind)
        return self.values[len(self.calls) - 1]

    def random(self):
        return np.float32(np.float32(self._next("f")) / np.float32(RAND_MAX))

    def integers(self, k):
        return self._next("g") % int(k)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Six coco128 images beside label files of float32 values printed exactly (both sides parse the same)."""
    folder = tmp_path_factory.mktemp("opencv_data")
    paths, items = [], []
    for k in range(6):
        name = f"coco128/images/train2017/{sorted(p.name for p in assets_file('coco128/images/train2017').iterdir())[k]}"
        src = assets_file(name)
        label = assets_file(name.replace("images", "labels").replace(".jpg", ".txt"))
        rows = np.loadtxt(label, dtype=np.float64, ndmin=2)
        rows = np.concatenate([rows[:, 1:5], rows[:, :1]], 1).astype(np.float32)  # x y w h class
        dst = folder / src.name
        shutil.copy(src, dst)
        (folder / (src.stem + ".txt")).write_text(
            "".join(f"{int(c)} {x:.9g} {y:.9g} {w:.9g} {h:.9g}\n" for x, y, w, h, c in rows))
        paths.append(dst)
        items.append((_rgb(dst), rows))
    return paths, items


CASES = {  # Darknet's use_mixup (parser.c's mapping), [net] / last-layer settings
    "plain": dict(mixup=0, jitter=0.3, resize=1.5, hue=0.1, saturation=1.5, exposure=1.5),
    "plain_zoom_out_letter_box": dict(mixup=0, jitter=0.2, resize=0.7, letter_box=1, hue=0.05, saturation=1.3),
    "mixup": dict(mixup=1, jitter=0.2, resize=1.2, hue=0.1, saturation=1.5, exposure=1.5),
    "mosaic": dict(mixup=3, jitter=0.3, resize=1.5, hue=0.1, saturation=1.5, exposure=1.5),
    "mosaic_bound": dict(mixup=3, mosaic_bound=1, jitter=0.3, resize=1.0, saturation=1.5, exposure=1.5),
    "mosaic_no_flip": dict(mixup=3, flip=0, jitter=0.4, resize=2.0, hue=0.1),
    "cutmix_ignored": dict(mixup=2, jitter=0.2, hue=0.1),
    "mosaic_and_cutmix": dict(mixup=4, mosaic_bound=1, jitter=0.2, exposure=1.5),
    "blur": dict(mixup=0, blur=1, jitter=0.2, saturation=1.5),
    "blur_whole": dict(mixup=3, blur=7, jitter=0.3, hue=0.1),
}


def _hyp(settings):
    use = settings.get("mixup", 0)
    mode = effective_mixup(1 if use == 1 else 0, use in (3, 4), use in (2, 4))
    return {"jitter": settings.get("jitter", 0.2), "resize": settings.get("resize", 1.0),
            "letter_box": settings.get("letter_box", 0), "flip": 0.5 if settings.get("flip", 1) else 0.0,
            "hue": settings.get("hue", 0.0), "saturation": settings.get("saturation", 1.0),
            "exposure": settings.get("exposure", 1.0), "max_boxes": settings.get("max_boxes", 30),
            "mixup": float(mode == 1), "mosaic": float(mode == 3), "mosaic_bound": settings.get("mosaic_bound", 0),
            "blur": settings.get("blur", 0), "gaussian_noise": 0}


# The batch coin (mixup / mosaic on or off) only matters where there is mixup or mosaic.
CASE_COINS = [(case, coin) for case in CASES for coin in ((1, 0) if CASES[case]["mixup"] in (1, 3, 4) else (1,))]


@pytest.mark.parametrize("case, coin", CASE_COINS)
def test_load_data_detection_matches_darknet(cv_lib, dataset, case, coin):
    paths, items = dataset
    settings = CASES[case]
    rng = np.random.default_rng(sum(map(ord, case)))
    script = rng.integers(0, RAND_MAX, 4000, dtype=np.int64)
    script[1] = script[1] // 2 * 2 + coin  # the batch coin: random_gen() % 2 == 0 turns mixup / mosaic off
    n, net_hw = 2, (160, 256)
    kwargs = {k: v for k, v in settings.items()}
    X, truths, calls = cv_lib.load_data_detection(paths, n, net_hw, script, max_boxes=30, **kwargs)

    replay = Replay(script)
    batch = load_data_detection(replay, n, len(items), lambda i: items[i], net_hw, _hyp(settings))
    assert "".join(replay.calls) == calls  # the same draws, in Darknet's order
    if coin == 0 or settings["mixup"] in (0, 2):
        assert batch.use_mixup == 0
    _close(batch.X(), X, case)
    # Truths within 1e-6, except that Darknet's build (-Ofast) reassociates the float arithmetic of its crop
    # mapping (correct_boxes, fed by load_data_detection's dx / sx): a mapped side that lands within a float step
    # of a whole mosaic pixel can truncate to the neighbouring pixel. Measured: one row in the 16 batches here
    # (mosaic_and_cutmix), one pixel; blend_truth_mosaic itself is equal given the same rows (test above).
    off_by_a_pixel = 0
    for ours, theirs in zip(batch.truths, truths):
        assert ours.shape == theirs.shape
        diff = np.abs(ours - theirs)
        near = (diff[:, [0, 2]] <= 1 / net_hw[1] + 1e-6).all(1) & (diff[:, [1, 3]] <= 1 / net_hw[0] + 1e-6).all(1)
        exact = diff.max(1) <= 1e-6 if len(diff) else np.zeros(0, bool)
        assert (exact | near & (diff[:, 4] == 0)).all(), (ours[~exact], theirs[~exact])
        off_by_a_pixel += int((~exact).sum())
    assert off_by_a_pixel <= 1


def test_letter_box_with_mosaic_is_refused():
    with pytest.raises(ValueError, match="letter_box=1 with mosaic=1"):
        load_data_detection(np.random.default_rng(0), 1, 1, None, (64, 64), {**_hyp(CASES["mosaic"]), "letter_box": 1})


# ------------------------------------------------------------------------------------ in the trainer
def test_mosaic_item_shows_four_images():
    """A training item of the darknet_opencv pipeline (yolo.data.transforms.train_transform): with mosaic on, the
    picture is four images (here four solid colours, one whole-image box each) around the cut, and the truths
    come from the four."""
    from yolo.data.transforms import augment_config, train_transform

    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30)]
    load = lambda i: (np.full((90, 120, 3), colours[i], np.uint8),  # noqa: E731
                      np.array([[10, 10, 110, 80]], np.float32), np.array([i]))
    hyp = augment_config(pipeline="darknet_opencv", jitter=0.1, hue=0, saturation=1, exposure=1, flip=0.5,
                         mosaic=1, blur=1, gaussian_noise=0)
    mosaics = 0
    for seed in range(12):
        image, boxes, labels, matrix = train_transform(load, 0, 4, np.random.default_rng(seed), (128, 160), hyp)
        assert image.shape == (128, 160, 3) and image.dtype == np.uint8
        if matrix is not None:  # the batch coin turned the mosaic off: one image
            continue
        mosaics += 1
        quadrants = [image[:10, :10], image[:10, -10:], image[-10:, :10], image[-10:, -10:]]
        seen = {tuple(int(v) for v in q.reshape(-1, 3).mean(0).round()) for q in quadrants}
        assert seen <= set(colours), seen  # each corner is one of the images, unblended
        assert len(labels) >= 1 and set(labels.tolist()) <= {0, 1, 2, 3}
    assert 2 <= mosaics <= 10  # the coin of each (one-image) batch


@pytest.mark.slow
def test_training_steps_with_mosaic_blur_and_noise(assets, tmp_path, caplog):
    """A tiny cfg with mosaic=1, blur=1, gaussian_noise=20 trains two steps on coco128 images."""
    import re as _re
    import yaml

    from yolo.engine import TrainOptions, Trainer

    root = tmp_path / "data"
    for sub in ("images", "labels"):
        (root / sub / "train").mkdir(parents=True)
    names = sorted(p.name for p in assets("coco128/images/train2017").iterdir())[:8]
    for name in names:
        shutil.copy(assets(f"coco128/images/train2017/{name}"), root / "images" / "train" / name)
        shutil.copy(assets(f"coco128/labels/train2017/{name[:-4]}.txt"), root / "labels" / "train" / f"{name[:-4]}.txt")
    data = tmp_path / "data.yaml"
    data.write_text(yaml.safe_dump({"path": str(root), "train": "images/train", "val": "images/train",
                                    "names": [str(k) for k in range(80)]}))
    cfg_text = TWO_HEAD_CFG.format(bn=1).replace("[net]", "[net]\nmosaic=1\nblur=1\ngaussian_noise=20", 1)
    cfg_text = _re.sub(r"classes=5", "classes=80", cfg_text)
    cfg_text = _re.sub(r"filters=30\n", "filters=255\n", cfg_text)
    cfg = tmp_path / "tiny.cfg"
    cfg.write_text(cfg_text)
    options = TrainOptions(cfg=str(cfg), data=str(data), epochs=1, img_size=96, batch_size=4, device="cpu",
                           project=str(tmp_path / "runs"), progress=False,
                           hyp={**FAST, "max_steps_per_epoch": 2, "eval_interval": 100})
    with caplog.at_level("INFO"):
        result = Trainer.from_options(options).fit()
    assert "Darknet's OpenCV pipeline" in caplog.text
    assert result.run_dir.is_dir()
