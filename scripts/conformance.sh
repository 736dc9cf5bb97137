#!/usr/bin/env bash
# The whole differential suite: upstream's Go operator v1.6.1 and ours side by side over every
# sample and N generated inputs (default 200), plus the takeover test. Writes
# bench-results/conformance.md (counts per allow-list entry) and the raw objects of both sides
# (bench-results/conformance-*.json; re-check them offline with tests/conformance/recheck.py).
# The default test run (scripts/test.sh) runs the same suite with 20 generated inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
kuberay dev build
rm -f bench-results/conformance.md
KUBERAY_CONFORMANCE_GENERATED="${1:-200}" pytest tests/conformance "${@:2}"
