#!/usr/bin/env bash
# The demo: builds (or reuses) the local control plane, starts it, and shows a workload converge.
# Leaves the plane running for you to explore; `.venv/bin/kuberay dev down` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
exec kuberay demo "$@"
