"""The scheduler hold: a group stops creating while too many of its pods wait to be bound;
how worker creations are announced; the events of the reconciler's child writes. The
reconciler is built without a manager, over caches of standalone informers (nothing here
lists or watches)."""

from __future__ import annotations

import copy
import sys
from typing import Any, cast

import pytest

from kuberay.controllers.raycluster import (
    ROLES,
    RayClusterCaches,
    RayClusterConfig,
    RayClusterReconciler,
    _awaiting_scheduler,
)
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import KubeClient, Resource
from kuberay.runtime.controller import Request
from kuberay.runtime.errors import ApiError, error_for
from kuberay.runtime.events import EventRecorder
from kuberay.runtime.informer import Informer


class Standalone:
    """Makes caches as the manager does, each over one cluster-wide informer that is never
    started (its store is filled by hand)."""

    def cache(self, resource: Resource, **kwargs: Any) -> ResourceCache:
        kwargs.pop("namespaces", None)
        return ResourceCache(resource, [Informer(cast(KubeClient, None), resource, **kwargs)])


def reconciler(recorder: Any = None, **config: Any) -> RayClusterReconciler:
    return RayClusterReconciler(
        cast(KubeClient, None),
        RayClusterConfig(**config),
        cast(EventRecorder, recorder),
        RayClusterCaches.make(Standalone(), None),
    )


def pod(node: str = "", unschedulable: bool = False) -> dict[str, Any]:
    conditions = (
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
        if unschedulable
        else []
    )
    return {"spec": {"nodeName": node} if node else {}, "status": {"conditions": conditions}}


def room(group: dict[str, Any], pods: list[dict[str, Any]], **config: Any) -> int:
    return reconciler(**config)._scheduler_room(group, pods)


def test_a_reconciler_needs_no_manager() -> None:
    r = reconciler()
    assert r.controller is None
    assert set(r.made) == {"serviceaccounts", "roles", "rolebindings"}
    assert r.cluster_pods("ns", "rc") == []


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
    cluster = {"metadata": {"namespace": "ns", "name": "rc"}}
    reconciler(recorder)._announce_workers(cluster, names)
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


# ---------------------------------------------------------------------------- child writes
class Client:
    """Answers each write with ``fail`` when set; ``get`` returns ``have`` or NotFound."""

    def __init__(self, fail: Exception | None = None, have: dict[str, Any] | None = None) -> None:
        self.fail = fail
        self.have = have
        self.calls: list[tuple[str, str]] = []

    async def _write(self, verb: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((verb, obj["metadata"]["name"]))
        if self.fail is not None:
            raise self.fail
        return obj

    async def create(self, resource: Any, obj: dict[str, Any], ns: str | None) -> Any:
        return await self._write("create", obj)

    async def update(self, resource: Any, obj: dict[str, Any]) -> Any:
        return await self._write("update", obj)

    async def get(self, resource: Any, name: str, ns: str) -> Any:
        if self.have is None:
            raise error_for(404, {"reason": "NotFound", "message": "gone"}, "GET", "/x")
        return copy.deepcopy(self.have)


class FullRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, obj: Any, etype: str, reason: str, message: str, action: str = "") -> None:
        self.events.append((etype, reason, message, action))


CLUSTER: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "ns", "uid": "u1"},
    "spec": {
        "headGroupSpec": {
            "enableIngress": True,
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}},
        }
    },
}
ROLE: dict[str, Any] = {"kind": "Role", "metadata": {"name": "rc", "namespace": "ns"}}
ROLE_EVENTS = (CLUSTER, "CreatedRole", "FailedToCreateRole")


def writer(client: Client) -> tuple[RayClusterReconciler, FullRecorder]:
    recorder = FullRecorder()
    r = reconciler(recorder)
    r.client = cast(KubeClient, client)
    return r, recorder


async def test_a_created_child_is_announced_on_the_cluster() -> None:
    r, recorder = writer(Client())
    assert await r._create_if_missing(ROLES, ROLE, ROLE_EVENTS)
    assert recorder.events == [("Normal", "CreatedRole", "Created Role ns/rc", "Create")]


async def test_an_existing_child_is_no_event_and_no_error() -> None:
    exists = error_for(409, {"reason": "AlreadyExists", "message": "exists"}, "POST", "/x")
    r, recorder = writer(Client(fail=exists))
    assert not await r._create_if_missing(ROLES, ROLE, ROLE_EVENTS)
    assert recorder.events == []


async def test_a_failed_create_warns_with_the_server_message_and_raises() -> None:
    denied = error_for(403, {"reason": "Forbidden", "message": "no"}, "POST", "/x")
    r, recorder = writer(Client(fail=denied))
    with pytest.raises(ApiError):
        await r._create_if_missing(ROLES, ROLE, ROLE_EVENTS)
    assert recorder.events == [
        ("Warning", "FailedToCreateRole", "Failed to create Role ns/rc: no", "Create")
    ]
    r, recorder = writer(Client(fail=denied))
    with pytest.raises(ApiError):
        await r._create_if_missing(ROLES, ROLE)  # no events asked for: none recorded
    assert recorder.events == []


async def test_a_child_the_cache_holds_is_not_created_again() -> None:
    client = Client()
    r, _ = writer(client)
    r.made["roles"].informers[0].store.upsert(copy.deepcopy(ROLE))
    assert not await r._create_if_missing(ROLES, ROLE, ROLE_EVENTS)
    assert client.calls == []


async def test_a_drifted_ingress_is_updated_with_one_event_and_a_failure_is_silent() -> None:
    have = {
        "metadata": {
            "name": "rc-head-ingress",
            "namespace": "ns",
            "ownerReferences": [{"uid": "u1"}],
        },
        "spec": {"rules": []},
    }
    r, recorder = writer(Client(have=have))
    await r._reconcile_ingress(copy.deepcopy(CLUSTER))
    assert recorder.events == [
        ("Normal", "UpdatedIngress", "Updated ingress ns/rc-head-ingress", "Update")
    ]
    conflict = error_for(409, {"reason": "Conflict", "message": "stale"}, "PUT", "/x")
    client = Client(fail=conflict, have=have)
    r, recorder = writer(client)
    with pytest.raises(ApiError):
        await r._reconcile_ingress(copy.deepcopy(CLUSTER))
    assert client.calls == [("update", "rc-head-ingress")]
    assert recorder.events == []


async def test_a_missing_cluster_drops_its_expectations() -> None:
    r = reconciler()
    r.expectations.expect_create("ns/rc/", "ns", "rc-head")
    assert not r.expectations.satisfied("ns/rc/")
    assert await r.reconcile(Request("ns", "rc")) is None
    assert r.expectations.satisfied("ns/rc/")


async def test_a_cluster_managed_elsewhere_is_left_alone() -> None:
    client = Client()
    r, recorder = writer(client)
    other = copy.deepcopy(CLUSTER)
    other["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    r.clusters.informers[0].store.upsert(other)
    assert await r.reconcile(Request("ns", "rc")) is None
    assert (client.calls, recorder.events) == ([], [])


def test_status_pace_follows_the_controllers_backlog() -> None:
    """The progress-write pace is read from the wired controller's queue at each decision."""
    from kuberay.controllers import raycluster_status as st
    from kuberay.runtime.controller import Controller

    async def noop(req: Request) -> None:
        return None

    r = reconciler()
    assert r._status_pace() == st.STATUS_PACE_SECONDS  # no controller: the base pace
    ctrl = Controller("raycluster", noop, concurrency=4)
    r.controller = ctrl
    assert r._status_pace() == st.STATUS_PACE_SECONDS
    for i in range(12):
        ctrl.queue.add(f"ns/rc-{i}")
    assert r._status_pace() == pytest.approx(3 * st.STATUS_PACE_SECONDS)
    for i in range(12, 400):
        ctrl.queue.add(f"ns/rc-{i}")
    assert r._status_pace() == st.STATUS_PACE_MAX_SECONDS
