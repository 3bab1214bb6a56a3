"""``import yolo`` sets how torch's idle OpenMP threads wait (yolo.openmp_wait) before torch loads, in a user's
process as in the tools; a value the user set wins; after torch is loaded it sets nothing (OpenMP has read its
settings by then)."""
import os
import subprocess
import sys

import pytest

from helpers import REPO
from yolo.openmp_wait import DEFAULTS

PROBE = """
import os, sys
{first}
import yolo
print([os.environ.get(name) for name in {names!r}], "torch" in sys.modules)
"""


def probe(first: str = "", **given) -> str:
    env = {k: v for k, v in os.environ.items() if k not in DEFAULTS}
    env.update(given, PYTHONPATH=str(REPO))
    code = PROBE.format(first=first, names=sorted(DEFAULTS))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_yolo_sets_the_wait_defaults_before_torch_loads():
    assert probe() == f"{[DEFAULTS[name] for name in sorted(DEFAULTS)]} False"


def test_a_value_the_user_set_wins():
    name = sorted(DEFAULTS)[0]
    assert probe(**{name: "ACTIVE"}).startswith(f"['ACTIVE'")


@pytest.mark.slow
def test_nothing_is_set_once_torch_is_loaded():
    """OpenMP read its settings when torch loaded: a value set afterwards would only mislead."""
    assert probe("import torch") == f"{[None] * len(DEFAULTS)} True"


@pytest.mark.parametrize("policy,spinning", [("PASSIVE", "0"), ("ACTIVE", "")])
def test_onnxruntime_threads_sleep_where_torch_threads_do(policy, spinning, monkeypatch):
    pytest.importorskip("onnxruntime", reason="onnxruntime is the [export] extra")
    from yolo.backends.onnx_runtime import session_options

    monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    options = session_options(2)
    for pool in ("intra", "inter"):
        entry = f"session.{pool}_op.allow_spinning"
        assert (options.get_session_config_entry(entry) if spinning else "") == spinning
    assert options.intra_op_num_threads == 2
