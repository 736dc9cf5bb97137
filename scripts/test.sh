#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds (or reuses) the control-plane binaries,
# runs the static checks, then every test. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

scripts/static-checks.sh

echo "== control-plane binaries"
kuberay dev build
# Built on demand otherwise; built here so that no test's time limit includes a cold Go build:
# the Go operator (conformance), Prometheus with promtool (monitoring), Helm (the chart) and
# upstream's e2e test binaries (tests/e2e/test_upstream_slice.py; one component, all suites),
# cert-manager's controller (the RayClusterMTLS tests) and Kueue's manager
# (tests/integration/test_kueue.py).
python -m kuberay.devenv.binaries ray-operator prometheus promtool helm e2eraycronjob.test \
    cert-manager-controller kueue

echo "== tests"
# The whole suite is strict: a test whose prerequisite (root, Ray, Redis, a Go-built tool) is
# missing fails instead of skipping, on any machine, not only where CI is set.
export KUBERAY_TESTS_STRICT=1
pytest --durations=30 "$@"
