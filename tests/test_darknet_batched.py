"""Darknet's image steps batched on the training device (yolo.data.darknet_batched): against Darknet's C functions
(the levels its floats round to), and against the per-item path (yolo.data.darknet_augment, which
tests/test_augment_darknet.py compares with the same C functions): the same ``uint8`` levels, bit for bit, for
random and edge-case draws, mixup pairs, whole dataset items, the run-long loader's batches and the training
step's input; on a GPU as on the CPU."""
import numpy as np
import pytest
import torch
import yaml

from darknet_parity import AUGMENT_HYP
from yolo.data import EpochLoader, EpochShuffleSampler, build_dataset, ensure_shapes_dataset, load_data_config
from yolo.data.collate import collate_fn, collate_uint8
from yolo.data.darknet_augment import (DarknetDraw, _to_uint8, augment_image, augment_image_uint8, draw_darknet,
                                       mixup_images)
from yolo.data.darknet_batched import PENDING_IMAGES, PendingBatch, PendingImage, SharedBuffers, pending_image
from yolo.data.transforms import augment_config
from yolo.engine.step_precision import step_precision


def _image(rng, oh, ow):
    """Random pixels with gray rows and black columns (the hue-less cases of rgb_to_hsv)."""
    image = rng.integers(0, 256, (oh, ow, 3), dtype=np.uint8)
    image[: oh // 3] = image[: oh // 3, :, :1]
    image[:, : ow // 4] = 0
    return image


def _nchw(image_hwc: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image_hwc.transpose(2, 0, 1)))


def _random_cases(seed: int, net_hw, count: int):
    """``count`` (pending image, expected UInt8[3, h, w]) pairs: random sizes (some much larger than the network
    input, so that their rows and columns are gathered), draws with zoom, letter_box and strong distortions,
    every fourth a mixup pair."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        pair = []
        for _ in range(2 if len(cases) % 4 == 3 else 1):
            big = rng.random() < 0.25
            oh, ow = (int(rng.integers(3 * net_hw[0], 4 * net_hw[0])), int(rng.integers(1, 5 * net_hw[1]))) if big \
                else (int(rng.integers(1, 90)), int(rng.integers(1, 90)))
            hyp = {**AUGMENT_HYP, "letter_box": int(rng.integers(2)), "resize": float(rng.choice([1.0, 1.5, 0.7])),
                   "hue": float(rng.uniform(0, 0.5)), "saturation": float(rng.uniform(1, 4)),
                   "exposure": float(rng.uniform(1, 4)), "flip": 1}
            draw = draw_darknet(rng, (oh, ow), net_hw, hyp)
            if min(draw.crop_size((oh, ow))) <= 0:
                break
            pair.append((_image(rng, oh, ow), draw))
        else:
            if len(pair) == 1:
                (image, draw), = pair
                cases.append((pending_image(image, draw, net_hw), _nchw(augment_image_uint8(image, draw, net_hw))))
            else:
                (new, new_draw), (own, own_draw) = pair
                expected = _to_uint8(mixup_images(augment_image(new, new_draw, net_hw), augment_image(own, own_draw, net_hw)))
                cases.append((PENDING_IMAGES.mixed(new, new_draw, own, own_draw, net_hw), _nchw(expected)))
    return cases


def _check(cases, device="cpu"):
    images, expected = zip(*cases)
    got = PendingBatch.pack(images).to(torch.device(device)).finish().cpu()
    assert got.dtype == torch.uint8 and got.shape == (len(cases),) + tuple(expected[0].shape)
    for k, (a, b) in enumerate(zip(got, expected)):
        assert torch.equal(a, b), f"image {k}: {int((a != b).sum())} levels differ, by up to {int((a.int() - b.int()).abs().max())}"


@pytest.mark.parametrize("net_hw", [(32, 48), (48, 32), (40, 40)])
@pytest.mark.parametrize("seed", range(4))
def test_batched_steps_equal_the_per_item_path(seed, net_hw):
    _check(_random_cases(seed, net_hw, 12))


@pytest.mark.parametrize("seed", range(4))
def test_batched_steps_match_darknets_c_functions(darknet, seed):
    """Against Darknet itself (crop_image, resize_image, flip_image, distort_image on the same bytes / 255): the
    levels Darknet's floats round to, give or take one level where Darknet's C arithmetic (within 2e-6 of ours,
    tests/test_augment_darknet.py) lands on the other side of a half level."""
    rng = np.random.default_rng(40 + seed)
    oh, ow = int(rng.integers(20, 60)), int(rng.integers(20, 60))
    net_hw = (32, 48) if seed % 2 else (40, 40)
    hyp = {**AUGMENT_HYP, "letter_box": seed % 3 == 0, "resize": (1.0, 1.5, 0.7)[seed % 3]}
    draw = draw_darknet(rng, (oh, ow), net_hw, hyp)
    image = _image(rng, oh, ow)
    truths = np.array([[0.5, 0.5, 0.2, 0.2]], np.float32)
    expected, _ = darknet.augment((image.astype(np.float32) / np.float32(255)).transpose(2, 0, 1), net_hw,
                                  (draw.pleft, draw.pright, draw.ptop, draw.pbot), draw.flip, draw.dhue, draw.dsat,
                                  draw.dexp, truths)
    darknet_levels = np.rint(np.clip(expected, 0, 1) * 255)
    ours = PendingBatch.pack([pending_image(image, draw, net_hw)]).finish()[0].numpy().astype(np.float64)
    differ = ours != darknet_levels
    assert np.abs(ours - darknet_levels).max() <= 1
    near_half = np.abs(np.clip(expected, 0, 1) * 255 % 1 - 0.5) < 1e-3
    assert not (differ & ~near_half).any(), f"{int((differ & ~near_half).sum())} levels differ away from a half level"
    assert differ.mean() < 1e-3


def test_edge_crops_equal_the_per_item_path():
    """Axes not resampled (crop side = network side), one-pixel crops, crops far outside the image, a one-pixel
    image, hue exactly at the wrap, both mirrors."""
    rng = np.random.default_rng(7)
    image = _image(rng, 12, 20)
    cases = []
    for net_hw in ((12, 20), (12, 7), (5, 20)):
        for crop in ((0, 0, 0, 0), (0, 19, 0, 0), (0, 0, 0, 11), (0, 19, 0, 11), (-30, -40, -20, -50)):
            for flip in (False, True):
                draw = DarknetDraw(*crop, flip, dhue=0.5 if flip else -0.5, dsat=1.3, dexp=0.8)
                cases.append((pending_image(image, draw, net_hw), _nchw(augment_image_uint8(image, draw, net_hw))))
        _check(cases)
        cases = []
    tiny = _image(rng, 1, 1)
    draw = DarknetDraw(0, 0, 0, 0, True, 0.1, 2.0, 3.0)
    _check([(pending_image(tiny, draw, (8, 8)), _nchw(augment_image_uint8(tiny, draw, (8, 8))))])


def test_a_large_image_travels_reduced():
    """Only the rows and columns the resize reads leave the worker: at most twice the network input per axis."""
    rng = np.random.default_rng(1)
    image = _image(rng, 900, 1300)
    draw = DarknetDraw(10, -20, 30, 5, True, 0.1, 1.5, 0.7)
    pending = pending_image(image, draw, (32, 48))
    assert pending.pixels.shape == (64, 96, 3)
    _check([(pending, _nchw(augment_image_uint8(image, draw, (32, 48))))])
    small = pending_image(image[:40, :50], DarknetDraw(0, 0, 0, 0, False), (32, 48))
    assert np.shares_memory(small.pixels, image)  # a view: nothing copied in the worker


def test_a_batch_refuses_mixed_sizes():
    rng = np.random.default_rng(2)
    image = _image(rng, 20, 20)
    draw = DarknetDraw(0, 0, 0, 0, False)
    with pytest.raises(ValueError, match="share one size"):
        PendingBatch.pack([pending_image(image, draw, (8, 8)), pending_image(image, draw, (16, 8))])


# ---------------------------------------------------------------------------------------------- the data path
def _shapes_dataset(tmp_path, mixup=0):
    root = ensure_shapes_dataset(tmp_path / "shapes", num_train=12, num_val=2, seed=3, size_range=(64, 96))
    data = tmp_path / "shapes.yaml"
    data.write_text(yaml.safe_dump({"path": str(root), "train": "images/train", "val": "images/val",
                                    "names": ["circle", "square", "triangle"]}))
    hyp = augment_config(pipeline="darknet", jitter=0.3, hue=0.1, saturation=1.5, exposure=1.5, mixup=mixup)
    return build_dataset(load_data_config(data), "train", 64, augment=True, hyp=hyp, seed=5)


@pytest.mark.slow
@pytest.mark.parametrize("mixup", [0, 1])
def test_dataset_items_pending_and_finished_are_the_same(tmp_path, mixup):
    """The same draws, truths and infos either way; the pixels once the batch is finished."""
    dataset = _shapes_dataset(tmp_path, mixup)
    requests = [(index, (64, 96), 1) for index in range(len(dataset))]
    finished = collate_uint8([dataset[r] for r in requests])
    pending = collate_uint8([dataset[r + (True,)] for r in requests])
    assert isinstance(pending[0], PendingBatch) and pending[0].shape == tuple(finished[0].shape)
    assert bool((pending[0].partners >= 0).any()) == bool(mixup)
    assert torch.equal(pending[0].finish(), finished[0])
    assert torch.equal(pending[1], finished[1])
    assert [str(a) for a in pending[2]] == [str(b) for b in finished[2]]
    assert torch.equal(collate_fn([dataset[r + (True,)] for r in requests])[0], collate_fn([dataset[r] for r in requests])[0])


def test_other_pipelines_ignore_the_request(tmp_path):
    dataset = _shapes_dataset(tmp_path)
    dataset.hyp = augment_config(pipeline="affine")
    image, _, _ = dataset[(0, (64, 64), 0, True)]
    assert isinstance(image, torch.Tensor) and image.shape == (3, 64, 64)


def test_a_worker_reuses_its_shared_buffer_once_released():
    buffers = SharedBuffers(keep=4)
    ptr = lambda t: t.untyped_storage().data_ptr()  # noqa: E731
    first, second = buffers.take(1000), buffers.take(1000)
    assert first.is_shared() and ptr(first) != ptr(second)
    SharedBuffers.release(first)
    again = buffers.take(900)  # fits the released buffer
    assert ptr(again) == ptr(first)
    third = buffers.take(900)  # none free: a new one
    assert ptr(third) not in (ptr(first), ptr(second)) and len(buffers.buffers) == 3
    SharedBuffers.release(again)
    larger = buffers.take(5000)  # the free one is too small: let go, a new one made
    assert [ptr(b) for b in buffers.buffers] == [ptr(second), ptr(third), ptr(larger)]
    other = torch.zeros(64, dtype=torch.uint8).share_memory_()
    SharedBuffers.release(other[16:])  # not one of the buffers: untouched
    assert not other.any()


@pytest.mark.slow
def test_run_loader_with_pending_images_gives_the_same_batches(tmp_path):
    """A worker process, as the trainer runs it on CUDA, against finished batches, epoch by epoch: first with
    every batch kept (fresh shared memory each time), then with each released after it is copied, as pinning
    does (the worker writes the next batches into the same memory; every batch read before its release is
    still the right one)."""
    dataset = _shapes_dataset(tmp_path, mixup=1)
    pending = EpochLoader(dataset, batch_size=4, num_workers=1, seed=5, uint8_images=True, pending_images=True)
    finished = EpochLoader(dataset, batch_size=4, num_workers=0, seed=5, uint8_images=True)
    try:
        for epoch in range(4):
            expected = list(finished.epoch(EpochShuffleSampler(len(dataset), 5), epoch))
            got = 0
            for (batch, targets, _), (images, expected_targets, _) in zip(
                    pending.epoch(EpochShuffleSampler(len(dataset), 5), epoch), expected):
                assert isinstance(batch, PendingBatch) and isinstance(images, torch.Tensor)
                copy = PendingBatch(**{name: t.clone() for name, t in batch._tensors().items()})
                if epoch >= 2:
                    batch.release()
                assert torch.equal(copy.finish(), images) and torch.equal(targets, expected_targets)
                got += 1
            assert got == len(expected) == 3
    finally:
        pending.close()
    with pytest.raises(ValueError, match="uint8_images"):
        EpochLoader(dataset, batch_size=4, pending_images=True)


def test_step_input_from_a_pending_batch(tmp_path):
    """The training step's input: finished and converted on the step's device, as from the finished batch."""
    dataset = _shapes_dataset(tmp_path)
    requests = [(index, (64, 64), 0) for index in range(4)]
    precision = step_precision(torch.device("cpu"), {})
    pending = collate_uint8([dataset[r + (True,)] for r in requests])[0]
    finished = collate_uint8([dataset[r] for r in requests])[0]
    got = precision.images_to(pending, torch.device("cpu"))
    assert got.dtype == torch.float32 and torch.equal(got, precision.images_to(finished, torch.device("cpu")))


@pytest.mark.cuda
@pytest.mark.parametrize("seed", range(3))
def test_batched_steps_on_the_gpu_equal_the_per_item_path(cuda_device, seed):
    """CUDA's float32 arithmetic gives the same levels (no fused multiply-add, true divisions)."""
    _check(_random_cases(seed, (96, 128), 16), cuda_device)


@pytest.mark.cuda
def test_pinned_batch_reaches_the_gpu_without_a_wait(cuda_device, tmp_path):
    """From pinned memory to finished levels on the GPU with no host sync (the step's input must not stall the
    queue of GPU work)."""
    dataset = _shapes_dataset(tmp_path, mixup=1)
    requests = [(index, (64, 64), 0) for index in range(6)]
    pending = collate_uint8([dataset[r + (True,)] for r in requests])[0].pin_memory()
    assert pending.pixels.is_pinned()
    pending.to(cuda_device, non_blocking=True).finish()  # CUDA's lazy start-up outside the checked part
    torch.cuda.synchronize(cuda_device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        on_gpu = pending.to(cuda_device, non_blocking=True).finish()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(on_gpu.cpu(), pending.finish())


def test_pending_image_is_the_documented_shape():
    rng = np.random.default_rng(4)
    pending = pending_image(_image(rng, 30, 40), DarknetDraw(1, 2, 3, 4, False, 0.0, 1.0, 1.0), (16, 24))
    assert isinstance(pending, PendingImage) and pending.size_hw == (16, 24)
    assert pending.rows.shape == (2, 16) and pending.cols.shape == (2, 24)
    assert pending.row_weights.dtype == pending.col_weights.dtype == np.float32
