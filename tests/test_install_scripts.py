"""The README's one test command, the shared install logic of tools/test.sh and tools/quickstart.sh, and CI
running exactly that command.

The scripts run in a temporary copy of the repository with stand-ins for ``python3`` and for
``.venv/bin/python`` that record how they are called, so the install logic is checked in a second
without pip or the network; ``PATH`` holds no ``python`` (many fresh machines have only ``python3``)."""

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]


# Stands in for .venv/bin/python: records its arguments (and YOLO_ASSETS) in ../calls.log, except the
# ``-c ""`` probe that checks the venv works.
FAKE_VENV_PYTHON = """#!/bin/sh
[ "$1" = "-c" ] && exit 0
echo "$* | YOLO_ASSETS=${YOLO_ASSETS:-}" >> "$(dirname "$0")/../../calls.log"
"""


# Stands in for python3: only ``python3 -m venv DIR`` is expected; it makes DIR/bin/python the fake above.
FAKE_PYTHON3 = """#!/bin/sh
[ "$1" = "-m" ] && [ "$2" = "venv" ] || exit 9
mkdir -p "$3/bin" && cp "$(dirname "$0")/venv_python" "$3/bin/python" && echo "venv $3" >> "$3/../calls.log"
"""


def readme_test_command() -> str:
    """The first command line of the code block under README's "## Tests" heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Tests\n(.*?)(?=^## |\Z)", text, re.S | re.M).group(1)
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.S).group(1)
    return next(line for line in block.splitlines() if line.strip() and not line.startswith(("#", "export ")))


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _fresh_copy(tmp_path: Path):
    """A repository copy with only the scripts, a setup.py, and a bin/ of fakes; returns (repo, env)."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    for name in ("test.sh", "quickstart.sh", "venv.sh"):
        shutil.copy(ROOT / "tools" / name, repo / "tools" / name)
    (repo / "setup.py").write_text("# version 1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "venv_python", FAKE_VENV_PYTHON)
    _executable(bin_dir / "python3", FAKE_PYTHON3)
    # A machine of FAKE_NPROC cores (2 unless a test says otherwise), as CI's.
    _executable(bin_dir / "nproc", '#!/bin/sh\necho "${FAKE_NPROC:-2}"\n')
    # Only coreutils and our python3: no `python`, no project virtual environment.
    for tool in ("sha256sum", "cut", "cat", "dirname", "mkdir", "cp", "rm"):
        found = shutil.which(tool)
        assert found, f"{tool} is needed by tools/venv.sh"
        os.symlink(found, bin_dir / tool)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    return repo, env


def _run(repo: Path, env, *args: str) -> list:
    log = repo / "calls.log"
    log.unlink(missing_ok=True)
    proc = subprocess.run([shutil.which("bash"), *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines() if log.exists() else []


def test_readme_test_command_is_what_ci_runs():
    command = readme_test_command()
    assert command == "bash tools/test.sh"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci.splitlines(), ".ci/run must run the README's test command as written"
    assert "set -e" in ci, ".ci/run must stop with a non-zero status when the tests fail"


@pytest.mark.parametrize("cores, pytest_call", [
    ("1", "-m pytest -q | YOLO_ASSETS="),
    ("2", "-m pytest -q -n 2 --dist loadfile | YOLO_ASSETS="),
    ("16", "-m pytest -q -n 4 --dist loadfile | YOLO_ASSETS="),
])
def test_the_whole_suite_runs_in_one_process_per_core_at_most_four(tmp_path, cores, pytest_call):
    repo, env = _fresh_copy(tmp_path)
    _run(repo, env, "tools/test.sh", "--co")  # installs
    assert _run(repo, env | {"FAKE_NPROC": cores}, "tools/test.sh") == [pytest_call]
    # With arguments pytest runs as given, in one process.
    assert _run(repo, env | {"FAKE_NPROC": cores}, "tools/test.sh", "-x") == ["-m pytest -q -x | YOLO_ASSETS="]


def test_test_command_installs_once_then_reuses_the_venv(tmp_path):
    repo, env = _fresh_copy(tmp_path)
    (tmp_path / "shared" / "assets").mkdir(parents=True)
    repo_assets = str((tmp_path / "shared" / "assets").resolve())
    # Shared assets live beside the repository, as ../shared/assets.
    shutil.move(str(repo), tmp_path / "repo_tmp")
    repo = tmp_path / "work" / "main"
    repo.parent.mkdir()
    shutil.move(str(tmp_path / "repo_tmp"), repo)
    (tmp_path / "work" / "shared").symlink_to(tmp_path / "shared")

    calls = _run(repo, env, "tools/test.sh", "-x", "tests/test_cfg.py")
    assert calls[0].startswith("venv ")
    # pip installs without compiling; the bytecode is compiled afterwards on every core (-j 0).
    assert re.fullmatch(r"-m pip install .* --no-compile -e \S+\[dev\] \| .*", calls[1]), calls
    assert re.fullmatch(r"-m compileall -qq -j 0 \S+/\.venv/lib \| .*", calls[2]), calls
    assert calls[3].startswith("-m pytest -q -x tests/test_cfg.py | YOLO_ASSETS=")
    assert Path(calls[3].split("YOLO_ASSETS=")[1]).resolve() == Path(repo_assets)
    assert len(calls) == 4

    # Second run: nothing to install; an explicit YOLO_ASSETS wins.
    calls = _run(repo, env | {"YOLO_ASSETS": "/elsewhere"}, "tools/test.sh")
    assert calls == ["-m pytest -q -n 2 --dist loadfile | YOLO_ASSETS=/elsewhere"]

    # The quick start reuses the same venv: the dev install covers its runtime needs.
    calls = _run(repo, env, "tools/quickstart.sh", "--epochs", "1")
    assert calls == ["tools/demo.py --epochs 1 | YOLO_ASSETS="]

    # An edited setup.py reinstalls.
    (repo / "setup.py").write_text("# version 2\n")
    calls = _run(repo, env, "tools/test.sh")
    assert len(calls) == 3 and "pip install" in calls[0] and "[dev]" in calls[0] and "compileall" in calls[1]


def test_quickstart_installs_runtime_only_then_tests_add_the_dev_extra(tmp_path):
    repo, env = _fresh_copy(tmp_path)
    calls = _run(repo, env, "tools/quickstart.sh")
    assert calls[0].startswith("venv ") and "pip install" in calls[1] and "[dev]" not in calls[1]
    assert "compileall" in calls[2] and calls[3].startswith("tools/demo.py")
    # No shared assets beside this copy: YOLO_ASSETS stays unset and the asset tests skip.
    calls = _run(repo, env, "tools/test.sh")
    assert "[dev]" in calls[0] and "compileall" in calls[1]
    assert calls[2] == "-m pytest -q -n 2 --dist loadfile | YOLO_ASSETS="


def test_test_command_fails_when_tests_fail(tmp_path):
    repo, env = _fresh_copy(tmp_path)
    _run(repo, env, "tools/test.sh")
    # pytest's status is the script's status.
    _executable(repo / ".venv" / "bin" / "python", '#!/bin/sh\n[ "$2" = pytest ] && exit 1\nexit 0\n')
    proc = subprocess.run([shutil.which("bash"), "tools/test.sh"], cwd=repo, env=env, capture_output=True)
    assert proc.returncode != 0


def test_runtime_install_pins_the_same_opencv_major_as_the_tests():
    """The quick start installs only the runtime requirements: they must not pull OpenCV 5, whose image
    decoding and resizing change the training data pixels (and which lacks the Darknet importer)."""
    text = (ROOT / "setup.py").read_text(encoding="utf-8")
    runtime = text[text.index("install_requires"):text.index("extras_require")]
    assert re.search(r'"opencv-python<5"', runtime), runtime


# Tests that read ../shared (the assets, Darknet's source and cfgs) in several ways: a module-level constant,
# a fixture, the Darknet build, a helper reading a cfg of Darknet's tree.
SHARED_READERS = ["tests/test_export_cli.py", "tests/test_mixed_heads.py", "tests/test_loss_darknet.py",
                  "tests/test_recurrent_layers.py", "tests/test_yolov1.py", "tests/test_gaussian_yolo.py"]


SHARED_SELECTION = "official or mixed or export or occlusion or onnx or without or tiny_yolo_v1 or bdd"


def _pytest_in_a_users_clone(tmp_path: Path, assets, *args: str) -> subprocess.CompletedProcess:
    """pytest in a fresh process as in a user's clone: Darknet's source hidden (``YOLO_DARKNET_SRC`` an empty
    folder), ``YOLO_ASSETS`` set to ``assets`` or, when None, unset."""
    empty = tmp_path / "no_darknet"
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "YOLO_ASSETS"}
    env |= {"YOLO_DARKNET_SRC": str(empty), "YOLO_CACHE_DIR": str(tmp_path / "cache")}
    if assets is not None:
        env["YOLO_ASSETS"] = str(assets)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_suite_collects_and_the_shared_tests_skip_in_a_users_clone(tmp_path):
    """A clone without ../shared: collecting every test works (no module-level asset look-up), and the tests
    that need the assets or Darknet's source skip with a reason instead of failing.

    Collection runs with ``YOLO_ASSETS`` at an empty folder (as the before-stop check does); the tests run with
    it unset, a user's case (an empty but set ``YOLO_ASSETS`` is a wrong setting, and fails by design)."""
    empty_assets = tmp_path / "no_assets"
    empty_assets.mkdir()
    collected = _pytest_in_a_users_clone(tmp_path, empty_assets, "--collect-only")
    assert collected.returncode == 0, collected.stdout[-3000:]
    assert not re.search(r"\berror", collected.stdout.splitlines()[-1], re.I), collected.stdout[-3000:]

    ran = _pytest_in_a_users_clone(tmp_path, None, *SHARED_READERS, "-k", SHARED_SELECTION)
    assert ran.returncode == 0, ran.stdout[-3000:]
    summary = ran.stdout.strip().splitlines()[-1]
    assert "failed" not in summary and "error" not in summary, summary
    skipped = int(re.search(r"(\d+) skipped", summary).group(1))
    assert skipped >= 20, summary
    reasons = [line for line in ran.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("YOLO_ASSETS is not set" in line or "Darknet source not found" in line for line in reasons), reasons
