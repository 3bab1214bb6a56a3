"""The training data path: Darknet's augmentation (yolo.data.darknet_augment) against its previous implementation
(tests/previous_darknet_augment.py, whole-array numpy steps checked against Darknet's C code when it was the
package's), value for value; the run-long loader (persistent workers, one thread each) against per-epoch loaders;
and ``tools/benchmark.py --data`` end to end.

Darknet's C code itself is the reference of tests/test_augment_darknet.py, unchanged.
"""
import os

import cv2
import numpy as np
import pytest
import torch
import yaml

from darknet_parity import AUGMENT_HYP
from previous_darknet_augment import reference_augment_image, reference_darknet_item
from yolo.data import DetectionDataset, EpochLoader, EpochShuffleSampler, create_dataloader, ensure_shapes_dataset, set_epoch
from yolo.data.loader import default_workers
from yolo.data.darknet_augment import (DarknetDraw, _to_uint8, augment_image, augment_image_uint8, darknet_item,
                                       draw_darknet)
from yolo.data.transforms import augment_config


def _image(rng, oh, ow, as_uint8):
    """A random image with gray rows and black columns (the rgb_to_hsv cases without a hue)."""
    image = rng.integers(0, 256, (oh, ow, 3), dtype=np.uint8) if as_uint8 else rng.random((oh, ow, 3), np.float32)
    image[: oh // 3] = image[: oh // 3, :, :1]
    image[:, : ow // 4] = 0
    return image


@pytest.mark.parametrize("seed", range(40))
def test_image_equals_the_previous_implementation(seed):
    """Random sizes, crops reaching outside the image, mirrors, zoom, letter_box, uint8 and float input."""
    rng = np.random.default_rng(seed)
    oh, ow = int(rng.integers(1, 70)), int(rng.integers(1, 70))
    net_hw = (int(rng.integers(2, 48)), int(rng.integers(2, 48)))
    hyp = {**AUGMENT_HYP, "letter_box": seed % 3 == 0, "resize": (1.0, 1.5, 0.7)[seed % 3],
           "jitter": (0.3, 0.0, 0.6)[seed % 4 % 3]}
    draw = draw_darknet(rng, (oh, ow), net_hw, hyp)
    sheight, swidth = draw.crop_size((oh, ow))
    if sheight <= 0 or swidth <= 0:
        pytest.skip("an empty crop (Darknet's would be too)")
    image = _image(rng, oh, ow, seed % 2 == 0)
    expected = reference_augment_image(image, draw, net_hw)
    np.testing.assert_array_equal(augment_image(image, draw, net_hw), expected)
    np.testing.assert_array_equal(augment_image_uint8(image, draw, net_hw), _to_uint8(expected))


@pytest.mark.parametrize("seed", range(30))
def test_strong_distortions_equal_the_previous_implementation(seed):
    """Any crop (also far outside the image) and saturation / exposure factors up to 4 (values clipped at both
    ends) and hue shifts up to half a turn."""
    rng = np.random.default_rng(100 + seed)
    oh, ow = int(rng.integers(1, 60)), int(rng.integers(1, 60))
    net_hw = (int(rng.integers(2, 50)), int(rng.integers(2, 50)))
    while True:
        crop = [int(rng.integers(-ow, ow // 2 + 1)), int(rng.integers(-ow, ow // 2 + 1)),
                int(rng.integers(-oh, oh // 2 + 1)), int(rng.integers(-oh, oh // 2 + 1))]
        if ow - crop[0] - crop[1] > 0 and oh - crop[2] - crop[3] > 0:
            break
    draw = DarknetDraw(*crop, bool(rng.integers(2)), float(np.float32(rng.uniform(-0.5, 0.5))),
                       float(np.float32(rng.uniform(0.2, 4))), float(np.float32(rng.uniform(0.2, 4))))
    image = _image(rng, oh, ow, seed % 2 == 0)
    expected = reference_augment_image(image, draw, net_hw)
    np.testing.assert_array_equal(augment_image(image, draw, net_hw), expected)
    np.testing.assert_array_equal(augment_image_uint8(image, draw, net_hw), _to_uint8(expected))


@pytest.mark.parametrize("crop", [(0, 0, 0, 0), (0, 19, 0, 0), (0, 0, 0, 11), (0, 19, 0, 11), (-3, -4, 2, -5)])
@pytest.mark.parametrize("flip", [False, True])
def test_same_size_and_one_pixel_crops_equal_the_previous_implementation(crop, flip):
    """Axes that are not resampled (crop side = input side) and one-column / one-row crops."""
    rng = np.random.default_rng(3)
    image = _image(rng, 12, 20, True)
    for net_hw in ((12, 20), (12, 7), (5, 20), (9, 9)):
        draw = DarknetDraw(*crop, flip, dhue=0.05, dsat=1.3, dexp=0.8)
        np.testing.assert_array_equal(augment_image(image, draw, net_hw), reference_augment_image(image, draw, net_hw))
        np.testing.assert_array_equal(augment_image_uint8(image, draw, net_hw),
                                      _to_uint8(reference_augment_image(image, draw, net_hw)))


@pytest.mark.parametrize("mixup", [0, 1])
def test_items_equal_the_previous_implementation(mixup):
    """Whole training items (draws, truths, pixels; with mixup, both images and the coin) as before."""
    rng = np.random.default_rng(11)
    images = [rng.integers(0, 256, (int(rng.integers(20, 60)), int(rng.integers(20, 60)), 3), dtype=np.uint8)
              for _ in range(5)]
    boxes = [np.array([[2, 3, 15, 18], [5, 1, 19, 9]], np.float32) for _ in images]
    load = lambda i: (images[i], boxes[i].copy(), np.array([i, 7]))  # noqa: E731
    hyp = augment_config(pipeline="darknet", jitter=0.3, hue=0.1, saturation=1.5, exposure=1.5, mixup=mixup)
    for seed in range(12):
        got = darknet_item(load, seed % 5, 5, np.random.default_rng(seed), (32, 48), hyp)
        expected = reference_darknet_item(load, seed % 5, 5, np.random.default_rng(seed), (32, 48), hyp)
        for a, b in zip(got, expected):
            if b is None:
                assert a is None
            else:
                np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------- the loader
def _shapes(tmp_path):
    root = ensure_shapes_dataset(tmp_path / "shapes", num_train=12, num_val=2, seed=3, size_range=(64, 96))
    from yolo.data import build_dataset, load_data_config

    data = tmp_path / "shapes.yaml"
    data.write_text(yaml.safe_dump({"path": str(root), "train": "images/train", "val": "images/val",
                                    "names": ["circle", "square", "triangle"]}))
    hyp = augment_config(pipeline="darknet", jitter=0.3, hue=0.1, saturation=1.5, exposure=1.5)
    return data, build_dataset(load_data_config(data), "train", 64, augment=True, hyp=hyp, seed=5)


def _batches(loader):
    return [(images.clone(), targets.clone(), [info["index"] for info in infos]) for images, targets, infos in loader]


@pytest.mark.slow
def test_run_loader_keeps_its_workers_and_gives_each_epoch_its_own_items(tmp_path):
    """The run-long loader (2 persistent workers) against a fresh per-epoch loader in this process, epoch by
    epoch: the same batches; its worker processes are the same in every epoch."""
    _, dataset = _shapes(tmp_path)
    run = EpochLoader(dataset, batch_size=4, num_workers=2, seed=5)
    iterators = []
    for epoch in range(3):
        loader = run.epoch(EpochShuffleSampler(len(dataset), 5), epoch, first_batch=epoch * 3)
        got = _batches(loader)
        iterators.append(loader._iterator)
        fresh = create_dataloader(dataset, batch_size=4, num_workers=0, seed=5, drop_last=True,
                                  sampler=EpochShuffleSampler(len(dataset), 5))
        set_epoch(fresh, epoch)
        expected = _batches(fresh)
        assert len(got) == len(expected) == 3
        for (a_images, a_targets, a_index), (b_images, b_targets, b_index) in zip(got, expected):
            assert a_index == b_index
            assert torch.equal(a_images, b_images) and torch.equal(a_targets, b_targets)
    assert iterators[0] is iterators[1] is iterators[2]  # one set of worker processes for the run
    assert not torch.equal(_batches(run.epoch(EpochShuffleSampler(len(dataset), 5), 0))[0][0],
                           _batches(run.epoch(EpochShuffleSampler(len(dataset), 5), 1))[0][0])


@pytest.mark.parametrize("pipeline", ["darknet", "darknet_opencv", "affine"])
def test_ram_cache_gives_the_same_items(tmp_path, pipeline):
    """Decoded images kept in memory: the same items, training (every pipeline, mosaic and mixup on) and
    evaluation; the kept images are read-only, so no augmentation can change them."""
    _, dataset = _shapes(tmp_path)
    extra = {"darknet": {"mixup": 1}, "darknet_opencv": {"mosaic": 1}, "affine": {"mosaic": 0.5}}[pipeline]
    hyp = augment_config(pipeline=pipeline, jitter=0.3, hue=0.1, saturation=1.5, exposure=1.5, **extra)
    for augment in (True, False):
        plain = DetectionDataset(dataset.records, dataset.names, 64, augment=augment, hyp=hyp, seed=5)
        cached = DetectionDataset(dataset.records, dataset.names, 64, augment=augment, hyp=hyp, seed=5)
        assert cached.cache_images() == sum(r.height * r.width * 3 for r in dataset.records)
        for epoch in range(2):
            for index in range(len(plain)):
                (a, ta, _), (b, tb, _) = plain[(index, (64, 64), epoch)], cached[(index, (64, 64), epoch)]
                assert torch.equal(a, b) and torch.equal(ta, tb)
        assert all(not image.flags.writeable for image in cached.images)


class _Threads(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, item):
        return torch.zeros(3, 2, 2), torch.zeros(0, 6), {"threads": torch.get_num_threads()}


def test_each_worker_runs_one_torch_thread():
    _Threads.img_size = (2, 2)
    loader = EpochLoader(_Threads(), batch_size=1, num_workers=1).epoch(range(2), 0)
    assert [infos[0]["threads"] for _, _, infos in loader] == [1, 1]


# ---------------------------------------------------------------------------------------------- the benchmark
def test_benchmark_data_mode_runs(tmp_path, capsys, assets):
    """tools/benchmark.py --data: every pipeline timed; figures are reported, never asserted on."""
    from yolo.cli.benchmark import main as bench_main, parse_args as bench_args

    data, _ = _shapes(tmp_path)
    figures = bench_main(bench_args(["--data", str(data), "--cfg", str(assets("cfg/yolov3-tiny.cfg")),
                                     "--img-size", "64", "--images", "3", "--iters", "1", "--warmup", "0"]))
    out = capsys.readouterr().out
    for name in ("darknet", "darknet_opencv", "affine", "darknet, RAM cache", "JPEG decode"):
        assert name in out
    assert figures["darknet_RAM_cache_ms"] > 0
    assert figures["darknet_ms"] > 0 and figures["darknet_opencv_ms"] > 0 and figures["affine_ms"] > 0
    assert figures["darknet_per_decode"] == pytest.approx(figures["darknet_ms"] / figures["JPEG_decode_ms"])
    assert "darknet item / JPEG decode" in out


def test_benchmark_loader_workers_times_the_loader_with_each_count(tmp_path, capsys, assets):
    from yolo.cli.benchmark import main as bench_main, parse_args as bench_args

    data, _ = _shapes(tmp_path)
    figures = bench_main(bench_args(["--data", str(data), "--cfg", str(assets("cfg/yolov3-tiny.cfg")),
                                     "--img-size", "64", "--images", "4", "--iters", "1", "--warmup", "0",
                                     "--batch-size", "2", "--loader-workers", "0", "1"]))
    assert "training loader alone" in capsys.readouterr().out
    for count in (0, 1):
        assert figures[f"loader_{count}w_images_per_s"] > 0 and figures[f"loader_{count}w_main_cpu_ms"] >= 0
    assert figures["loader_1w_threads"] >= 1  # a worker process was there to count


def test_benchmark_loader_workers_refuses_a_batch_larger_than_the_dataset(tmp_path, capsys, assets):
    """The loader makes whole mini-batches only: 12 images in batches of 16 would time nothing, forever."""
    from yolo.cli.benchmark import main as bench_main, parse_args as bench_args

    data, _ = _shapes(tmp_path)
    with pytest.raises(SystemExit):
        bench_main(bench_args(["--data", str(data), "--cfg", str(assets("cfg/yolov3-tiny.cfg")), "--img-size", "64",
                               "--images", "4", "--iters", "1", "--warmup", "0", "--batch-size", "16",
                               "--loader-workers", "0"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: {data}: 12 train image(s), fewer than --batch-size 16: the loader alone cannot be "
                       "timed; give a smaller --batch-size"), err


def test_benchmark_data_mode_names_a_missing_dataset(tmp_path, capsys, assets):
    from yolo.cli.benchmark import main as bench_main, parse_args as bench_args

    with pytest.raises(SystemExit):
        bench_main(bench_args(["--data", str(tmp_path / "nope.yaml"), "--cfg", str(assets("cfg/yolov3-tiny.cfg"))]))
    assert "nope.yaml" in capsys.readouterr().err


class _OpenCVThreads(torch.utils.data.Dataset):
    """Each item: OpenCV's thread count in its process, after a resize large enough to run in parallel."""
    img_size = (2, 2)

    def __len__(self):
        return 4

    def __getitem__(self, item):
        cv2.resize(np.zeros((1200, 1600, 3), np.uint8), (800, 600))
        return torch.zeros(3, 2, 2), torch.zeros(0, 6), {"opencv": cv2.getNumThreads()}


def test_each_worker_runs_opencv_without_a_thread_pool_of_its_own():
    """OpenCV in a forked worker, after the parent's thread pool ran: no pool of its own (OpenCV reports one
    thread), and the worker does not crash (a count of 1 instead of 0 would, see one_thread_per_worker)."""
    cv2.setNumThreads(4)  # the parent's pool starts, with threads a fork does not copy
    try:
        cv2.resize(np.zeros((1200, 1600, 3), np.uint8), (800, 600))
        loader = EpochLoader(_OpenCVThreads(), batch_size=1, num_workers=2).epoch(range(4), 0)
        infos = [infos[0] for _, _, infos in loader]
    finally:
        cv2.setNumThreads(-1)
    assert [i["opencv"] for i in infos] == [1] * 4


def test_default_workers_from_the_cpus_of_the_process():
    assert default_workers(mini_batch=8, cpus=16) == 8  # at most a mini-batch's images
    assert default_workers(mini_batch=64, cpus=16) == 15  # all but one
    assert default_workers(mini_batch=64, processes_per_machine=8, cpus=64) == 7  # 63 shared by 8 processes
    assert default_workers(mini_batch=64, cpus=1) == 0  # one CPU: the training process loads
    if hasattr(os, "sched_getaffinity"):  # by default, the CPUs this process may use
        assert default_workers(mini_batch=10_000) == len(os.sched_getaffinity(0)) - 1
