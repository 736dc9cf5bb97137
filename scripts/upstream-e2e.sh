#!/usr/bin/env bash
# Runs upstream KubeRay's own Go e2e suites (ray-operator v1.6.1 test/*) against this operator on a
# process-runtime plane (needs root). Arguments: suite names (default: all), --run REGEX,
# --out DIR, --build-only. Writes DIR/report.md; exits non-zero when a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH:/usr/local/go/bin"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
exec python -m kuberay.devenv.upstream_e2e "$@"
