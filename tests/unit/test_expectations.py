"""Expectations: creates and deletes gate a group until the cache shows them, or time runs out."""

from __future__ import annotations

from typing import Any

from kuberay.runtime.expectations import Expectations


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_create_waits_for_the_cache() -> None:
    cache: dict[tuple[str, str], dict[str, Any]] = {}
    exp = Expectations(lambda ns, n: cache.get((ns, n)), clock=Clock())
    exp.expect_create("c/g", "ns", "p1")
    assert not exp.satisfied("c/g")
    assert exp.satisfied("other")
    cache[("ns", "p1")] = {"metadata": {}}
    assert exp.satisfied("c/g")
    assert exp.pending("c/g") == 0


def test_delete_is_met_by_absence_or_deletion_timestamp() -> None:
    cache: dict[tuple[str, str], dict[str, Any]] = {
        ("ns", "a"): {"metadata": {}},
        ("ns", "b"): {"metadata": {}},
    }
    exp = Expectations(lambda ns, n: cache.get((ns, n)), clock=Clock())
    exp.expect_delete("g", "ns", "a")
    exp.expect_delete("g", "ns", "b")
    assert not exp.satisfied("g")
    del cache[("ns", "a")]
    cache[("ns", "b")]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert exp.satisfied("g")


def test_timeout_and_failure_unblock_the_group() -> None:
    clock = Clock()
    exp = Expectations(lambda ns, n: None, timeout=30, clock=clock)
    exp.expect_create("g", "ns", "lost-event")
    exp.expect_create("g2", "ns", "failed")
    clock.now = 29
    assert not exp.satisfied("g")
    clock.now = 31
    assert exp.satisfied("g")
    exp.observe_failure("g2", "ns", "failed")
    assert exp.satisfied("g2")


def test_drop_prefix_forgets_an_owner() -> None:
    exp = Expectations(lambda ns, n: None, clock=Clock())
    exp.expect_create("ns/c1/head", "ns", "h")
    exp.expect_create("ns/c1/workers", "ns", "w")
    exp.expect_create("ns/c2/head", "ns", "x")
    exp.drop_prefix("ns/c1/")
    assert exp.satisfied("ns/c1/head")
    assert exp.satisfied("ns/c1/workers")
    assert not exp.satisfied("ns/c2/head")
