# Sourced by tools/test.sh and tools/quickstart.sh: make sure .venv exists and holds this project.
#
#   . tools/venv.sh && ensure_venv          # the package and its runtime dependencies
#   . tools/venv.sh && ensure_venv dev      # plus what the tests need (setup.py's "dev" extra)
#
# pip runs only when needed: .venv/.yolo-installed records the hash of setup.py and the extra installed
# with it, so a second call costs nothing and an edited setup.py reinstalls. The "dev" install
# includes the runtime one.

ensure_venv() {
    local extra="${1:-}" root stamp want have
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    stamp="$root/.venv/.yolo-installed"
    if ! "$root/.venv/bin/python" -c "" 2>/dev/null; then
        command -v python3 >/dev/null || { echo "error: python3 not found: install Python 3.9 or newer" >&2; return 1; }
        echo "creating $root/.venv" >&2
        python3 -m venv "$root/.venv" || return 1
        rm -f "$stamp"
    fi
    want="$(sha256sum "$root/setup.py" | cut -d' ' -f1)"
    have="$(cat "$stamp" 2>/dev/null || true)"
    # Up to date when the stamp is for this setup.py and covers the wanted extra ("dev" covers "").
    if [ "$have" = "$want dev" ] || [ "$have" = "$want $extra" ]; then
        return 0
    fi
    local target="$root"
    [ -n "$extra" ] && target="$root[$extra]"
    echo "installing $target into .venv (a few minutes the first time)" >&2
    # pip compiles every installed module to bytecode one file at a time (half of a first install's time, torch's
    # thousands of files); compileall does the same on every core. Its -qq hides what pip hides too: files of
    # packages' own tests written for newer Pythons, which are never imported.
    "$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -e "$target" || return 1
    "$root/.venv/bin/python" -m compileall -qq -j 0 "$root/.venv/lib" >/dev/null 2>&1 || true
    echo "$want $extra" > "$stamp"
}
