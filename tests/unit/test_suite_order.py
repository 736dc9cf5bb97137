"""The suite runs tests on on-demand binaries last (tests/conftest.py), so that scripts/test.sh
can build those binaries in the background meanwhile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected(*paths: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line]


def test_tests_on_on_demand_binaries_come_after_the_others() -> None:
    # test_chart.py's tests that ask for `helm` (built on demand) move behind test_workqueue.py,
    # which sorts after it by name; its other tests keep their place.
    chart, queue = "tests/unit/test_chart.py", "tests/unit/test_workqueue.py"
    order = _collected(chart, queue)
    on_demand = _collected(chart, queue, "-m", "on_demand_binaries")
    assert on_demand
    assert set(on_demand) == {chart}
    assert order[-len(on_demand) :] == on_demand
    assert order[: -len(on_demand)] == sorted(order[: -len(on_demand)])  # chart's rest, then queue
    assert queue in order[: -len(on_demand)]
