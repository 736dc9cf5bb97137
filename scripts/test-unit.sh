#!/usr/bin/env bash
# The fast loop: static checks and the unit tests, with no Go, no control plane and no Ray.
# Unit tests marked `needs_go` (they build or run promtool, kubectl or a Go module download)
# are deselected here; scripts/test.sh runs them. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --unit
scripts/static-checks.sh

echo "== unit tests"
.venv/bin/pytest tests/unit -m "not needs_go" "$@"
