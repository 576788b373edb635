#!/usr/bin/env bash
# Run examples/downstream as another project would: build testbed's wheel, install only it (and
# pytest, virtme-ng for the VM pass) into a fresh venv beside the example, run the example's
# tests with CI=true from the example's folder. Run as root (network namespaces).
# Usage: scripts/downstream.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
example=$root/examples/downstream
venv=$example/.venv   # inside the tree: the full-kernel guest sees it (its / is the host's)
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$root/.venv/bin/python" -m pip wheel -q --no-deps -w "$wheels" "$root" 2>&1 \
    | grep -v "^WARNING: Location" || true
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q "$wheels"/testbed-*.whl pytest virtme-ng 2>&1 \
    | grep -v "^WARNING: Location" || true
cd "$example"
echo "downstream: $("$venv/bin/testbed" --version) from its wheel, in $venv"
CI="${CI:-true}" "$venv/bin/python" -m pytest -p no:cacheprovider -rfEs "$@"
