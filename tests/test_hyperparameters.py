"""Typed hyperparameters (yolo.engine.config.Hyperparameters): what resolve_hyp returns, saves and reloads."""

import pytest
import yaml

from yolo.engine.config import Hyperparameters, resolve_hyp
from yolo.errors import ConfigError
from yolo.models.cfg import parse_cfg_text

NET = "[net]\nbatch=16\nsubdivisions=2\nlearning_rate=0.01\nmax_batches=100\nwidth=64\nheight=96\n" \
      "[convolutional]\nfilters=3\n"


def test_resolved_values_are_typed_and_survive_a_save(tmp_path):
    hyp_file = tmp_path / "hyp.yaml"
    hyp_file.write_text("ema_tau: 100\neval_interval: 2.0\nbn_momentum: 0.03\nsteps: [0.5]\nscales: [0.1]\n")
    hyp = resolve_hyp(parse_cfg_text(NET)[0], [], hyp_file, {"epochs": 3})
    assert isinstance(hyp, Hyperparameters)
    assert (hyp.batch, hyp.subdivisions, hyp.img_size, hyp.epochs) == (16, 2, (96, 64), 3)
    assert type(hyp.ema_tau) is float and hyp.ema_tau == 100.0
    assert type(hyp.eval_interval) is int and hyp.eval_interval == 2
    assert hyp["learning_rate"] == hyp.learning_rate == 0.01 and hyp.get("bn_momentum") == 0.03
    saved = yaml.safe_load(yaml.safe_dump(hyp.to_dict(), sort_keys=False))  # as hyp.yaml holds it
    assert Hyperparameters.from_dict(saved) == hyp


def test_a_value_of_the_wrong_type_is_one_line_naming_the_file(tmp_path):
    hyp_file = tmp_path / "bad.yaml"
    hyp_file.write_text("eval_interval: often\n")
    with pytest.raises(ConfigError) as info:
        resolve_hyp(parse_cfg_text(NET)[0], [], hyp_file, {})
    assert str(info.value) == f"{hyp_file}: eval_interval='often' is not an integer"


# ---------------------------------------------------------------------------------------------- YAML files
DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.usefixtures("private_cache")
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
