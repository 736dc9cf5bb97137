"""RayCronJob schedule arithmetic (robfig/cron standard semantics) and child RayJob shape."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from kuberay.controllers import raycronjob as rc

UTC = dt.UTC


def at(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expr", "after", "want"),
    [
        ("* * * * *", at(2026, 1, 1, 10, 0, 30), at(2026, 1, 1, 10, 1)),
        ("*/15 * * * *", at(2026, 1, 1, 10, 0), at(2026, 1, 1, 10, 15)),
        ("5 4 * * *", at(2026, 1, 1, 4, 5), at(2026, 1, 2, 4, 5)),
        ("0 0 1 jan *", at(2026, 3, 1), at(2027, 1, 1)),
        ("@hourly", at(2026, 1, 1, 10, 59), at(2026, 1, 1, 11, 0)),
        ("@weekly", at(2026, 1, 1), at(2026, 1, 4)),  # 2026-01-04 is a Sunday
        ("30 2-4/2 * * mon-fri", at(2026, 1, 3, 0), at(2026, 1, 5, 2, 30)),
        # day-of-month and day-of-week both restricted: either matches (the 13th, or Fridays)
        ("0 0 13 * 5", at(2026, 1, 1), at(2026, 1, 2)),
        # one of them '*': both must match (only Fridays)
        ("0 0 * * 5", at(2026, 1, 3), at(2026, 1, 9)),
        ("@every 90s", at(2026, 1, 1, 0, 0, 0), at(2026, 1, 1, 0, 1, 30)),
    ],
)
def test_next_after(expr: str, after: dt.datetime, want: dt.datetime) -> None:
    assert rc.Schedule.parse(expr, UTC).next_after(after) == want


def test_time_zone_and_dst() -> None:
    ny = zoneinfo.ZoneInfo("America/New_York")
    schedule = rc.Schedule.parse("0 9 * * *", ny)
    assert schedule.next_after(at(2026, 1, 1, 0)) == at(2026, 1, 1, 14)  # EST = UTC-5
    assert schedule.next_after(at(2026, 7, 1, 0)) == at(2026, 7, 1, 13)  # EDT = UTC-4
    # 02:30 does not exist on 2026-03-08 in New York: that day is skipped.
    skipped = rc.Schedule.parse("30 2 * * *", ny)
    assert skipped.next_after(at(2026, 3, 8, 0)) == at(2026, 3, 9, 6, 30)


def test_child_rayjob() -> None:
    cron = {
        "metadata": {"name": "nightly", "namespace": "ns", "uid": "u1"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"entrypoint": "echo hi"}},
    }
    tick = at(2026, 1, 1, 0, 1)
    child = rc.build_child(cron, tick)
    assert child["metadata"]["name"] == f"nightly-{int(tick.timestamp()) // 60}"
    assert child["metadata"]["labels"] == {"ray.io/cronjob-name": "nightly"}
    assert child["metadata"]["annotations"] == {
        "ray.io/cronjob-scheduled-timestamp": "2026-01-01T00:01:00Z"
    }
    ref = child["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["controller"]) == ("RayCronJob", True)
    assert child["spec"] == {"entrypoint": "echo hi"}
