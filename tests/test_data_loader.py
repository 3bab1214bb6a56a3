"""A data loader worker that meets a bad file: its :class:`DataError` reaches the main process as its own one line
(not PyTorch's flattened worker traceback), the process then exits (the worker is not waited for forever), and the
tools end with that line: eval without a run folder, training with ``last.pt`` saved for a resume.

The bad file is an image rewritten after its scan with its size and mtime kept (the scan's cache still vouches
for it): only the loader can find it out."""
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torch.utils.data import DataLoader, Dataset

from helpers import REPO, one_line_error
from training_helpers import run, shapes_training, train_state, write_one_head_model
from yolo.data import YoloDataset
from yolo.data.loader import init_worker, shut_down_workers
from yolo.errors import DataError

pytestmark = pytest.mark.usefixtures("private_cache")


class BadItems(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        raise DataError("cannot read image (missing or corrupt)", "/data/images/val/7.jpg")


def test_a_data_error_in_a_loader_worker_is_its_own_one_line():
    batches = iter(DataLoader(BadItems(), batch_size=2, num_workers=1, worker_init_fn=init_worker))
    with pytest.raises(DataError) as info:
        next(batches)
    assert str(info.value) == "/data/images/val/7.jpg: cannot read image (missing or corrupt)"
    shut_down_workers(batches)  # now: the traceback kept in ``info`` would keep it to a garbage collection


@pytest.mark.slow
def test_a_process_whose_loader_worker_failed_exits_without_waiting_for_it(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(textwrap.dedent("""
        import sys
        from torch.utils.data import DataLoader, Dataset
        from yolo.data.loader import init_worker
        from yolo.errors import DataError

        class BadItems(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, index):
                raise DataError("cannot read image (missing or corrupt)", "/data/images/val/7.jpg")

        iterator = iter(DataLoader(BadItems(), batch_size=2, num_workers=2, worker_init_fn=init_worker))
        try:
            next(iterator)
        except DataError as exc:
            error = exc  # its traceback keeps the loader and its workers until the exit
            print("error:", exc)
    """))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and "error: /data/images/val/7.jpg" in done.stdout, done.stderr


def _rewrite_after_scan(image: Path) -> None:
    """``image`` becomes zeros of its size, with its mtime kept: the scan's cache does not see the change."""
    st = image.stat()
    image.write_bytes(bytes(st.st_size))
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture
def changed_val_image(tmp_path):
    shapes = shapes_training(tmp_path, num_train=8, num_val=2, seed=3)
    val = shapes["root"] / "images" / "val"
    YoloDataset(val, ["a"] * 5)  # the scan, cached
    image = sorted(val.glob("*.jpg"))[1]
    _rewrite_after_scan(image)
    return shapes, image


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 0])
def test_eval_ends_with_one_line_naming_an_image_changed_since_its_scan(capsys, tmp_path, changed_val_image,
                                                                          workers):
    from yolo.cli import eval as eval_cli

    shapes, image = changed_val_image
    _, pt, _ = write_one_head_model(tmp_path)
    argv = ["--weights", pt, "--data", shapes["data"], "--img-size", 64, "--workers", workers, "--project",
            tmp_path / "runs", "--no-progress"]
    running = set(multiprocessing.active_children())
    err = one_line_error(capsys, lambda: eval_cli.main(eval_cli.parse_args([str(a) for a in argv])))
    assert err == f"error: {image}: cannot read image (missing or corrupt)"
    assert not list((tmp_path / "runs").glob("*"))  # no run folder left
    # The loader's workers ended with the evaluation, although the error (and its traceback) is still held.
    assert set(multiprocessing.active_children()) <= running


@pytest.mark.slow
def test_training_whose_evaluation_meets_such_an_image_saves_last_pt_and_ends_with_it(tmp_path, changed_val_image):
    shapes, image = changed_val_image
    running = set(multiprocessing.active_children())
    with pytest.raises(DataError) as info:
        run(shapes, tmp_path / "runs", epochs=1, hyp={"workers": 1, "eval_interval": 1})
    assert str(info.value) == f"{image}: cannot read image (missing or corrupt)"
    assert set(multiprocessing.active_children()) <= running  # no loader worker left running
    state = train_state(tmp_path / "runs" / "exp")["train"]
    assert state["epoch"] == 0 and state["epoch_step"] > 0  # the epoch's updates kept; its evaluation left to do


CLOSE_WHILE_ANOTHER_LOADERS_WORKER_DIES = r'''
import json, os, signal, time
import torch
from yolo.data import EpochLoader


class Items(torch.utils.data.Dataset):
    img_size = (2, 2)

    def __len__(self):
        return 2

    def __getitem__(self, item):
        return torch.zeros(3, 2, 2), torch.zeros(0, 6), {}


closing, other = EpochLoader(Items(), batch_size=1, num_workers=2), EpochLoader(Items(), batch_size=1, num_workers=1)
for loader in (closing, other):
    list(loader.epoch(range(2), 0))
iterator = closing.loader._iterator
workers = [w.pid for w in iterator._workers]
shutdown, victim = iterator._shutdown_workers, other.loader._iterator._workers[0].pid


def other_worker_dies_during_the_shutdown(killed=[]):
    if not killed:
        killed.append(victim)
        os.kill(victim, signal.SIGKILL)  # PyTorch's SIGCHLD handler raises for it while the shutdown waits
        time.sleep(2)
    shutdown()


iterator._shutdown_workers = other_worker_dies_during_the_shutdown
closing.close()
time.sleep(0.5)
alive = [pid for pid in workers if os.path.exists(f"/proc/{pid}") and
         open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
print(json.dumps({"alive": alive}))
os._exit(0)  # the other loader's dead worker is not this test's subject
'''


@pytest.mark.slow
def test_closing_a_loader_while_another_loaders_worker_dies_still_ends_its_workers():
    """PyTorch reports any registered loader worker's death from its SIGCHLD handler, also inside another loader's
    shutdown: that death was reported where it happened; the closing loader's workers still end."""
    from helpers import in_fresh_process

    result, _ = in_fresh_process(CLOSE_WHILE_ANOTHER_LOADERS_WORKER_DIES, timeout=120)
    assert result == {"alive": []}
