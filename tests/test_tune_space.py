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
            "augment.exposure", "augment.jitter", "augment.flip", "augment.scale", "augment.translate"} == set(space)
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
