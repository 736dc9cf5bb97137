"""The chaos benchmark's short slice runs end to end and every goal-0 figure is 0.

Its own plane, three operator replicas behind the fault proxy (10 % faults), a few SIGKILLs and
one leader failover, a brief etcd pause, a small mixed workload (RayClusters scaled and deleted,
RayJobs in every submission mode, a RayService upgraded twice): see tests/bench/chaos.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_chaos_benchmark_short(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    argv = [sys.executable, str(ROOT / "tests/bench/chaos.py"), "--short", f"--out={out}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=420, check=False)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    detail = json.dumps(
        {k: v for k, v in result.items() if k.endswith("_detail") or k == "not_converged"},
        indent=1,
    )
    assert result["converged"], detail
    assert result["duplicate_pods"] == 0, detail
    assert result["double_job_submissions"] == 0, detail
    assert result["lost_deletions"] == 0, detail
    assert result["leaked_objects"] == 0, detail
    assert result["unexpected_operator_exits"] == 0, detail
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The chaos really happened.
    assert result["operator_kills"] == 5
    assert result["leader_kills"] >= 1
    assert result["lease_transitions"] >= 1
    assert sum(result["faults_injected"].values()) > 0
    assert result["dashboard_requests"].get("POST /api/jobs/", 0) >= 1
    assert result["dashboard_requests"].get("PUT /api/serve/applications/", 0) >= 2
    assert result["rayservice_clusters_created"] == {"svc-0": 2}
    assert any(e["what"].startswith("etcd paused") for e in result["timeline"])
    assert "| duplicate pods | 0 |" in proc.stdout
