"""The CI slice of the fuzz benchmark (tests/bench/fuzz.py): 150 generated RayCluster, RayJob and
RayService specs, valid and invalid (every mutation class is drawn round-robin), through its own
plane and the real operator subprocess.

Asserts the zeros the full run promises: no operator traceback, no object without a decision
in time, no operator exit, every operator-invalid spec reported by a Warning event and a status
condition (RayCluster's ``ValidationFailed``, RayJob's and RayService's own), nothing left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_fuzz_smoke(tmp_path: Path) -> None:
    out = tmp_path / "fuzz.json"
    argv = [
        sys.executable,
        str(ROOT / "tests/bench/fuzz.py"),
        "--count=150",
        "--seed=1",
        "--nodes=2",
        "--settle=120",
        "--baseline-wait=5",
        "--settle-after=5",
        "--cleanup-timeout=90",
        "--timeout=120",
        f"--out={out}",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=420, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    r = json.loads(out.read_text())
    assert r["applied"] == 150
    assert r["operator_log"]["tracebacks"] == 0, r["operator_log"]["traceback_samples"]
    assert r["hangs"] == 0, r["hang_samples"]
    assert r["operator_restarts"] == 0
    assert r["operator_invalid_without_event"] == {}, r["samples"]
    assert r["insane_count"] == 0, r["insane_desired_workers"]
    assert r["objects_cleaned_up"]
    # the mix is real: schema rejections, operator-invalid specs and reconciled ones
    assert r["rejected_by_schema"] > 0
    assert r["accepted_and_reconciled"] > 0
    assert r["operator_invalid_with_event_and_condition"].get("RayJob", 0) > 0
    assert r["operator_invalid_with_event_and_condition"].get("RayService", 0) > 0
    assert r["operator_invalid_with_event_and_condition"].get("RayCluster", 0) > 0
    assert r["operator_invalid_event_only"] == {}, r["samples"]
    assert "| hangs (no decision in time) | 0 |" in proc.stdout
