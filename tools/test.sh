#!/usr/bin/env bash
# The test command, on a fresh machine as on a used one: creates or reuses .venv, installs the package
# with its test extras when setup.py changed (or never was installed), then runs pytest.
#
#   bash tools/test.sh                     # the whole suite, one process per core (at most 4)
#   bash tools/test.sh tests/test_cfg.py -k bom -x    # arguments go to pytest
#
# YOLO_ASSETS (real Darknet cfgs, weights and images for the parity tests) defaults to ../shared/assets
# beside the repository when that folder exists; tests that need it skip with a reason otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/venv.sh
. tools/venv.sh
ensure_venv dev

if [ -z "${YOLO_ASSETS:-}" ] && [ -d ../shared/assets ]; then
    YOLO_ASSETS="$(cd ../shared/assets && pwd)"
    export YOLO_ASSETS
fi
# The whole suite (no arguments, as CI runs it) runs in one process per core, at most 4 (pytest-xdist), a test
# file at a time per process (--dist loadfile: a file's fixtures are built once, its tests run in their order);
# with arguments pytest runs as given in this process (add "-n 2" to spread them too).
if [ $# -eq 0 ]; then
    workers="$(nproc 2>/dev/null || echo 1)"
    [ "$workers" -gt 4 ] && workers=4
    [ "$workers" -gt 1 ] && set -- -n "$workers" --dist loadfile
fi
exec .venv/bin/python -m pytest -q "$@"
