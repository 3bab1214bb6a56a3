"""A hostile or careless dataset stays harmless: no tool writes over a file the run reads, no file's contents end
up in a log, label numbers are read as Darknet's ``fscanf`` reads them or refused at their line, an edited label
is never served from the cache, and settings files are refused at their line (a key given twice, nesting no
settings file has).

The datasets are ``training_helpers.write_one_head_training``'s: 8 train images of generated shapes."""
import logging
import os
import shutil

import pytest

from helpers import one_line_error
from training_helpers import write_data, write_one_head_training
from yolo.cli import anchors as anchors_cli

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """The one-head training files (data.yaml, tiny.cfg, hyp.yaml, data/), made once for the module; tests copy
    what they change."""
    return write_one_head_training(tmp_path_factory.mktemp("datasets"))


@pytest.fixture
def own_shapes(shapes, tmp_path):
    """A copy of the module's training files that a test may change (its data.yaml points to the copy)."""
    folder = shutil.copytree(shapes, tmp_path / "shapes")
    write_data(folder, folder / "data")
    return folder


def anchors_error(capsys, *argv) -> str:
    return one_line_error(capsys, lambda: anchors_cli.main(anchors_cli.parse_args([str(a) for a in argv])))


# ------------------------------------------------------------------------------------ outputs onto inputs
def test_anchors_write_onto_a_label_file_is_refused_and_the_label_kept(capsys, own_shapes):
    label = sorted((own_shapes / "data" / "labels" / "train").glob("*.txt"))[0]
    before = label.read_bytes()
    err = anchors_error(capsys, "--data", own_shapes / "data.yaml", "-n", "3", "--cfg", own_shapes / "tiny.cfg",
                        "--write", label)
    assert f"--write is the input the label file of {own_shapes / 'data' / 'images' / 'train'}" in err, err
    assert label.read_bytes() == before


@pytest.mark.parametrize("target", ["names", "image", "list"])
def test_anchors_write_onto_the_names_file_an_image_or_the_list_file_is_refused(capsys, own_shapes, target):
    data = own_shapes / "data"
    (own_shapes / "shapes.names").write_text("".join(f"{n}\n" for n in ("circle", "rectangle", "triangle",
                                                                         "ellipse", "cross")))
    images = sorted((data / "images" / "train").glob("*.jpg"))
    (own_shapes / "train.txt").write_text("".join(f"{p}\n" for p in images))
    (own_shapes / "list.yaml").write_text(f"path: {data}\ntrain: {own_shapes / 'train.txt'}\nval: images/val\n"
                                          f"names: {own_shapes / 'shapes.names'}\n")
    path = {"names": own_shapes / "shapes.names", "image": images[0], "list": own_shapes / "train.txt"}[target]
    link = own_shapes / "link"  # through a symbolic link: the same file
    os.symlink(path, link)
    before = path.read_bytes()
    err = anchors_error(capsys, "--data", own_shapes / "list.yaml", "-n", "3", "--cfg", own_shapes / "tiny.cfg",
                        "--write", link)
    assert "--write is the input the" in err and "writing it would destroy the input" in err, err
    assert path.read_bytes() == before
