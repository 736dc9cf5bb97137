"""The minimum-resourceVersion tracker behind read-your-writes, driven by tables of what the
writers and the watch report, as the informer reports it (the watermark is the resourceVersion
of the last event, bookmark or list)."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.runtime.freshness import MinResourceVersionTracker, at_least, version_int


def _obj(rv: str, name: str = "a") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "n", "resourceVersion": rv}}


class _Watch:
    """Feeds a tracker the way an informer does and keeps its watermark."""

    def __init__(self) -> None:
        self.tracker = MinResourceVersionTracker()
        self.watermark: str | None = None

    def step(self, op: str, *args: str) -> None:
        if op == "write":  # (key, rv): the server answered our write of key with rv
            key, rv = args
            self.tracker.record(key, _obj(rv, key.split("/")[-1]), self.watermark)
        elif op in ("event", "delete"):  # (key, rv): the watch delivered an event for key
            key, rv = args
            self.tracker.observe(key, rv, deleted=op == "delete")
            self.watermark = rv
        elif op == "bookmark":
            (self.watermark,) = args
            self.tracker.observe_bookmark(self.watermark)
        elif op == "list":  # a (re)list, e.g. after 410 Gone
            (self.watermark,) = args
            self.tracker.observe_list(self.watermark)
        else:
            raise AssertionError(op)

    def pending_rv(self, key: str) -> str | None:
        obj = self.tracker.pending(key)
        return None if obj is None else str(obj["metadata"]["resourceVersion"])


K = "n/a"
CASES: list[tuple[str, list[tuple[str, ...]], str | None]] = [
    # (name, steps, the resourceVersion still pending for K afterwards, None = fresh)
    ("own event arrives", [("list", "10"), ("write", K, "12"), ("event", K, "12")], None),
    ("older event in flight", [("list", "10"), ("write", K, "12"), ("event", K, "11")], "12"),
    (
        "older then own event",
        [("list", "10"), ("write", K, "12"), ("event", K, "11"), ("event", K, "12")],
        None,
    ),
    (
        "a newer write by someone else",
        [("list", "10"), ("write", K, "12"), ("event", K, "13")],
        None,
    ),
    (
        "answer processed after the watch passed it",
        [("list", "10"), ("event", K, "12"), ("event", K, "13"), ("write", K, "12")],
        None,
    ),
    (
        "answers out of order keep the newest",
        [("list", "10"), ("write", K, "12"), ("write", K, "11"), ("event", K, "11")],
        "12",
    ),
    (
        "out-of-order answers, then the newest arrives",
        [("list", "10"), ("write", K, "12"), ("write", K, "11"), ("event", K, "12")],
        None,
    ),
    (
        "object deleted after our write: its event never comes",
        [("list", "10"), ("write", K, "12"), ("delete", K, "14")],
        None,
    ),
    (
        "an older incarnation's delete does not clear a newer write",
        [("list", "10"), ("write", K, "12"), ("delete", K, "11")],
        "12",
    ),
    (
        "another object's event passes our version",
        [("list", "10"), ("write", K, "12"), ("event", "n/b", "15")],
        None,
    ),
    ("bookmark past our version", [("list", "10"), ("write", K, "12"), ("bookmark", "12")], None),
    ("bookmark before our version", [("list", "10"), ("write", K, "12"), ("bookmark", "11")], "12"),
    (
        "410 Gone: relist newer than the write, object gone",
        [("list", "10"), ("write", K, "12"), ("list", "30")],
        None,
    ),
    (
        "relist served before the write landed",
        [("list", "10"), ("write", K, "12"), ("list", "11")],
        "12",
    ),
    ("write before the first list", [("write", K, "12"), ("list", "12")], None),
    ("no resourceVersion: nothing to wait for", [("list", "10"), ("write", K, "")], None),
    # Opaque (non-integer) versions: only equality counts as "at least as new".
    ("opaque: own event", [("list", "x"), ("write", K, "abc"), ("event", K, "abc")], None),
    ("opaque: other version", [("list", "x"), ("write", K, "abc"), ("event", K, "abd")], "abc"),
    (
        "opaque: another object's event",
        [("list", "x"), ("write", K, "abc"), ("event", "n/b", "zzz")],
        "abc",
    ),
    ("opaque: deleted", [("list", "x"), ("write", K, "abc"), ("delete", K, "q")], None),
    ("opaque: relist", [("list", "x"), ("write", K, "abc"), ("list", "y")], None),
    (
        "opaque write, integer watermark: not comparable, waits",
        [("list", "15"), ("write", K, "abc"), ("bookmark", "99")],
        "abc",
    ),
]


@pytest.mark.parametrize(("steps", "pending"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tracker(steps: list[tuple[str, ...]], pending: str | None) -> None:
    watch = _Watch()
    for step in steps:
        watch.step(*step)
    assert watch.pending_rv(K) == pending
    assert watch.tracker.is_fresh(K) is (pending is None)


def test_many_writes_are_cleared_by_one_watermark() -> None:
    watch = _Watch()
    watch.step("list", "1")
    for i in range(100):
        watch.step("write", f"n/o{i}", str(10 + i))
    assert len(watch.tracker) == 100
    watch.step("bookmark", "59")
    assert len(watch.tracker) == 50
    assert watch.tracker.is_fresh("n/o49")
    assert not watch.tracker.is_fresh("n/o50")
    watch.step("event", "n/zz", "1000")
    assert len(watch.tracker) == 0


@pytest.mark.parametrize(
    ("rv", "minimum", "expected"),
    [
        ("12", "12", True),
        ("13", "12", True),
        ("9", "12", False),
        ("100", "99", True),  # numerically, not as strings
        ("abc", "abc", True),
        ("abd", "abc", False),
        ("12", "abc", False),
        (None, "12", False),
        ("\uff11\uff12", "12", False),  # non-ASCII digits are not etcd's
    ],
)
def test_at_least(rv: str | None, minimum: str, expected: bool) -> None:
    assert at_least(rv, minimum) is expected


def test_version_int() -> None:
    assert version_int("123") == 123
    assert version_int("") is None
    assert version_int("-1") is None
    assert version_int(None) is None
