"""cache_images: the memory it needs, known before any image is decoded and checked against what the machine (and
its cgroup) has left; one copy per machine under DDP; the same items as from disk."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from training_helpers import run, shapes_training, train_state
from yolo.data.dataset import DetectionDataset, YoloDataset
from yolo.data.image_cache import CACHE_SHARE, ImageCache
from yolo.data.transforms import augment_config
from yolo.data.memory import Available, address_space_available, available_memory, cgroup_available, meminfo_available
from yolo.engine.distributed import DistInfo
from yolo.engine.shared_images import FILE_PREFIX, cache_train_images
from yolo.errors import DataError

pytestmark = pytest.mark.usefixtures("private_cache")

# (height, width) of the images of the small dataset; the cache holds h * w * 3 bytes of each.
SIZES = [(30, 40), (48, 64), (23, 17), (61, 35)]
SIZES_BYTES = 30 * 40 * 3 + 48 * 64 * 3 + 23 * 17 * 3 + 61 * 35 * 3  # 20,394


def small_dataset(root: Path) -> YoloDataset:
    """PNG images of :data:`SIZES` (random pixels) with one box each, as a YOLO-layout split."""
    images, labels = root / "images" / "train", root / "labels" / "train"
    if not images.is_dir():
        images.mkdir(parents=True)
        labels.mkdir(parents=True)
        rng = np.random.default_rng(3)
        for i, (h, w) in enumerate(SIZES):
            cv2.imwrite(str(images / f"{i}.png"), rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
            (labels / f"{i}.txt").write_text("0 0.5 0.5 0.4 0.3\n")
    return YoloDataset(images, ["thing"], img_size=32, augment=True, seed=1)


def counting_decodes(dataset) -> list:
    """Record the indices ``dataset`` decodes from disk from now on."""
    decoded, decode = [], dataset.decode_image
    dataset.decode_image = lambda index: (decoded.append(index), decode(index))[1]
    return decoded


# -------------------------------------------------------------------------------------------- the estimate
def test_the_estimate_is_the_bytes_of_the_decoded_images(tmp_path):
    dataset = small_dataset(tmp_path)
    assert ImageCache.nbytes_of(dataset.cache_shapes()) == SIZES_BYTES == 20394
    decoded = counting_decodes(dataset)
    assert dataset.cache_images() == SIZES_BYTES
    assert sorted(decoded) == list(range(len(SIZES)))
    assert dataset.images.buffer.nbytes == SIZES_BYTES


def test_a_cache_that_does_not_fit_is_one_warning_and_no_decoding(tmp_path, caplog):
    dataset = small_dataset(tmp_path)
    decoded = counting_decodes(dataset)
    short = Available(int(SIZES_BYTES / CACHE_SHARE) - 1, "a made-up limit")
    with caplog.at_level(logging.WARNING):
        assert cache_train_images(dataset, available=lambda: short) is False
    assert dataset.images is None and decoded == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert "4 decoded train images need 20.4 kB, more than 75% of the 27.2 kB available (a made-up limit)" \
        in warnings[0], warnings[0]
    assert "from disk" in warnings[0]

    enough = Available(int(SIZES_BYTES / CACHE_SHARE) + 1, "a made-up limit")
    assert cache_train_images(dataset, available=lambda: enough) is True
    assert sorted(decoded) == list(range(len(SIZES))) and dataset.images.nbytes == SIZES_BYTES
    for index in range(len(dataset)):  # the kept images are the files' pixels, read-only
        image = dataset.load_sample(index)[0]
        assert not image.flags.writeable
        assert np.array_equal(image, cv2.imread(dataset.records[index].path)[:, :, ::-1])


@pytest.mark.parametrize("mosaic", [1.0, 0.5])
def test_images_kept_at_their_mosaic_tile_size_give_the_same_items(tmp_path, mosaic):
    """The affine pipeline with every item a mosaic first reduces each image to its letterbox size within the input:
    kept at that size, the items are the same, bit for bit; with single-image items too, the originals are kept."""
    dataset = small_dataset(tmp_path)
    hyp = augment_config(pipeline="affine", mosaic=mosaic, scale=0.3, translate=0.1, degrees=5, hue=0.1,
                         saturation=1.5, exposure=1.5)
    plain = DetectionDataset(dataset.records, dataset.names, 32, augment=True, hyp=hyp, seed=5)
    cached = DetectionDataset(dataset.records, dataset.names, 32, augment=True, hyp=hyp, seed=5)
    held = cached.cache_images(size_hw=(32, 32))
    # Darknet's letterbox into 32x32: 30x40 -> 24x32, 48x64 -> 24x32, 61x35 -> 32x18; 23x17 would grow (kept).
    assert held == ((24 * 32 + 24 * 32 + 23 * 17 + 32 * 18) * 3 if mosaic == 1 else SIZES_BYTES)
    for size in ((32, 32), (64, 64)):  # the kept size, and another one (read from disk)
        for epoch in range(3):
            for index in range(len(plain)):
                (a, ta, ia), (b, tb, ib) = plain[(index, size, epoch)], cached[(index, size, epoch)]
                assert torch.equal(a, b) and torch.equal(ta, tb), (size, epoch, index)
                assert ia["orig_shape"] == ib["orig_shape"]
    plain.augment = cached.augment = False  # evaluation items start from the original: they read the disk
    for index in range(len(plain)):
        assert torch.equal(plain[index][0], cached[index][0]) and torch.equal(plain[index][1], cached[index][1])


def test_the_shared_file_is_nameless_before_it_fills_and_no_room_for_it_is_one_warning(tmp_path, monkeypatch, caplog):
    """The shared-file path in one process (as the first process of a machine): the file is made in the given
    folder, its name gone before the first image is decoded; a file that cannot be made is a warning, no cache."""
    dataset = small_dataset(tmp_path / "data")
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr("yolo.engine.shared_images.is_distributed", lambda: True)
    names_while_filling = []
    decode = dataset.decode_image
    dataset.decode_image = lambda index: (names_while_filling.append(list(shm.iterdir())), decode(index))[1]
    assert cache_train_images(dataset, available=lambda: None, folders=[shm]) is True
    assert names_while_filling == [[]] * len(SIZES) and list(shm.iterdir()) == []
    assert Path(dataset.images.buffer.filename).parent == shm
    for index in range(len(dataset)):
        assert np.array_equal(dataset.load_sample(index)[0], decode(index))

    def no_room(path, shapes):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ImageCache, "create", no_room)
    dataset.use_image_cache(None)
    with caplog.at_level(logging.WARNING):
        assert cache_train_images(dataset, available=lambda: None, folders=[shm]) is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "No space left on device" in warnings[0] and "from disk" in warnings[0], warnings
    assert dataset.images is None


def test_a_bar_while_the_cache_fills(tmp_path, capsys):
    dataset = small_dataset(tmp_path)
    dataset.cache_images(progress=True)
    drawn = capsys.readouterr().err
    assert "caching train images:" in drawn and "/4 [" in drawn, drawn
    dataset.cache_images(progress=False)
    assert "caching train images" not in capsys.readouterr().err


def test_an_unreadable_image_while_filling_is_the_usual_data_error(tmp_path):
    dataset = small_dataset(tmp_path)

    def broken(index):
        raise DataError("cannot read image (missing or corrupt)", dataset.records[index].path)

    dataset.decode_image = broken
    with pytest.raises(DataError, match=r"\.png: cannot read image"):
        cache_train_images(dataset, available=lambda: None)
    assert dataset.images is None


@pytest.mark.slow
def test_a_training_run_without_room_trains_from_disk(tmp_path, monkeypatch, caplog):
    shapes = shapes_training(tmp_path, num_train=16, num_val=4, seed=4)
    monkeypatch.setattr("yolo.engine.shared_images.available_memory", lambda: Available(1000, "a made-up limit"))
    kept = []
    with caplog.at_level(logging.WARNING, logger="yolo.engine.shared_images"):
        trainer = run(shapes, tmp_path, name="no-room", epochs=1, cache_images=True,
                      hooks={"before_train": lambda t: kept.append(t.parts.train_set.images)})
    assert kept == [None]
    assert sum("cache_images" in r.getMessage() and "a made-up limit" in r.getMessage() for r in caplog.records) == 1
    assert train_state(trainer.result.run_dir)["train"]["global_step"] > 0


# ------------------------------------------------------------------------------------ memory and cgroups
def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_meminfo_available(tmp_path):
    write(tmp_path / "meminfo", "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    12345678 kB\n")
    assert meminfo_available(tmp_path / "meminfo") == 12345678 * 1024
    write(tmp_path / "old", "MemTotal:       16000000 kB\n")
    assert meminfo_available(tmp_path / "old") is None
    assert meminfo_available(tmp_path / "absent") is None


def test_cgroup_v2_the_tightest_limit_up_the_tree_with_page_cache_added_back(tmp_path):
    root = tmp_path / "cgroup"
    write(tmp_path / "self", "0::/a/b\n")
    write(root / "memory.max", "max\n")  # the root: no limit
    write(root / "memory.current", "999999999\n")
    write(root / "a" / "memory.max", "8000000000\n")
    write(root / "a" / "memory.current", "3000000000\n")
    write(root / "a" / "b" / "memory.max", "6000000000\n")
    write(root / "a" / "b" / "memory.current", "2000000000\n")
    write(root / "a" / "b" / "memory.stat", "anon 1500000000\ninactive_file 500000000\nactive_file 100\n")
    found = cgroup_available(root, tmp_path / "self")
    assert found.bytes == 4_500_000_000 and str(root / "a" / "b") in found.where  # 6e9 - 2e9 + 0.5e9 < 8e9 - 3e9
    write(root / "a" / "memory.current", "4000000000\n")
    assert cgroup_available(root, tmp_path / "self").bytes == 4_000_000_000  # now the parent binds

    write(tmp_path / "meminfo", "MemAvailable:    2000000 kB\n")
    both = available_memory(tmp_path / "meminfo", root, tmp_path / "self")
    assert both.bytes == 2_048_000_000 and "MemAvailable" in both.where


def test_cgroup_v1_in_a_container_and_unlimited(tmp_path):
    root = tmp_path / "cgroup"
    # The host's path of the container's cgroup, absent from the container's view: its root's files count.
    write(tmp_path / "self", "5:devices:/\n4:memory:/docker/0123abcd\n0::/\n")
    write(root / "memory" / "memory.limit_in_bytes", "4294967296\n")
    write(root / "memory" / "memory.usage_in_bytes", "1073741824\n")
    write(root / "memory" / "memory.stat", "cache 100\ntotal_inactive_file 1073741824\n")
    assert cgroup_available(root, tmp_path / "self").bytes == 4294967296  # 4 GiB - 1 GiB + 1 GiB
    write(root / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    assert cgroup_available(root, tmp_path / "self") is None
    assert cgroup_available(tmp_path / "nothing", tmp_path / "absent") is None
    assert available_memory(tmp_path / "absent", tmp_path / "nothing", tmp_path / "absent") is None


# ------------------------------------------------------------------------------------------------ DDP
def _rank(rank: int, root: str, shared: str, store: str, available_bytes: int, out: str) -> None:
    """One of two gloo processes of one machine: cache the small dataset, report what it decoded, the file it
    maps (device and inode, from /proc/self/maps) and whether its items equal those read from disk."""
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        dataset = small_dataset(Path(root))
        decoded = counting_decodes(dataset)
        cached = cache_train_images(dataset, DistInfo(rank, rank, 2), available=lambda: Available(
            available_bytes, "a made-up limit"), folders=[Path(shared)])
        decoded_while_caching = list(decoded)
        maps = [line.split() for line in Path("/proc/self/maps").read_text().splitlines() if FILE_PREFIX in line]
        files = sorted({(m[3], m[4], m[5]) for m in maps})  # (device, inode, path)
        equal = all(np.array_equal(dataset.load_sample(i)[0], dataset.decode_image(i)) for i in range(len(dataset)))
        items = [dataset[(i, (32, 32), 0)] for i in range(len(dataset))]
        dataset.use_image_cache(None)
        equal_items = all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
                          for a, b in zip(items, (dataset[(i, (32, 32), 0)] for i in range(len(dataset)))))
        dist.barrier()
        Path(f"{out}{rank}.json").write_text(json.dumps({"cached": cached, "decoded": decoded_while_caching,
                                                          "files": files, "equal": equal,
                                                          "equal_items": equal_items}))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads /proc/self/maps (Linux)")
def test_two_ddp_ranks_share_one_copy(tmp_path):
    root, shared = tmp_path / "data", tmp_path / "shm"
    shared.mkdir()
    small_dataset(root)  # the files and the label cache, before the two processes
    # Room for one copy, not for one per process: the check counts the machine's one copy.
    one_copy = int(SIZES_BYTES / CACHE_SHARE) + 1
    mp.spawn(_rank, args=(str(root), str(shared), str(tmp_path / "store"), one_copy, str(tmp_path / "rank")),
             nprocs=2, join=True)
    first, second = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert first["cached"] and second["cached"]
    assert sorted(first["decoded"]) == list(range(len(SIZES)))
    assert second["decoded"] == []
    assert len(first["files"]) == len(second["files"]) == 1
    assert first["files"] == second["files"]  # the same file: device and inode
    assert Path(first["files"][0][2]).parent == shared
    assert list(shared.iterdir()) == []  # its name is gone; the memory goes with the last process
    assert first["equal"] and second["equal"] and first["equal_items"] and second["equal_items"]


def test_an_address_space_limit_counts_as_memory_left(tmp_path, monkeypatch):
    # ulimit -v: before, the fit check read MemAvailable and cgroups alone, and the cache ran into a MemoryError
    write(tmp_path / "status", "Name:\tpython\nVmPeak:\t 4000000 kB\nVmSize:\t 3000000 kB\nVmRSS:\t 700000 kB\n")
    space = address_space_available(limit=4_000_000 * 1024, status=tmp_path / "status")
    assert space.bytes == 1_000_000 * 1024 and "ulimit -v 4000000" in space.where
    assert address_space_available(limit=-1, status=tmp_path / "status") is None  # RLIM_INFINITY
    import yolo.data.memory as memory
    monkeypatch.setattr(memory.resource, "getrlimit", lambda which: (4_000_000 * 1024, -1))
    write(tmp_path / "meminfo", "MemAvailable:    8000000 kB\n")
    found = available_memory(tmp_path / "meminfo", tmp_path / "nothing", tmp_path / "absent", tmp_path / "status")
    assert found.bytes == 1_000_000 * 1024 and "address-space limit" in found.where
