"""The scale benchmark runs end to end at a tiny size and writes every figure it promises.

It measures nothing here (numbers come from running it on a quiet machine); it keeps the
command in the README working: its own plane, both ceilings, a size, fairness and churn.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_scale_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    argv = [
        sys.executable,
        str(ROOT / "tests/bench/scale.py"),
        "--sizes=2x2",
        "--namespaces=2",
        "--nodes=2",
        "--ceiling-pods=12",
        "--fairness-workers=6",
        "--small=2",
        "--churn-clusters=2",
        "--churn-waves=1",
        "--timeout=180",
        f"--keep={tmp_path / 'kept'}",
        f"--out={out}",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=540, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    # Each ceiling and the operator's run had a plane of their own.
    assert result["planes"] == 3
    # --keep leaves every plane's logs behind for a look after the run.
    assert len(list((tmp_path / "kept").glob("plane-*/plane/logs/kwok.log"))) == 3
    assert result["ceiling"]["pods"] == 12
    assert result["ceiling_with_services"]["ceiling_pods_per_second"] > 0
    size = result["sizes"][0]
    assert size["pods"] == 6
    assert size["namespaces"] == 2
    assert "teardown_error" not in size
    assert size["requests_per_cluster"]["POST pods"] == 3
    assert size["apiserver_requests_per_cluster"]["POST pods"] >= 3
    assert size["reconciles_per_cluster"] >= 1
    assert size["plane_cpu_s"]["kube-apiserver"] >= 0
    assert size["fraction_of_ceiling"] > 0
    # Every pod was seen created before it was seen Ready, and bound while not yet Ready.
    assert size["timeline"]["create_rate_per_s_max"] > 0
    assert size["timeline"]["ready_lag_s_p99"] > 0
    assert size["timeline"]["bound_not_ready_peak"] >= 1
    # Where the machine's CPU went, and what KWOK's log says it did: each of the 6 pods was
    # patched Running at least once while the size converged.
    assert size["cpu_budget"]["ms_per_pod"]["operator"] > 0
    assert size["cpu_budget"]["total_ms_per_pod"] > size["cpu_budget"]["ms_per_pod"]["operator"]
    assert 0 < size["cpu_budget"]["busy_share"] <= 1.5
    assert size["speed_probe_s"] > 0
    assert size["kwok"]["patches_per_pod"] >= 1
    assert size["watchers_terminated"] >= 0
    assert sum(size["watchers_terminated_by_resource"].values()) == size["watchers_terminated"]
    assert result["fairness"]["small_clusters"] == 2
    # The big cluster and both small ones wrote their status during the scale-up.
    assert result["fairness"]["busy_status_writes"] >= 3
    assert result["fairness"]["busy_requests"] > 0
    assert result["fairness"]["busy_operator_cpu_s"] > 0
    assert result["churn"]["duplicate_pods"] == 0
    assert result["churn"]["orphaned_pods"] == 0
    assert "| 2x2: pods Ready per second |" in proc.stdout
    assert "| 2x2: machine CPU per pod, ms / busy share / speed probe, s |" in proc.stdout


@pytest.mark.slow
def test_namespaces_benchmark_smoke(tmp_path: Path) -> None:
    """Over HTTP/2 the operator's connections do not grow with the watched namespaces; over
    HTTP/1.1 they do (one per open watch)."""
    out = tmp_path / "namespaces.json"
    argv = [
        sys.executable,
        str(ROOT / "tests/bench/namespaces.py"),
        "--counts=1,4",
        "--clusters=1",
        "--workers=1",
        "--nodes=1",
        "--timeout=180",
        f"--out={out}",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = {(r["protocol"], r["namespaces"]): r for r in json.loads(out.read_text())}
    # Start-up lists and watches may briefly pass the 100-stream limit: a second connection.
    assert runs["http2", 1]["connections"] <= 2
    assert runs["http2", 4]["connections"] <= 2
    assert runs["http1", 4]["connections"] > runs["http1", 1]["connections"] > 4
    assert all(r["converge_s"] > 0 and r["rss_mib"] > 0 for r in runs.values())
    assert "| http2 | 4 |" in proc.stdout
