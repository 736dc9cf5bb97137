"""The RayCluster reconciler's pure decisions: for the Redis cleanup finalizer, how long a
deleted cluster waits, how old its deletion is and when the cleanup Job has ended (and how);
for a multi-host group, which whole replicas a pass removes and the error that says so."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kuberay.api import constants as c
from kuberay.controllers.raycluster import (
    DEFAULT_GCS_FT_DELETION_TIMEOUT,
    job_outcome,
    redis_cleanup_timeout,
    replicas_to_remove,
    seconds_since,
)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (None, DEFAULT_GCS_FT_DELETION_TIMEOUT),
        ("", DEFAULT_GCS_FT_DELETION_TIMEOUT),
        ("0", DEFAULT_GCS_FT_DELETION_TIMEOUT),
        ("-5", DEFAULT_GCS_FT_DELETION_TIMEOUT),
        ("1.5", DEFAULT_GCS_FT_DELETION_TIMEOUT),
        ("soon", DEFAULT_GCS_FT_DELETION_TIMEOUT),
        ("60", 60.0),
        (" 7 ", 7.0),
    ],
)
def test_the_timeout_is_a_positive_whole_number_or_the_default(
    value: str | None, want: float
) -> None:
    annotations = {} if value is None else {c.ANNOTATION_GCS_FT_DELETION_TIMEOUT: value}
    assert redis_cleanup_timeout({"annotations": annotations}) == want
    assert redis_cleanup_timeout({}) == DEFAULT_GCS_FT_DELETION_TIMEOUT


def test_seconds_since_reads_rfc3339_in_utc() -> None:
    now = dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.UTC)
    assert seconds_since("2026-01-01T00:00:00Z", now) == 300.0
    assert seconds_since("2026-01-01T00:06:00Z", now) == -60.0


def _job(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}


@pytest.mark.parametrize(
    ("job", "want"),
    [
        ({}, None),
        ({"status": None}, None),
        (_job(("Suspended", "True")), None),
        (_job(("Complete", "False")), None),
        (_job(("Complete", "True")), "Complete"),
        (_job(("Failed", "True")), "Failed"),
        (_job(("FailureTarget", "True")), "Failed"),
        (_job(("FailureTarget", "True"), ("Complete", "True")), "Complete"),
    ],
)
def test_job_outcome(job: dict[str, Any], want: str | None) -> None:
    assert job_outcome(job) == want


def _pod(name: str, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase}, "spec": {}}


WHOLE = {"a": [_pod("a-0"), _pod("a-1")], "b": [_pod("b-0"), _pod("b-1")]}


@pytest.mark.parametrize(
    ("replicas", "to_delete", "names", "why"),
    [
        (WHOLE, [], [], "deleted 0 replicas of group g named in workersToDelete"),
        (
            {**WHOLE, "c": [_pod("c-0")]},
            [],
            ["c"],
            "deleted 1 incomplete or unhealthy replicas of group g",
        ),
        (
            {**WHOLE, "b": [_pod("b-0"), _pod("b-1", phase="Failed")]},
            ["a-0"],  # broken replicas go first; the named one waits for the next pass
            ["b"],
            "deleted 1 incomplete or unhealthy replicas of group g",
        ),
        (
            WHOLE,
            ["a-1", "b-0"],
            ["a", "b"],
            "deleted 2 replicas of group g named in workersToDelete",
        ),
    ],
)
def test_multihost_replicas_go_whole(
    replicas: dict[str, list[dict[str, Any]]], to_delete: list[str], names: list[str], why: str
) -> None:
    group = {"groupName": "g", "scaleStrategy": {"workersToDelete": to_delete}}
    assert replicas_to_remove(group, replicas, 2) == (names, why)
