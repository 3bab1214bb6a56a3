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


def test_a_link_where_the_package_writes_is_replaced_and_its_target_left_alone(tmp_path):
    """A link planted where the package writes a file of its own (a dataset's label cache pointing at a file of the
    user's): the link is replaced by the new file; nothing is written where it led."""
    victim = tmp_path / "bashrc"
    victim.write_text("user data")
    cache = tmp_path / "labels" / "train.cache.json"
    cache.parent.mkdir()
    cache.symlink_to(victim)
    write_text_atomic(cache, "{}")
    assert not cache.is_symlink() and cache.read_text() == "{}" and victim.read_text() == "user data"


def test_an_output_the_user_names_is_written_through_its_link(tmp_path):
    target = tmp_path / "real" / "model.pt"
    target.parent.mkdir()
    target.write_text("before")
    link = tmp_path / "model.pt"
    link.symlink_to(target)
    assert output_target(link) == target
    write_text_atomic(output_target(link), "after")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "after"  # the target is the new file, not left stale
    dangling = tmp_path / "dangling.pt"
    dangling.symlink_to(tmp_path / "real" / "new.pt")
    write_text_atomic(output_target(dangling), "made")
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
        with atomic_path(output_target(path) if kind == "link to a character device" else path) as tmp:
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
