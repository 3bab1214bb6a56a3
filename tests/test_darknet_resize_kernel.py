"""Darknet's resize in C (:mod:`yolo.ops.darknet_resize_kernel`, the default CPU path of the ``darknet`` resampler)
against Darknet's own ``resize_image`` and ``letterbox_image`` and against the numpy path it replaces, bit for bit;
without a C compiler the numpy path runs, silently, with the same bits."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from darknet_ref.image_steps import darknet_fit
from yolo.inference.preprocess import preprocess
from yolo.ops import darknet_resize as resize_module
from yolo.ops import darknet_resize_kernel as kernel_module
from yolo.ops.darknet_resize import darknet_resize_image, resize_tables
from yolo.ops.letterbox import fit_image_darknet

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def kernel(darknet_resize_kernel):
    """The compiled kernel (built once per session by conftest); skip where no C compiler built it."""
    if darknet_resize_kernel is None:
        pytest.skip("no C compiler (cc, gcc, $CC) to build the resize kernel with: the numpy path runs")
    return darknet_resize_kernel


@pytest.fixture
def kernel_calls(monkeypatch):
    """The resizes the kernel did (True) or declined (False), as darknet_resize_image calls it."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(kernel_module.resize_into(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(resize_module, "resize_into", counted)
    return calls


def bits(values) -> np.ndarray:
    array = values.numpy() if isinstance(values, torch.Tensor) else values
    return np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)


def random_sizes(count: int, seed: int):
    """(image h, w), (output h, w): up and down, 1 and 2 pixels on either side, large ratios."""
    rng = np.random.default_rng(seed)
    sizes = [((1, 1), (5, 3)), ((1, 9), (1, 4)), ((9, 1), (4, 1)), ((2, 2), (61, 3)), ((37, 23), (37, 23)),
             ((400, 3), (2, 2)), ((3, 400), (77, 1)), ((576, 768), (416, 416)), ((1080, 1920), (23, 41))]
    for _ in range(count):
        sizes.append((tuple(int(v) for v in rng.integers(1, 120, 2)), tuple(int(v) for v in rng.integers(1, 120, 2))))
    return sizes


def test_kernel_equals_the_numpy_path_bit_for_bit(kernel, kernel_calls):
    """Over many sizes, from BGR and RGB, from contiguous images and from views (reversed channels, a gray image
    broadcast to three channels, RGBA without its alpha), into a fresh tensor and into a view of a larger one."""
    rng = np.random.default_rng(3)
    for (ih, iw), (h, w) in random_sizes(30, seed=5):
        image = rng.integers(0, 256, (ih, iw, 3), dtype=np.uint8)
        gray = np.broadcast_to(image[:, :, :1], (ih, iw, 3))
        rgba = rng.integers(0, 256, (ih, iw, 4), dtype=np.uint8)
        for pixels in (image, image[:, :, ::-1], gray, rgba[:, :, :3]):
            for bgr in (True, False):
                expected = darknet_resize_image(pixels, (h, w), bgr=bgr, kernel=False)
                ours = darknet_resize_image(pixels, (h, w), bgr=bgr)
                assert np.array_equal(bits(ours), bits(expected)), ((ih, iw), (h, w), bgr)
        canvas = torch.full((h + 3, w + 5, 3), 0.5)
        darknet_resize_image(image, (h, w), out=canvas[1:h + 1, 2:w + 2])
        assert np.array_equal(bits(canvas[1:h + 1, 2:w + 2]), bits(darknet_resize_image(image, (h, w), kernel=False)))
        assert (canvas[0] == 0.5).all() and (canvas[h + 1:] == 0.5).all() and (canvas[:, :2] == 0.5).all() \
            and (canvas[:, w + 2:] == 0.5).all()  # nothing written past the view
    assert kernel_calls and all(kernel_calls)  # every resize went through the kernel


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_the_rows_split_over_threads_give_the_same_bits(kernel, kernel_calls, threads):
    """Tall outputs are split into bands of rows resized at once on the process's threads (ctypes lets the GIL
    go): the same bits as the numpy path, also where bands meet on a source row both need, into a view."""
    rng = np.random.default_rng(threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for (ih, iw), (h, w) in (((576, 768), (416, 416)), ((300, 41), (1000, 7)), ((2000, 30), (640, 3))):
            assert h // kernel_module.BAND_ROWS >= 2  # at least two bands
            image = rng.integers(0, 256, (ih, iw, 3), dtype=np.uint8)
            expected = darknet_resize_image(image, (h, w), kernel=False)
            assert np.array_equal(bits(darknet_resize_image(image, (h, w))), bits(expected)), (ih, iw, h, w)
            canvas = torch.full((h + 2, w + 4, 3), 0.5)
            darknet_resize_image(image, (h, w), out=canvas[1:h + 1, 2:w + 2])
            assert np.array_equal(bits(canvas[1:h + 1, 2:w + 2]), bits(expected))
            assert (canvas[0] == 0.5).all() and (canvas[h + 1] == 0.5).all() and (canvas[:, :2] == 0.5).all()
    finally:
        torch.set_num_threads(before)
    assert kernel_calls and all(kernel_calls)


def test_letterbox_and_the_detectors_batch_through_the_kernel(kernel, kernel_calls, monkeypatch):
    """``letterbox_image`` (the image resized into the middle of the 0.5 canvas) and the Detector's batch, as the
    numpy path gives them."""
    rng = np.random.default_rng(8)
    cases = [((48, 96), (64, 64)), ((97, 41), (64, 96)), ((31, 30), (64, 32)), ((300, 500), (416, 416)),
             ((1, 40), (32, 32)), ((40, 1), (32, 64))]
    images = [rng.integers(0, 256, (*image_hw, 3), dtype=np.uint8) for image_hw, _ in cases]
    ours = [(fit_image_darknet(image, net_hw, "letterbox")[0], preprocess([image], net_hw, "letterbox")[0])
            for image, (_, net_hw) in zip(images, cases)]
    assert len(kernel_calls) == 2 * len(cases) and all(kernel_calls)
    monkeypatch.setattr(kernel_module, "_LIBRARY", kernel_module._UNAVAILABLE)  # the numpy path
    for image, (_, net_hw), (fitted, batch) in zip(images, cases, ours):
        assert np.array_equal(bits(fitted), bits(fit_image_darknet(image, net_hw, "letterbox")[0])), net_hw
        assert np.array_equal(bits(batch), bits(preprocess([image], net_hw, "letterbox")[0])), net_hw
    assert not any(kernel_calls[2 * len(cases):])


def test_kernel_equals_darknets_resize_and_letterbox(darknet, kernel, kernel_calls):
    """Darknet's own functions on random sizes (the other comparisons with Darknet, in test_darknet_resize.py,
    run through the kernel too: it is loaded for the whole session)."""
    rng = np.random.default_rng(21)
    sizes = [s for s in random_sizes(8, seed=13) if s[1][0] > 1]  # a one-row output is undefined in Darknet
    for (ih, iw), (h, w) in sizes:
        rgb = rng.integers(0, 256, (ih, iw, 3), dtype=np.uint8)
        assert np.array_equal(bits(darknet_resize_image(rgb, (h, w), bgr=False)), bits(darknet_fit(darknet, rgb, w, h)))
    for (ih, iw), net_hw in [((97, 41), (64, 96)), ((300, 500), (416, 416)), ((12, 200), (64, 64))]:
        rgb = rng.integers(0, 256, (ih, iw, 3), dtype=np.uint8)
        expected = darknet_fit(darknet, rgb, net_hw[1], net_hw[0], letterbox=True)
        assert np.array_equal(bits(fit_image_darknet(rgb, net_hw, "letterbox", bgr=False)[0]), bits(expected))
    assert kernel_calls and all(kernel_calls)


def test_kernel_declines_what_it_does_not_take(kernel):
    """Other dtypes or shapes, or an output whose rows are not contiguous: the numpy path (or its error) instead."""
    image = np.zeros((10, 12, 3), np.uint8)
    tables = resize_tables((10, 12), (5, 6))
    assert kernel_module.resize_into(image, tables, True, torch.empty(5, 6, 3))
    assert not kernel_module.resize_into(image.astype(np.float32), tables, True, torch.empty(5, 6, 3))
    assert not kernel_module.resize_into(np.zeros((10, 12, 4), np.uint8), tables, True, torch.empty(5, 6, 3))
    assert not kernel_module.resize_into(image, tables, True, torch.empty(3, 5, 6).permute(1, 2, 0))
    assert not kernel_module.resize_into(image, tables, True, torch.empty(5, 6, 3, dtype=torch.float64))


@pytest.mark.slow
def test_without_a_compiler_the_numpy_path_gives_the_same_bits_silently(tmp_path):
    """No ``$CC``, no ``cc`` or ``gcc`` on the PATH, an empty cache folder: no kernel, no message, the same
    values as the kernel's (or the numpy path's, where this machine has no compiler either)."""
    rng = np.random.default_rng(4)
    image = rng.integers(0, 256, (57, 91, 3), dtype=np.uint8)
    np.save(tmp_path / "image.npy", image)
    script = ("import numpy as np, sys; from yolo.ops.darknet_resize import darknet_resize_image; "
              "from yolo.ops.darknet_resize_kernel import kernel_library; "
              f"out = darknet_resize_image(np.load({str(tmp_path / 'image.npy')!r}), (64, 40)); "
              "assert kernel_library() is None, 'built without a compiler'; "
              f"np.save({str(tmp_path / 'out.npy')!r}, out.numpy())")
    env = {**os.environ, "PATH": str(tmp_path), "CC": "/nonexistent", "YOLO_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": REPO}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stderr == "" and run.stdout == "", run.stderr
    assert np.array_equal(bits(np.load(tmp_path / "out.npy")), bits(darknet_resize_image(image, (64, 40))))
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.so"))


RESIZE_IN_A_FORKED_CHILD = r'''
import json, os
import numpy as np, torch
from yolo.ops.darknet_resize import darknet_resize_image
torch.set_num_threads(2)
image = np.random.default_rng(0).integers(0, 256, (576, 768, 3), dtype=np.uint8)
parent = darknet_resize_image(image, (416, 416))  # the parent's band threads exist now
pid = os.fork()
if pid == 0:
    os._exit(0 if torch.equal(darknet_resize_image(image, (416, 416)), parent) else 3)
print(json.dumps(os.waitpid(pid, 0)[1]))
'''


@pytest.mark.slow
def test_a_forked_child_resizes_on_threads_of_its_own(kernel):
    """A child forked after the parent used its band threads (a user's fork, a loader worker) has none of them:
    it starts its own instead of waiting forever for the parent's."""
    from helpers import in_fresh_process

    status, _ = in_fresh_process(RESIZE_IN_A_FORKED_CHILD, timeout=60)
    assert status == 0
