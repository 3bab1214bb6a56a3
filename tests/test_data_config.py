"""Dataset YAML configs: env expansion, relative paths, names, errors that name the file."""
import logging
import os
from pathlib import Path

import pytest
import yaml

from conftest import asset
from helpers import anchors_error
from yolo.data import load_data_config
from yolo.errors import DataError

REPO = Path(__file__).resolve().parents[1]


def _layout(root: Path) -> None:
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_env_expansion_and_relative_split_paths(tmp_path, monkeypatch):
    _layout(tmp_path / "data" / "ds")
    monkeypatch.setenv("MY_DATA_ROOT", str(tmp_path / "data"))
    cfg = load_data_config(_write(tmp_path / "cfgs" / "ds.yaml",
                                  "path: ${MY_DATA_ROOT}/ds\ntrain: images/train\nval: images/val\nnames: [a, b]\n"))
    assert cfg.root == (tmp_path / "data" / "ds").resolve()
    assert cfg.train == cfg.root / "images" / "train"
    assert cfg.val == cfg.root / "images" / "val"
    assert cfg.names == ["a", "b"] and cfg.num_classes == 2


def test_relative_root_resolves_against_yaml_folder_not_cwd(tmp_path, monkeypatch):
    _layout(tmp_path / "datasets" / "ds")
    yaml_path = _write(tmp_path / "configs" / "ds.yaml",
                       "path: ../datasets/ds\ntrain: images/train\nval: images/val\nnames: [a]\n")
    monkeypatch.chdir(REPO)  # somewhere else entirely
    cfg = load_data_config(yaml_path)
    assert cfg.root == (tmp_path / "datasets" / "ds").resolve()


def test_env_default_and_missing_variable(tmp_path, monkeypatch):
    _layout(tmp_path / "ds")
    monkeypatch.delenv("UNSET_DATA_VAR", raising=False)
    text = "path: ${UNSET_DATA_VAR:-%s}\ntrain: images/train\nval: images/val\nnames: [a]\n" % (tmp_path / "ds")
    assert load_data_config(_write(tmp_path / "ok.yaml", text)).root == (tmp_path / "ds").resolve()

    bad = _write(tmp_path / "bad.yaml", "path: ${UNSET_DATA_VAR}/ds\ntrain: images/train\nval: images/val\nnames: [a]\n")
    with pytest.raises(DataError, match="UNSET_DATA_VAR") as err:
        load_data_config(bad)
    assert "bad.yaml" in str(err.value)


def test_names_from_names_file_and_mapping(tmp_path):
    _layout(tmp_path)
    _write(tmp_path / "my.names", "cat\ndog\nbird\n\n")  # a blank line at the end is no class
    cfg = load_data_config(_write(tmp_path / "a.yaml", "train: images/train\nval: images/val\nnames: my.names\n"))
    assert cfg.names == ["cat", "dog", "bird"] and cfg.root == tmp_path.resolve()
    cfg = load_data_config(_write(tmp_path / "b.yaml", "train: images/train\nval: images/val\nnames: {1: dog, 0: cat}\n"))
    assert cfg.names == ["cat", "dog"]


@pytest.mark.parametrize("text, message", [
    ("train: images/train\nval: images/val\nnames: [a, b]\nnc: 3\n", "class count mismatch"),
    ("train: images/train\nval: images/val\n", "names"),
    ("val: images/val\nnames: [a]\n", "'train'"),
    ("train: images/nowhere\nval: images/val\nnames: [a]\n", "does not exist"),
    ("train: images/train\nval: images/val\nnames: [a, a]\n", "duplicate"),
    ("train: images/train\nval: images/val\nnames: missing.names\n", "not found"),
    ("train: [images/train\n", "not valid YAML"),
])
def test_errors_name_the_yaml_file(tmp_path, text, message):
    _layout(tmp_path)
    path = _write(tmp_path / "broken.yaml", text)
    with pytest.raises(DataError, match=message) as err:
        load_data_config(path)
    assert str(path) in str(err.value)


def test_coco128_yaml_points_at_assets_with_coco_names():
    root = asset("coco128")
    cfg = load_data_config(REPO / "configs" / "coco128.yaml")
    # resolve() on both sides: YOLO_ASSETS may reach the assets through a symbolic link
    assert cfg.root.resolve() == root.resolve()
    assert cfg.train.resolve() == cfg.val.resolve() == root.resolve() / "images" / "train2017"
    reference = [line.strip() for line in asset("cfg/coco.names").read_text().splitlines() if line.strip()]
    assert cfg.names == reference and cfg.num_classes == 80


def test_a_dataset_path_under_a_file_names_the_variable_that_must_be_a_folder(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("YOLO_DATASETS", str(tmp_path / "a-file"))
    with pytest.raises(DataError) as info:
        load_data_config(REPO / "configs" / "shapes.yaml")
    assert str(info.value) == (f"{REPO / 'configs' / 'shapes.yaml'}:4: 'path: ${{YOLO_DATASETS:-../datasets}}/shapes' "
                               f"is {tmp_path / 'a-file' / 'shapes'}, but {tmp_path / 'a-file'} is a file, not a "
                               "folder; YOLO_DATASETS must name a folder")


def test_shapes_yaml_without_generating(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO_DATASETS", str(tmp_path))
    cfg = load_data_config(REPO / "configs" / "shapes.yaml", prepare=False)
    assert cfg.root == (tmp_path / "shapes").resolve()
    assert cfg.generate["name"] == "shapes"
    assert not (tmp_path / "shapes").exists()
    monkeypatch.delenv("YOLO_DATASETS")
    cfg = load_data_config(REPO / "configs" / "shapes.yaml", prepare=False)
    assert cfg.root == REPO / "datasets" / "shapes"  # git-ignored folder of the repository


def test_roboflow_parent_paths_fall_back_to_the_folders_beside_the_yaml(tmp_path):
    """Roboflow's export: data.yaml in the dataset folder beside train/ valid/, its paths written from one folder
    down (``../train/images``); read as ultralytics does, from the YAML's own folder when ``../`` leads nowhere."""
    root = tmp_path / "export"
    for split in ("train", "valid"):
        (root / split / "images").mkdir(parents=True)
        (root / split / "labels").mkdir(parents=True)
    # as Roboflow writes it, with its roboflow: block (where the export came from), which is ignored
    cfg = load_data_config(_write(root / "data.yaml", "train: ../train/images\nval: ../valid/images\n"
                                                      "test: ../test/images\n\nnc: 2\nnames: ['a', 'b']\n\n"
                                                      "roboflow:\n  workspace: me\n  project: things\n  version: 3\n"
                                                      "  license: CC BY 4.0\n"
                                                      "  url: https://universe.roboflow.com/me/things/dataset/3\n"))
    assert cfg.train == (root / "train" / "images").resolve() and cfg.val == (root / "valid" / "images").resolve()
    # where ../ does lead somewhere, it is read as written
    (tmp_path / "valid" / "images").mkdir(parents=True)
    assert load_data_config(root / "data.yaml").val == (tmp_path / "valid" / "images").resolve()


def test_a_parent_path_that_leads_nowhere_either_way_names_the_written_one(tmp_path):
    path = _write(tmp_path / "ds" / "data.yaml", "train: ../nowhere/images\nval: ../nowhere/images\nnames: [a]\n")
    with pytest.raises(DataError, match="'train'") as info:
        load_data_config(path)
    assert str(tmp_path / "nowhere" / "images") in str(info.value)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse"])
@pytest.mark.parametrize("config", ["yaml", "data"])
def test_a_names_or_data_file_that_is_no_regular_file_or_too_large_is_one_line_unread(tmp_path, kind, config):
    images = tmp_path / "images" / "train"
    images.mkdir(parents=True)
    odd = tmp_path / ("odd.data" if config == "data" and kind == "sparse" else "odd.names")
    if kind == "fifo":
        os.mkfifo(odd)  # reading it would wait for a writer forever
    elif kind == "dev-zero":
        odd.symlink_to("/dev/zero")  # reading it would never end
    else:
        with open(odd, "wb") as f:  # sparse: 3 GB of zeros, a MemoryError read whole
            f.truncate(3 << 30)
    if config == "yaml":
        path = tmp_path / "data.yaml"
        path.write_text(f"path: {tmp_path}\ntrain: images/train\nval: images/train\nnames: {odd}\n")
    elif odd.suffix == ".data":
        path = odd
    else:
        path = tmp_path / "obj.data"
        path.write_text(f"classes=1\ntrain={images}\nnames={odd}\n")
    with pytest.raises(DataError) as info:
        load_data_config(path)
    message = str(info.value)
    assert "\n" not in message and str(odd) in message
    assert ("more than the 16,777,216" in message if kind == "sparse" else
            "not a regular file" in message or "is not a file" in message), message


# ---------------------------------------------------------------------------------- file contents in logs
@pytest.mark.usefixtures("private_cache")
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


@pytest.mark.usefixtures("private_cache")
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


@pytest.mark.usefixtures("private_cache")
def test_an_unknown_key_in_a_data_yaml_is_refused_at_its_line_as_in_a_hyp_file(capsys, own_shapes):
    data = own_shapes / "typo.yaml"
    data.write_text(f"path: {own_shapes / 'data'}\ntrain: images/train\nval: images/val\nnames: [a, b]\n"
                    "vall: images/train\n")
    err = anchors_error(capsys, "--data", data, "-n", "2")
    assert err == (f"error: {data}:5: unknown key 'vall' (known: path, train, val, names, nc, train_images, "
                   "val_images, generate, test, download, roboflow)"), err


# ---------------------------------------------------------------------------------------------- names files
@pytest.mark.usefixtures("private_cache")
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


def line_of(text: str, start: str) -> int:
    """The number of the first line of ``text`` that starts with ``start``."""
    return next(n for n, line in enumerate(text.splitlines(), start=1) if line.startswith(start))


# ------------------------------------------------------------------------------ data configs and image lists
def write_data_yaml(folder, tmp_path, **changes):
    """The data YAML of the training files in ``folder`` with ``changes``, written to ``tmp_path/data.yaml``."""
    data = yaml.safe_load((folder / "data.yaml").read_text())
    data.update(changes)
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.usefixtures("private_cache")
def test_generate_that_is_neither_a_name_nor_a_mapping_names_the_file_and_line(shapes, tmp_path):
    data = write_data_yaml(shapes, tmp_path, generate=[1, 2])
    line = line_of(data.read_text(), "generate:")
    with pytest.raises(DataError) as info:
        load_data_config(data)
    assert str(info.value) == (f"{data}:{line}: 'generate' must be a generator name (shapes) or a mapping with "
                               "'name: shapes' and its settings, got [1, 2]")


@pytest.mark.usefixtures("private_cache")
def test_a_generate_setting_with_a_number_for_a_name_is_an_unknown_setting(shapes, tmp_path):
    data = write_data_yaml(shapes, tmp_path, generate={"name": "shapes", 1: 2})
    with pytest.raises(DataError, match=r"'generate': unknown setting '1' \(known: name, size_range"):
        load_data_config(data)


ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"]
                       + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)])


def test_a_yaml_alias_bomb_is_refused_at_once_with_its_line(tmp_path):
    from yolo.data import load_data_config
    from yolo.engine.config import read_hyp
    from yolo.errors import ConfigError, DataError

    data = tmp_path / "bomb.yaml"
    data.write_text(f"train: images\nval: images\n{ALIAS_BOMB}\nnames: *i\n")
    with pytest.raises(DataError) as info:
        load_data_config(data, prepare=False)
    message = str(info.value)
    assert message.startswith(f"{data}:4: not valid YAML") and "alias *a refused" in message, message
    assert len(message) < 1000
    hyp = tmp_path / "hyp.yaml"
    hyp.write_text(f"{ALIAS_BOMB}\nmomentum: *i\n")
    with pytest.raises(ConfigError, match="alias \\*a refused"):
        read_hyp(hyp)


@pytest.mark.slow
def test_too_many_class_names_are_refused(tmp_path):
    from yolo.data import load_data_config
    from yolo.errors import DataError
    from yolo.files.names import read_names

    names = tmp_path / "many.names"
    names.write_text("c\n" * 100_001)
    with pytest.raises(ValueError, match="100,001 class names, more than the 100,000 allowed"):
        read_names(names)
    data = tmp_path / "data.yaml"
    data.write_text("train: a\nval: a\nnames: [" + ", ".join(["c"] * 100_001) + "]\n")
    with pytest.raises(DataError, match="100,001 classes, more than the 100,000 allowed"):
        load_data_config(data, prepare=False)
    data.write_text("train: a\nval: a\nnames: [a, [b, c]]\n")
    with pytest.raises(DataError, match="'names' holds a list where a class name belongs"):
        load_data_config(data, prepare=False)


def test_values_echoed_in_errors_are_bounded_and_escaped(tmp_path, capsys):
    from yolo.cli.args import fail
    from yolo.data.validation import read_label_file
    from yolo.errors import MAX_MESSAGE, DataError, shown

    assert shown("x" * 10) == "x" * 10
    assert shown("x" * 1_000_000) == "x" * 200 + "... (1,000,000 characters)"
    assert shown("\x1b[2J\x07ok\n") == "\\x1b[2J\\x07ok\\n"
    data = tmp_path / "data.yaml"
    data.write_text("train: a\nval: a\nnames: [a]\nnc: " + "x" * 1_000_000 + "\n")
    from yolo.data import load_data_config
    with pytest.raises(DataError) as info:
        load_data_config(data, prepare=False)
    assert len(str(info.value)) <= MAX_MESSAGE + 40
    # A label line that would clear the screen is shown escaped, in the problem and in a tool's error line.
    label = tmp_path / "a.txt"
    label.write_bytes(b"0 0.5 0.5 0.1 0.1\n\x1b[2J\x1b[H\x1b]0;owned\x07 hello\n")
    _, problems = read_label_file(label, 1)
    assert len(problems) == 1 and "\x1b" not in str(problems[0]) and "\\x1b[2J" in str(problems[0])
    with pytest.raises(SystemExit):
        fail(f"bad: \x1b[2J{'y' * 1_000_000}")
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1 and len(err) < MAX_MESSAGE + 100


@pytest.mark.parametrize("setting, words", [
    ("num_train: 4000000", "'generate: num_train' must be an integer from 0 to 100,000"),
    ("size_range: [416, 256]", "'generate: size_range' must be two integers"),
    ("max_shape: 3", "unknown setting 'max_shape'"),
])
def test_generator_settings_out_of_range_are_refused_with_their_line(tmp_path, setting, words):
    from yolo.data import load_data_config
    from yolo.errors import DataError

    path = tmp_path / "data.yaml"
    path.write_text(f"path: {tmp_path / 'shapes'}\ntrain: images/train\nval: images/val\nnames: [a, b]\n"
                    f"generate:\n  name: shapes\n  {setting}\n")
    with pytest.raises(DataError) as info:
        load_data_config(path)
    assert str(info.value).startswith(f"{path}:7: ") and words in str(info.value), str(info.value)
    assert not (tmp_path / "shapes").exists()  # nothing generated
