#!/usr/bin/env bash
# The static checks both test commands run first, from .venv (scripts/bootstrap.sh makes it):
# lint, formatting, mypy --strict on src/ and tests/, and the import-linter contracts.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

echo "== static checks"
ruff check src tests
ruff format --check src tests
mypy
lint-imports
