#!/usr/bin/env bash
# Creates .venv with the project and its development tools. Idempotent and quick when nothing
# changed: the install is skipped while pyproject.toml is unchanged since the last one.
# `--unit`: only what the unit tests and static checks need (no Go, no Ray, no redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."
unit_only=false
if [ "${1:-}" = "--unit" ]; then
  unit_only=true
fi

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      PY=$cand; break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "error: Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11)" >&2
  exit 2
fi
if ! $unit_only && ! command -v go >/dev/null 2>&1 && [ -z "${KUBERAY_CONTROLPLANE_BINDIR:-}" ]; then
  echo "error: Go 1.26+ is needed to build the local control plane (https://go.dev/dl), or set" >&2
  echo "       KUBERAY_CONTROLPLANE_BINDIR to a directory with kube-apiserver, kube-controller-manager," >&2
  echo "       kube-scheduler, kubectl, etcd and kwok." >&2
  exit 2
fi

if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv with $PY"
  "$PY" -m venv .venv
fi
# One stamp per install flavour; the full install also satisfies the unit-only one. The operator
# (kuberay-py) and its development part (kuberay-py-devenv: local plane, node agent, test helpers)
# are two distributions from this tree, both installed editable.
stamp=.venv/.kuberay-installed
unit_stamp=.venv/.kuberay-installed-unit
want=$(cat pyproject.toml devenv/pyproject.toml | sha256sum | cut -d' ' -f1)
installed() { [ -f "$1" ] && [ "$(cat "$1")" = "$want" ]; }
if $unit_only; then
  if ! installed "$stamp" && ! installed "$unit_stamp"; then
    echo "[bootstrap] installing the project and its dev tools into .venv (unit tests only)"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e '.[dev]' -e ./devenv
    echo "$want" > "$unit_stamp"
  fi
  exit 0
fi
if ! installed "$stamp"; then
  echo "[bootstrap] installing the project and its dev tools into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[dev,e2e]' -e ./devenv
  echo "$want" > "$stamp"
fi

# Debian packages the e2e tests use: redis-server (the GCS fault-tolerance test runs a real
# Redis) and nftables (process-runtime pods get egress through an nftables table). Installed when
# this machine can (root with apt); otherwise the tests that need them say why.
missing_debs=""
command -v redis-server >/dev/null 2>&1 || missing_debs="$missing_debs redis-server"
command -v nft >/dev/null 2>&1 || missing_debs="$missing_debs nftables"
if [ -n "$missing_debs" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[bootstrap] installing$missing_debs"
    # shellcheck disable=SC2086
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing_debs >/dev/null) \
      || echo "[bootstrap] warning: could not install$missing_debs" >&2
  else
    echo "[bootstrap] note: not installed:$missing_debs (needs root with apt)" >&2
  fi
fi
