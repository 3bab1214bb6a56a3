"""The search space of tools/tune.py: the default keys, a --space file that narrows, widens or drops them, and its
one-line errors (file and line) for an unknown key or a range outside the declared one; --metric checked against
results.csv's columns. No training here."""
from pathlib import Path

import pytest

from helpers import one_line_error
from yolo.cli.flags.tune import parse_args
from yolo.cli.tune import main
from yolo.engine.config import HYP_RANGES
from yolo.engine.hooks.writers import RESULTS_COLUMNS
from yolo.engine.tune_gains import cfg_with_gains
from yolo.engine.tune_space import declared_range, read_space
from yolo.engine.tuner import check_metric, direction, metric_columns
from yolo.errors import ConfigError

pytest.importorskip("optuna", reason="the hyperparameter search needs Optuna (pip install -e '.[tune]')")


def write(folder: Path, text: str) -> Path:
    path = folder / "space.yaml"
    path.write_text(text)
    return path


def test_the_defaults_are_the_usual_keys_inside_their_declared_ranges():
    space = {p.key: p for p in read_space(None, "affine")}
    assert {"learning_rate", "momentum", "decay", "burn_in", "augment.hue", "augment.saturation",
            "augment.exposure", "augment.jitter", "augment.flip", "augment.scale", "augment.translate",
            "gain.iou_normalizer", "gain.obj_normalizer", "gain.cls_normalizer"} == set(space)
    assert space["gain.obj_normalizer"].log and space["gain.obj_normalizer"].low > 0
    assert space["burn_in"].kind is int and space["learning_rate"].log
    for key, p in space.items():
        kind, low, high, _ = declared_range(key)
        assert kind is p.kind and low <= p.low <= p.high <= high, key
    # the momentum's declared range is the one training checks (yolo.engine.config.HYP_RANGES)
    assert declared_range("momentum")[1:3] == HYP_RANGES["momentum"][:2]
    # Darknet's pipeline has no zoom or shift of the affine one: the search leaves them out
    assert not {"augment.scale", "augment.translate"} & {p.key for p in read_space(None, "darknet")}


def test_a_space_file_narrows_widens_and_drops_keys(tmp_path):
    path = write(tmp_path, "learning_rate: [0.001, 0.5]\nburn_in: [0, 50]\nmomentum: null\n"
                           "augment:\n  hue: {low: 0.01, high: 0.02, log: true}\n")
    space = {p.key: p for p in read_space(str(path), "darknet")}
    assert (space["learning_rate"].low, space["learning_rate"].high) == (0.001, 0.5)
    assert (space["burn_in"].low, space["burn_in"].high) == (0, 50)
    assert space["augment.hue"].log and space["augment.hue"].high == 0.02
    assert "momentum" not in space and "decay" in space
    # power has no declared range in training's checks: it cannot be searched
    with pytest.raises(ConfigError, match=r"space.yaml:6: 'power' cannot be searched"):
        read_space(str(write(tmp_path, "learning_rate: [0.001, 0.5]\nburn_in: [0, 50]\nmomentum: null\n"
                                        "augment:\n  hue: [0, 0.1]\npower: [1, 4]\n")), "darknet")


@pytest.mark.parametrize("text, line, words", [
    ("learning_rate: [0.001, 0.01]\nmomentun: [0.8, 0.9]\n", 2, "'momentun' cannot be searched"),
    ("momentum: [0.5, 1.0]\n", 1, "outside its declared range"),
    ("decay: [-0.1, 0.01]\n", 1, "outside its declared range"),
    ("augment:\n  flip: [0.0, 0.5]\n  hue: [0.0, 0.7]\n", 3, "augment.hue: [0, 0.7] is outside its declared range"),
    ("burn_in: [0.5, 10]\n", 1, "must be whole numbers"),
    ("learning_rate: 0.01\n", 1, "give the range as [low, high]"),
    ("learning_rate: [0.0, 0.1]\n", 1, "log-uniform range must start above 0"),
    ("gain:\n  obj_normalizer: [0.5, 2]\n  iou_normalizer: [0.5, 20]\n", 3,
     "gain.iou_normalizer: [0.5, 20] is outside its declared range"),
    ("gain.obj_normalizer: [-1, 2]\n", 1, "outside its declared range"),
    ("decay: null\ngain.box_normalizer: [0.5, 2]\n", 2, "'gain.box_normalizer' cannot be searched"),
])
def test_a_bad_space_entry_is_one_line_naming_the_file_and_line(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        read_space(str(path), "affine")
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and words in message and "\n" not in message


def tool_args(tmp_path, *extra):
    cfg, data = tmp_path / "tiny.cfg", tmp_path / "data.yaml"
    cfg.write_text("[net]\n")
    data.write_text("names: [a]\n")
    return parse_args(["--cfg", str(cfg), "--data", str(data), "--project", str(tmp_path / "runs"), *map(str, extra)])


def test_the_tool_refuses_a_bad_space_or_metric_in_one_line_before_it_creates_anything(tmp_path, capsys):
    space = write(tmp_path, "augment:\n  jitter: [0.0, 0.9]\n")
    err = one_line_error(capsys, lambda: main(tool_args(tmp_path, "--space", space)))
    assert f"{space}:2: augment.jitter" in err
    err = one_line_error(capsys, lambda: main(tool_args(tmp_path, "--metric", "mAP75")))
    assert "'mAP75' is not a column of results.csv" in err and "mAP50_95" in err
    assert not (tmp_path / "runs").exists()


def test_every_evaluation_column_of_results_csv_is_a_metric(tmp_path):
    """The metric is any scoring column of results.csv (a column added to it later is one too), not a time."""
    assert {"mAP50", "mAP50_95", "precision", "recall", "loss"} <= set(metric_columns()) <= set(RESULTS_COLUMNS)
    assert "time_s" not in metric_columns()
    assert check_metric("mAP50_95") == "mAP50_95"
    assert direction("mAP50") == "maximize" and direction("box_loss") == "minimize"


def test_a_space_file_names_the_gains_and_a_cfg_without_a_yolo_head_searches_none(tmp_path):
    path = write(tmp_path, "gain:\n  obj_normalizer: {low: 0.5, high: 2.0, log: false}\ngain.cls_normalizer: null\n")
    space = {p.key: p for p in read_space(str(path), "darknet")}
    assert (space["gain.obj_normalizer"].low, space["gain.obj_normalizer"].log) == (0.5, False)
    assert "gain.cls_normalizer" not in space and "gain.iou_normalizer" in space
    assert not any(k.startswith("gain.") for k in (p.key for p in read_space(None, "darknet", gains=False)))
    with pytest.raises(ConfigError, match=r"space.yaml:2: gain.obj_normalizer: the cfg has no \[yolo\]"):
        read_space(str(write(tmp_path, "decay: null\ngain.obj_normalizer: [0.5, 2]\n")), "darknet", gains=False)


# Two heads: one sets its gains (a comment, odd spacing, a repeated key that Darknet ignores, CRLF line ends), one
# leaves them to Darknet's defaults (iou 0.75, obj 1, cls 1: src/parser.c parse_yolo); a [Gaussian_yolo] too.
GAINS_CFG = ("[net]\r\nwidth=64\r\nheight=64\r\nchannels=3\r\n\r\n[convolutional]\r\nfilters=30\r\nsize=1\r\n"
             "activation=linear\r\n\r\n[yolo]\r\nmask=0,1,2\r\nanchors=10,10, 20,20, 40,40\r\nclasses=5\r\n"
             "iou_loss=ciou\r\n  iou_normalizer = 0.07   # ciou\r\nobj_normalizer=0.4\r\ncls_normalizer=2\r\n"
             "obj_normalizer=9\r\n\r\n[route]\r\nlayers=-2\r\n\r\n[convolutional]\r\nfilters=30\r\nsize=1\r\n"
             "activation=linear\r\n\r\n[yolo]\r\nmask=0,1,2\r\nanchors=10,10, 20,20, 40,40\r\nclasses=5\r\n"
             "\r\n[route]\r\nlayers=-4\r\n\r\n[convolutional]\r\nfilters=42\r\nsize=1\r\nactivation=linear\r\n"
             "\r\n[Gaussian_yolo]\r\nmask=0,1,2\r\nanchors=10,10, 20,20, 40,40\r\nclasses=5\r\ncls_normalizer=0.5")


def test_a_trials_cfg_differs_from_the_cfg_only_in_the_gains_of_its_heads():
    out = cfg_with_gains(GAINS_CFG, {"iou_normalizer": 2.0, "obj_normalizer": 0.5, "cls_normalizer": 3.0})
    changed = [line for line in out.split("\r\n") if line not in GAINS_CFG.split("\r\n")]
    assert changed == [
        "  iou_normalizer = 0.14   # ciou", "obj_normalizer=0.2", "cls_normalizer=6",  # 0.07, 0.4, 2 times
        "iou_normalizer=1.5", "obj_normalizer=0.5", "cls_normalizer=3",  # added: Darknet's 0.75, 1, 1 times
        "iou_normalizer=1.5", "obj_normalizer=0.5", "cls_normalizer=1.5",  # the Gaussian head: added; 0.5 times 3
    ]
    # every other byte is the cfg's: the added lines out, the changed ones back, the text is the same
    restored = out
    for before, after in (("iou_normalizer = 0.07 ", "iou_normalizer = 0.14 "),
                          ("obj_normalizer=0.4\r", "obj_normalizer=0.2\r"),
                          ("cls_normalizer=2\r", "cls_normalizer=6\r"),
                          ("cls_normalizer=0.5", "cls_normalizer=1.5")):
        restored = restored.replace(after, before, 1)
    for added in ("iou_normalizer=1.5\r\nobj_normalizer=0.5\r\ncls_normalizer=3\r\n",
                  "iou_normalizer=1.5\r\nobj_normalizer=0.5\r\n"):
        restored = restored.replace(added, "", 1)
    assert restored == GAINS_CFG
    # a head whose header is the last line, without its line end
    text = "[net]\nwidth=8\n[convolutional]\nfilters=30\n[yolo]"
    assert cfg_with_gains(text, {"obj_normalizer": 2.0}) == text + "\nobj_normalizer=2\n"
