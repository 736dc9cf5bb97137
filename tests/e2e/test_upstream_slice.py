"""A short slice of upstream KubeRay's own e2e suites (v1.6.1), run against this operator by the
same harness as the full run (``scripts/upstream-e2e.sh``, ``kuberay.devenv.upstream_e2e``).

The test binaries are built before pytest starts (``scripts/test.sh``); here a missing binary is
a failure in strict runs, never a cold Go build inside the test's time limit. The harness starts
its own process-runtime plane and operator, so this test shares nothing with other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kuberay.devenv import binaries
from kuberay.devenv.nodeagent import supported
from kuberay.devenv.testing import skip_unless_strict

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# suite -> the tests of the slice; picked for breadth within the CI budget (RayCluster with token
# auth and exec into the head, RayJob against a selected cluster): about 2 and 1 minutes on two
# cores, plus the plane's start. scripts/upstream-e2e.sh runs the rest.
SLICE: dict[str, tuple[str, ...]] = {
    "e2e": ("TestRayClusterAuthOptions",),
    "e2erayjob": ("TestRayJobWithClusterSelector",),
}


@pytest.mark.timeout(1500)
def test_upstream_e2e_slice(tmp_path: Path) -> None:
    why = supported()
    if why is not None:
        skip_unless_strict(why)
    missing = [s for s in SLICE if binaries.locate(f"{s}.test") is None]
    if missing:
        skip_unless_strict(
            f"upstream test binaries not built ({', '.join(missing)}): "
            "python -m kuberay.devenv.binaries " + " ".join(f"{s}.test" for s in missing)
        )
    names = sorted({name for tests in SLICE.values() for name in tests})
    run = "^(" + "|".join(names) + ")$"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kuberay.devenv.upstream_e2e",
            *SLICE,
            "--run",
            run,
            "--out",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    report = tmp_path / "report.md"
    assert report.is_file(), f"no report (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    results = json.loads((tmp_path / "results.json").read_text())
    seen = {(s["suite"], t["name"]): t for s in results for t in s["tests"]}
    for suite, tests in SLICE.items():
        for name in tests:
            assert (suite, name) in seen, f"{suite}/{name} did not run:\n{report.read_text()}"
            assert seen[(suite, name)]["status"] == "pass", report.read_text()
    failed = [k for k, t in seen.items() if t["status"] == "fail"]
    assert not failed, report.read_text()
    assert proc.returncode == 0, report.read_text()
