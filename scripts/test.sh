#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds (or reuses) the control-plane binaries,
# runs the static checks, then every test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== static checks"
ruff check src tests
ruff format --check src tests
mypy
lint-imports

echo "== control-plane binaries"
kuberay dev build

echo "== tests"
pytest "$@"
