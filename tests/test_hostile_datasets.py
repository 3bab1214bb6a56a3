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


# ------------------------------------------------------------------------------------------- label numbers
# Darknet's read_boxes (src/data.c), its reading loop as it is there, printing what it reads.
READ_BOXES_C = r"""
#include <stdio.h>
int main(int argc, char **argv) {
    FILE *file = fopen(argv[1], "r");
    float x, y, h, w;
    int id, count = 0;
    while (fscanf(file, "%d %f %f %f %f", &id, &x, &y, &w, &h) == 5) {
        printf("%d %.9g %.9g %.9g %.9g\n", id, x, y, w, h);
        ++count;
    }
    fclose(file);
    printf("%d\n", count);
    return 0;
}
"""

LABEL_LINES = [
    "0 0.5 0.5 0.2 0.2",            # plain
    "3 .5 5e-1 0.2E0 +0.2",         # forms strtod reads like Python
    "0\t0.5 0.5\x0b0.2\x0c0.2",     # C whitespace between values
    "+1 0.5 0.5 0.2 0.2",           # a signed class
    "0 0.48_9 0.5 0.2 0.2",         # Python reads 0.489, Darknet 0.48
    "\u0663 0.5 0.5 0.2 0.2",       # an Arabic-Indic 3: Python reads class 3, Darknet nothing
    "1 0.5 0.5 0.\u0662 0.2",       # an Arabic-Indic digit in a value
    "1 0.5\u00a00.5 0.2 0.2",       # a non-breaking space: Python splits there, Darknet stops
    "3.0 0.5 0.5 0.2 0.2",          # Darknet: class 3, then .0 as cx
    "0,0.5,0.5,0.2,0.2",            # Darknet: class 0, then stops at the comma
    "1 0x1p-1 0.5 0.2 0.2",         # hexadecimal: strtod reads 0.5, Python refuses
    "1 0.5 0.5 0.2 0.2e",           # a dangling exponent
]


def test_label_numbers_are_read_as_darknet_reads_them_or_refused_at_their_line(tmp_path):
    """Every line we keep, Darknet's own reading loop (compiled here) reads as one box with the same values;
    every line it would read otherwise is refused at its line."""
    import subprocess
    import numpy as np
    from yolo.data.validation import read_label_file
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build Darknet's read_boxes loop")
    source, program = tmp_path / "read_boxes.c", tmp_path / "read_boxes"
    source.write_text(READ_BOXES_C)
    subprocess.run(["gcc", "-O0", "-o", str(program), str(source)], check=True)
    kept = []
    for number, line in enumerate(LABEL_LINES):
        path = tmp_path / f"{number}.txt"
        path.write_bytes((line + "\n").encode("utf-8"))
        labels, problems = read_label_file(path, num_classes=5)
        out = subprocess.run([str(program), str(path)], capture_output=True, text=True, check=True).stdout.split("\n")
        darknet = [[float(v) for v in row.split()] for row in out[:int(out[-2])]]
        if problems:
            assert len(labels) == 0 and [p.line for p in problems] == [1], (line, problems)
            assert str(problems[0]).startswith(f"{path}:1: malformed label line"), problems[0]
            continue
        kept.append(line)
        assert len(darknet) == 1, (line, darknet)
        np.testing.assert_allclose(labels[0], np.float32(darknet[0]), rtol=1e-6, err_msg=line)
    assert kept == LABEL_LINES[:4]


# ------------------------------------------------------------------------------------------------ label cache
def test_a_label_edited_in_place_with_its_mtime_kept_is_read_again(own_shapes):
    """``cp -p``, ``rsync -t`` and ``touch -r`` keep the mtime, and an edit of one digit keeps the size: the
    cache must still serve the new labels."""
    from yolo.data.dataset import YoloDataset
    images = own_shapes / "data" / "images" / "train"
    label = own_shapes / "data" / "labels" / "train" / "00000.txt"
    label.write_text("1 0.5 0.5 0.4 0.4\n")
    first = YoloDataset(images, ["a", "b", "c"])
    assert first.records[0].labels.tolist() == [1]
    stat = label.stat()
    label.write_text("2 0.5 0.5 0.4 0.4\n")  # same size
    os.utime(label, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    assert label.stat().st_size == stat.st_size and label.stat().st_mtime_ns == stat.st_mtime_ns
    assert YoloDataset(images, ["a", "b", "c"]).records[0].labels.tolist() == [2]


# ---------------------------------------------------------------------------------- file contents in logs
def test_a_list_file_that_is_not_a_list_is_named_and_counted_never_echoed(capsys, caplog, own_shapes):
    """``train: /etc/passwd`` (or a private key): the tool names the file and counts its bad lines; no line of
    it reaches the output or the log, but a short escaped excerpt of the first."""
    secret = own_shapes / "secret"
    secret.write_text("-----BEGIN KEY-----\n" + "".join(f"hidden{n:02d}:x:{n}:\x1b[2J/home/user\n" for n in range(30)))
    (own_shapes / "secret.yaml").write_text(f"train: {secret}\nval: {secret}\nnames: [a, b]\n")
    with caplog.at_level(logging.DEBUG):
        err = anchors_error(capsys, "--data", own_shapes / "secret.yaml", "-n", "3")
    logged = caplog.text
    assert f"{secret}:1: 31 of 31 entries name no existing file (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...); the " \
           "first: '-----BEGIN KEY-----'" in logged, logged
    assert err == f"error: {secret}: no usable images (31 listed)", err
    for n in range(30):
        assert f"hidden{n:02d}" not in logged + err
    assert "\x1b" not in logged + err


# ---------------------------------------------------------------------------------------------- YAML files
DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("text, line, problem", [
    (f"train: images/train\nval: images/val\nnames: {DEEP}\n", 3, "nested more than 50 levels deep: not a settings "
                                                                 "file"),
    ("train: images/train\nval: images/val\nnames: [a]\nval: images/train\n", 4, "key 'val' is given twice (first "
                                                                               "at line 2): keep one"),
])
def test_a_data_yaml_nested_too_deep_or_with_a_key_twice_is_refused_at_its_line(capsys, own_shapes, text, line,
                                                                                 problem):
    data = own_shapes / "bad.yaml"
    data.write_text(text)
    err = anchors_error(capsys, "--data", data, "-n", "2")
    assert err == f"error: {data}:{line}: not valid YAML: {problem}", err


@pytest.mark.parametrize("text, line, problem", [
    (f"momentum: {DEEP}\n", 1, "nested more than 50 levels deep: not a settings file"),
    ("momentum: 0.9\nworkers: 0\nmomentum: 0.8\n", 3, "key 'momentum' is given twice (first at line 1): keep one"),
])
def test_a_hyp_yaml_nested_too_deep_or_with_a_key_twice_is_refused_at_its_line(own_shapes, text, line, problem):
    from yolo.engine.config import read_hyp
    from yolo.errors import ConfigError
    hyp = own_shapes / "bad_hyp.yaml"
    hyp.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_hyp(hyp)
    assert str(info.value) == f"{hyp}:{line}: not valid YAML: {problem}"


def test_an_unknown_key_in_a_data_yaml_is_refused_at_its_line_as_in_a_hyp_file(capsys, own_shapes):
    data = own_shapes / "typo.yaml"
    data.write_text(f"path: {own_shapes / 'data'}\ntrain: images/train\nval: images/val\nnames: [a, b]\n"
                    "vall: images/train\n")
    err = anchors_error(capsys, "--data", data, "-n", "2")
    assert err == (f"error: {data}:5: unknown key 'vall' (known: path, train, val, names, nc, train_images, "
                   "val_images, generate, test, download, roboflow)"), err


# ---------------------------------------------------------------------------------------------- names files
def test_a_blank_line_among_the_names_is_refused_at_its_line_as_darknet_would_read_a_class_there(capsys, own_shapes):
    """Darknet's get_labels keeps every line: with a blank line 2, 'dog' is its class 2, and would be 1 here."""
    from yolo.files.names import read_names
    names = own_shapes / "blank.names"
    names.write_text("cat\n\ndog\n")
    data = own_shapes / "blank.yaml"
    data.write_text(f"path: {own_shapes / 'data'}\ntrain: images/train\nval: images/val\nnames: {names}\n")
    err = anchors_error(capsys, "--data", data, "-n", "2")
    assert err == (f"error: {names}:2: line 2 is blank: Darknet reads it as class 1, a class without a name; name "
                   "the class, or remove the line if it is none (each line is the class of its number, from 0)"), err
    names.write_text("cat\ndog\n\n\n")  # after the last name: no class
    assert read_names(names) == ["cat", "dog"]


def test_a_label_file_that_is_some_other_file_is_counted_never_echoed(caplog, own_shapes):
    """An image's label path may point anywhere (a link to a private key): no line of it reaches the log."""
    from yolo.data.dataset import YoloDataset
    secret = own_shapes / "id_key"
    secret.write_text("-----BEGIN KEY-----\n" + "".join(f"c2VjcmV0{n:02d}c2VjcmV0\n" for n in range(20)))
    label = own_shapes / "data" / "labels" / "train" / "00000.txt"
    label.unlink()
    os.symlink(secret, label)
    with caplog.at_level(logging.DEBUG):
        dataset = YoloDataset(own_shapes / "data" / "images" / "train", ["a", "b", "c", "d", "e"])
    assert (f"{label}:1: not a label file: none of its 21 lines reads as 'class cx cy w h' (lines 1, 2, 3, 4, 5, 6, "
            "7, 8, 9, 10, ...; their text is not shown); its image is kept without boxes") in caplog.text, caplog.text
    assert "c2VjcmV0" not in caplog.text and "BEGIN" not in caplog.text
    assert len(dataset.records) == 8 and dataset.report.num_dropped_boxes == 21
