"""Write errors (yolo.files.write_errors): a full or read-only disk, a folder that cannot be created, each one line
naming the path and the operating system's reason, never a guess and never a traceback.

Full and read-only file systems are real ones where the machine allows it (a small tmpfs, mounted as root);
elsewhere those tests skip with the reason, and the same logic is covered with a writer that fails."""

import errno
import os

import pytest

import yolo.files.write_errors as write_errors
from helpers import detect_command, mounted, noisy_images, one_line_error
from training_helpers import base_flags, train_error
from yolo.files.write_errors import output_error


@pytest.mark.slow
@pytest.mark.usefixtures("private_cache")
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_folder_that_cannot_be_created_is_not_called_a_full_disk(capsys, trained_setup, tmp_path):
    err = train_error(capsys, base_flags(trained_setup, tmp_path, project="/proc/probe"))
    assert err == "error: /proc/probe/exp: cannot write: no such file or directory", err


@pytest.mark.usefixtures("private_cache")
def test_the_os_reason_wins_over_a_free_space_guess(tmp_path, monkeypatch):
    """A file system that reports no free blocks (as /proc does) is not the cause when the OS gave its own."""
    real_statvfs = os.statvfs

    class NoFreeBlocks:
        def __init__(self, stats):
            self.f_flag, self.f_frsize, self.f_bavail = stats.f_flag, stats.f_frsize, 0

    monkeypatch.setattr(write_errors.os, "statvfs", lambda p: NoFreeBlocks(real_statvfs(p)))
    target = tmp_path / "missing" / "exp"
    error = output_error(target, FileNotFoundError(errno.ENOENT, "No such file or directory", str(target)))
    assert str(error) == f"{target}: cannot write: no such file or directory"
    error = output_error(target, OSError(errno.ENOSPC, "No space left on device", str(target)))
    assert str(error) == f"{target}: cannot write: the disk is full: free some space"


@pytest.mark.usefixtures("private_cache")
def test_a_file_system_without_blocks_is_not_called_full(tmp_path, monkeypatch):
    """/proc and /sys report no blocks at all, so no free ones either: a write there that fails without a
    reason (cv2.imwrite's False) is not put down to a full disk."""
    real_statvfs = os.statvfs

    class Pseudo:
        def __init__(self, stats):
            self.f_flag, self.f_frsize, self.f_bavail, self.f_blocks = stats.f_flag, stats.f_frsize, 0, 0

    monkeypatch.setattr(write_errors.os, "statvfs", lambda p: Pseudo(real_statvfs(p)))
    target = tmp_path / "image.jpg"
    assert str(output_error(target)) == f"{target}: cannot write: the writer reported a failure"


@pytest.fixture
def read_only_disk(tmp_path):
    """A read-only file system (chmod does not stop root: a tmpfs mounted ``ro``), unmounted after the test."""
    path = tmp_path / "ro"
    unmount = mounted(path, "ro,size=64k")
    yield path
    unmount()


# ------------------------------------------------------------------------------- full disk
# ------------------------------------------------------------------------------- read-only output folder
def test_every_tool_on_a_read_only_output_folder_is_one_line(capsys, tiny, train_setup, read_only_disk):
    from yolo.cli import convert, eval as eval_cli, train as train_cli

    cfg, pt, weights = tiny
    source = noisy_images(train_setup / "images", 1, side=64)
    checks = {
        "detect": detect_command(tiny, source, read_only_disk / "runs"),
        "train": lambda: train_cli.cli(["--cfg", str(cfg), "--data", str(train_setup / "data.yaml"),
                                        "--hyp", str(train_setup / "hyp.yaml"), "--epochs", "1", "--device", "cpu",
                                        "--project", str(read_only_disk / "runs"), "--no-progress"]),
        "eval": lambda: eval_cli.cli(["--weights", str(pt), "--data", str(train_setup / "data.yaml"),
                                      "--device", "cpu", "--project", str(read_only_disk / "runs"),
                                      "--no-progress", "--workers", "0"]),
        "convert .weights": lambda: convert.cli(["--weights", str(pt), "--output",
                                                 str(read_only_disk / "tiny.weights")]),
        "convert .pt": lambda: convert.cli(["--weights", str(weights), "--cfg", str(cfg), "--output",
                                            str(read_only_disk / "tiny.pt")]),
    }
    for tool, run in checks.items():
        err = one_line_error(capsys, run)
        assert "cannot write: the file system is read-only" in err and str(read_only_disk) in err, (tool, err)


def test_a_read_only_folder_is_one_line_without_a_mount(capsys, tiny, tmp_path, monkeypatch):
    """The same logic where no file system can be mounted: creating folders under ``ro`` fails as it does on
    a read-only file system."""
    import pathlib
    from yolo.cli import convert

    ro = tmp_path / "ro"
    real_mkdir = pathlib.Path.mkdir

    def mkdir(self, *args, **kwargs):
        if str(self).startswith(str(ro)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    source = noisy_images(tmp_path / "images", 1, side=64)
    err = one_line_error(capsys, detect_command(tiny, source, ro / "runs"))
    assert f"{ro}/runs/exp: cannot write: the file system is read-only" in err, err
    err = one_line_error(capsys, lambda: convert.cli(["--weights", str(tiny[1]), "--output", str(ro / "t.weights")]))
    assert f"{ro}: cannot write: the file system is read-only" in err, err
