#!/usr/bin/env sh
# Run the example's tests the way a downstream project would: a fresh venv with
# kafkalite (built from this repository) and the example's own dependencies only.
#   examples/pytest-app/run_tests.sh [pytest args]
# VENV=path reuses a venv; PYTHON picks the interpreter (default python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}
venv=${VENV:-}
if [ -z "$venv" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    venv="$tmp/venv"
fi
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# kafkalite as a regular (non-editable) install of this checkout, rebuilt every run
"$venv/bin/python" -m pip uninstall --quiet --yes kafkalite >/dev/null 2>&1 || true
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$root"
# setuptools builds in the source tree: remove its output only (build/ also holds the
# console's screenshots from the main suite, which must survive this run)
rm -rf "$root/build/lib" "$root"/build/bdist.* "$root"/build/temp.*
rmdir "$root/build" 2>/dev/null || true
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here[test]"
rm -rf "$here/build" "$here/shouter.egg-info"  # setuptools builds in the source tree
cd "$here"
"$venv/bin/python" -m pytest -q "$@"
