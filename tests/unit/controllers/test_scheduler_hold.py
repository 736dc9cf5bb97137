"""The scheduler hold: a group stops creating while too many of its pods wait to be bound."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

from kuberay.controllers.raycluster import (
    RayClusterConfig,
    RayClusterReconciler,
    _awaiting_scheduler,
)


def pod(node: str = "", unschedulable: bool = False) -> dict[str, Any]:
    conditions = (
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        if unschedulable
        else []
    )
    return {"spec": {"nodeName": node} if node else {}, "status": {"conditions": conditions}}


def room(group: dict[str, Any], pods: list[dict[str, Any]], **config: Any) -> int:
    fake = SimpleNamespace(config=RayClusterConfig(**config))
    return RayClusterReconciler._scheduler_room(fake, group, pods)  # type: ignore[arg-type]


GROUP: dict[str, Any] = {"groupName": "g", "template": {"spec": {"containers": []}}}


def test_bound_and_unschedulable_pods_do_not_count() -> None:
    assert _awaiting_scheduler(pod())
    assert not _awaiting_scheduler(pod(node="n1"))
    assert not _awaiting_scheduler(pod(unschedulable=True))


def test_room_shrinks_with_unbound_pods() -> None:
    pods = [pod() for _ in range(30)] + [pod(node="n") for _ in range(500)]
    assert room(GROUP, pods, max_unbound_per_group=100) == 70
    assert room(GROUP, [pod() for _ in range(150)], max_unbound_per_group=100) == 0


def test_unschedulable_pods_never_stall_creation() -> None:
    """A group bigger than the cluster behaves as upstream: every pod is created."""
    pods = [pod(unschedulable=True) for _ in range(500)]
    assert room(GROUP, pods, max_unbound_per_group=100) == 100


def test_hold_is_off_for_gang_schedulers_and_when_disabled() -> None:
    waiting = [pod() for _ in range(500)]
    custom = {"groupName": "g", "template": {"spec": {"schedulerName": "volcano"}}}
    assert room(custom, waiting) == sys.maxsize
    assert room(GROUP, waiting, max_unbound_per_group=0) == sys.maxsize
    assert room(GROUP, waiting, scheduler=object()) == sys.maxsize


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def event(self, obj: Any, kind: str, reason: str, message: str, action: str) -> None:
        self.events.append((reason, message))


def announce(names: list[str]) -> list[tuple[str, str]]:
    recorder = Recorder()
    fake = SimpleNamespace(recorder=recorder)
    cluster = {"metadata": {"namespace": "ns", "name": "rc"}}
    RayClusterReconciler._announce_workers(fake, cluster, names)  # type: ignore[arg-type]
    return recorder.events


def test_a_few_worker_creations_get_upstream_events_each() -> None:
    assert announce(["a", "b"]) == [
        ("CreatedWorkerPod", "Created pod ns/a"),
        ("CreatedWorkerPod", "Created pod ns/b"),
    ]


def test_a_batch_gets_one_event_naming_pods_within_the_note_limit() -> None:
    events = announce([f"rc-workers-worker-{i:05d}" for i in range(50)])
    assert len(events) == 1
    reason, message = events[0]
    assert reason == "CreatedWorkerPod"
    assert message.startswith("Created 50 worker pods in ns: rc-workers-worker-00000, ")
    assert message.endswith(" more")
    assert len(message) <= 1000
    small = announce([f"w{i}" for i in range(8)])[0][1]
    assert small == "Created 8 worker pods in ns: w0, w1, w2, w3, w4, w5, w6, w7"


def test_only_a_definite_rejection_forgets_a_write() -> None:
    """A lost answer may hide a write that landed: forgetting it would allow a duplicate pod."""
    from kuberay.controllers.raycluster import _surely_not_written
    from kuberay.runtime.errors import error_for

    def err(status: int) -> Any:
        return error_for(status, {"reason": "x", "message": "m"}, "POST", "/api/v1/pods")

    assert _surely_not_written(err(422))
    assert _surely_not_written(err(403))
    assert _surely_not_written(err(429))
    for unknown in (0, 408, 409, 500, 503, 504):
        assert not _surely_not_written(err(unknown)), unknown
