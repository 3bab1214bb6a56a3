"""The atomic writer (yolo.files.atomic): a regular file or a new path is written whole or not at all; a device, a
FIFO or a folder at the path is refused in one line and left as it was; a symbolic link is written through."""
import os
import stat

import pytest

from yolo.errors import OutputError
from yolo.files.atomic import atomic_path, output_target, write_text_atomic


def test_a_regular_file_or_a_new_path_is_written(tmp_path):
    old = tmp_path / "old.txt"
    old.write_text("before")
    write_text_atomic(old, "after")
    write_text_atomic(tmp_path / "new" / "new.txt", "new")
    assert old.read_text() == "after" and (tmp_path / "new" / "new.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old.txt"]  # no temporary file left


def test_a_symbolic_link_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real" / "model.pt"
    target.parent.mkdir()
    target.write_text("before")
    link = tmp_path / "model.pt"
    link.symlink_to(target)
    write_text_atomic(link, "after")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "after"  # the target is the new file, not left stale
    dangling = tmp_path / "dangling.pt"
    dangling.symlink_to(tmp_path / "real" / "new.pt")
    write_text_atomic(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "new.pt").read_text() == "made"


@pytest.mark.parametrize("kind", ["fifo", "link to a character device", "folder"])
def test_a_device_a_fifo_or_a_folder_is_refused_and_left_as_it_was(tmp_path, kind):
    path = tmp_path / "out.pt"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:  # /dev/null itself is never a test's output: through a link, old code replaced the link only
        path.symlink_to("/dev/null")
    before = os.lstat(path)
    with pytest.raises(OutputError) as error:
        with atomic_path(path) as tmp:
            tmp.write_text("data")
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{path}: cannot write: it is ")
    assert "not a regular file" in message
    after = os.lstat(path)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pt"]  # no temporary file left
    with pytest.raises(OutputError):
        output_target(path)
