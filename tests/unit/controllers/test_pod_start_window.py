"""The operator-wide start window (``pod_window``): which pods count, how the room follows the
pod cache and the creates in flight, and when a waiting cluster is woken. Caches are real
``ResourceCache``s over standalone informers, fed events by hand (nothing lists or watches)."""

from __future__ import annotations

import copy
import math
import time
from typing import Any, cast

import pytest

from kuberay.controllers.pod_window import (
    PROMISE_SECONDS,
    WINDOW_REQUEUE_MAX_SECONDS,
    WINDOW_REQUEUE_SECONDS,
    PodStartWindow,
    unstarted,
)
from kuberay.controllers.raycluster import (
    DONE,
    WAIT_WINDOW,
    RayClusterCaches,
    RayClusterConfig,
    RayClusterReconciler,
)
from kuberay.runtime import rfc3339
from kuberay.runtime.cache import ResourceCache
from kuberay.runtime.client import PODS, KubeClient, Resource
from kuberay.runtime.controller import Request, Result
from kuberay.runtime.events import EventRecorder
from kuberay.runtime.informer import Informer

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def stamp(seconds_ago: float) -> str:
    return rfc3339.format_time(NOW - seconds_ago)


def pod(
    name: str,
    *,
    node: str = "",
    started: bool = False,
    age: float = 1.0,
    **extra: Any,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running", "startTime": stamp(age)} if started else {}
    status.update(extra.pop("status", {}))
    return {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": stamp(age), **extra},
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }


@pytest.mark.parametrize(
    ("obj", "counts"),
    [
        (pod("new"), True),
        (pod("bound", node="n1"), True),
        (pod("running", node="n1", started=True), False),
        (pod("gone", deletionTimestamp=stamp(0)), False),
        (pod("failed", status={"phase": "Failed"}), False),
        (
            pod(
                "unschedulable",
                status={"conditions": [{"type": "PodScheduled", "status": "False"}]},
            ),
            False,
        ),
        ({**pod("gang"), "spec": {"schedulerName": "volcano"}}, False),
        ({**pod("gang-bound"), "spec": {"schedulerName": "volcano", "nodeName": "n1"}}, True),
        ({**pod("default"), "spec": {"schedulerName": "default-scheduler"}}, True),
    ],
)
def test_which_pods_the_plane_still_owes_a_start(obj: dict[str, Any], counts: bool) -> None:
    assert unstarted(obj) is counts


class Clock:
    def __init__(self) -> None:
        self.wall = NOW
        self.mono = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def window(limit: int = 5, max_age: float = 60.0) -> tuple[PodStartWindow, Informer, Clock]:
    informer = Informer(cast(KubeClient, None), PODS)
    cache = ResourceCache(PODS, [informer])
    clock = Clock()
    win = PodStartWindow(
        cache, limit, max_age, clock=lambda: clock.wall, monotonic=lambda: clock.mono
    )
    return win, informer, clock


def test_room_counts_unstarted_pods_and_creates_not_yet_seen() -> None:
    win, informer, _ = window(limit=5)
    informer._apply("ADDED", pod("a"))
    informer._apply("ADDED", pod("b", node="n1"))
    informer._apply("ADDED", pod("c", node="n1", started=True))
    assert win.room() == 3
    win.reserve("ns", "d")
    assert win.room() == 2
    informer._apply("ADDED", pod("d"))  # seen by the watch: counted once, from the cache
    assert win.room() == 2
    win.reserve("ns", "e")
    win.release("ns", "e")  # refused: it never counts
    assert win.room() == 2


def test_old_unstarted_pods_and_old_grants_stop_counting() -> None:
    """A dead kubelet or a create whose pod never shows must not hold the window forever."""
    win, informer, clock = window(limit=3, max_age=60.0)
    informer._apply("ADDED", pod("stuck", node="dead", age=61.0))
    informer._apply("ADDED", pod("fresh", node="n1", age=5.0))
    win.reserve("ns", "lost")
    assert win.room() == 1
    clock.advance(61.0)
    assert win.room() == 3


def test_waiters_are_woken_in_order_when_enough_pods_start() -> None:
    win, informer, _ = window(limit=20)
    woken: list[str] = []
    win.wake = woken.append
    for i in range(20):
        informer._apply("ADDED", pod(f"p{i}", node="n1"))
    win.wait("ns/first", 10)
    win.wait("ns/second", 3)
    assert win.room() == 0
    for i in range(9):
        informer._apply("MODIFIED", pod(f"p{i}", node="n1", started=True))
    assert woken == []  # 9 free: less than the batch the first waiter asked for
    informer._apply("MODIFIED", pod("p9", node="n1", started=True))
    assert woken == ["ns/first"]  # it takes all 10; the second waits for more room
    # Those 10 are promised to the first until it has created its pods: the second waiter
    # needs 3 more.
    informer._apply("DELETED", pod("p10", node="n1"))
    informer._apply("MODIFIED", pod("p11", node="n1", started=True))
    assert woken == ["ns/first"]
    informer._apply("MODIFIED", pod("p12", node="n1", started=True))
    assert woken == ["ns/first", "ns/second"]
    assert win.room("ns/second") == 3
    win.claimed("ns/first")
    assert win.room("ns/second") == 13
    assert win.waiting() == 0


def test_a_waiter_asking_more_than_the_window_holds_is_woken_when_it_is_empty() -> None:
    win, informer, _ = window(limit=4)
    woken: list[str] = []
    win.wake = woken.append
    for i in range(4):
        informer._apply("ADDED", pod(f"p{i}", node="n1"))
    win.wait("ns/big", 11)
    for i in range(3):
        informer._apply("MODIFIED", pod(f"p{i}", node="n1", started=True))
    assert woken == []
    informer._apply("MODIFIED", pod("p3", node="n1", started=True))
    assert woken == ["ns/big"]


def test_the_waiters_timer_grows_with_the_windows_worth_waiting_ahead() -> None:
    win, informer, _ = window(limit=5)
    woken: list[str] = []
    win.wake = woken.append
    for i in range(5):
        informer._apply("ADDED", pod(f"p{i}", node="n1"))
    assert win.requeue_seconds() == WINDOW_REQUEUE_SECONDS
    win.wait("ns/a", 3)
    win.wait("ns/b", 3)
    assert win.requeue_seconds() == 2 * WINDOW_REQUEUE_SECONDS  # 6 pods: more than a window
    win.wait("ns/a", 2)  # asks less on a later pass: still counted at the most it asked
    assert win.requeue_seconds() == 2 * WINDOW_REQUEUE_SECONDS
    for i in range(3):
        informer._apply("MODIFIED", pod(f"p{i}", node="n1", started=True))
    assert woken == ["ns/a"]
    assert win.requeue_seconds() == WINDOW_REQUEUE_SECONDS  # b's 3 alone
    for i in range(200):
        win.wait(f"ns/many-{i}", 2)
    assert win.requeue_seconds() == WINDOW_REQUEUE_MAX_SECONDS


def test_a_disabled_window_never_limits() -> None:
    win, informer, _ = window(limit=0)
    for i in range(50):
        informer._apply("ADDED", pod(f"p{i}"))
    assert win.room() >= 1 << 30
    assert not win.enabled


# ------------------------------------------------------------------ in the reconciler
class Standalone:
    def cache(self, resource: Resource, **kwargs: Any) -> ResourceCache:
        kwargs.pop("namespaces", None)
        return ResourceCache(resource, [Informer(cast(KubeClient, None), resource, **kwargs)])


class Client:
    def __init__(self) -> None:
        self.created: list[str] = []

    async def create(self, resource: Any, obj: dict[str, Any], ns: str | None) -> Any:
        self.created.append(obj["metadata"]["name"])
        return obj


class Recorder:
    def event(self, *args: Any) -> None:
        pass


CLUSTER: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "ns", "uid": "u1"},
    "spec": {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "g",
                "replicas": 8,
                "minReplicas": 0,
                "maxReplicas": 8,
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "ray"}]}},
            }
        ],
    },
}


def reconciler(limit: int) -> tuple[RayClusterReconciler, Client]:
    client = Client()
    r = RayClusterReconciler(
        cast(KubeClient, client),
        RayClusterConfig(max_unstarted_pods=limit),
        cast(EventRecorder, Recorder()),
        RayClusterCaches.make(Standalone(), None),
    )
    return r, client


def unstarted_strangers(informer: Informer, count: int) -> list[dict[str, Any]]:
    """``count`` unstarted pods of no cluster, already in the pod cache."""
    others = [
        {**pod(f"other-{i}"), "metadata": {**pod(f"other-{i}")["metadata"], "labels": {}}}
        for i in range(count)
    ]
    for other in others:
        informer._apply("ADDED", other)
    return others


async def test_a_group_waits_for_room_for_a_whole_batch() -> None:
    r, client = reconciler(limit=5)
    informer = r.pods.informers[0]
    others = unstarted_strangers(informer, 2)
    cluster = copy.deepcopy(CLUSTER)
    group = cluster["spec"]["workerGroupSpecs"][0]
    # Room for 3 of a batch of 5 (the window's size): no partial batch, wait.
    assert await r._reconcile_group(cluster, group, [], budget=50) == (0, WAIT_WINDOW)
    assert client.created == []
    assert r.window.waiting() == 1
    # Both others start: a whole batch of 5, and a wait for the other 3.
    for other in others:
        informer._apply("MODIFIED", {**other, "status": {"startTime": stamp(0)}})
    assert await r._reconcile_group(cluster, group, [], budget=50) == (5, WAIT_WINDOW)
    assert len(client.created) == 5


async def test_without_a_window_the_group_is_created_whole() -> None:
    r, client = reconciler(limit=0)
    cluster = copy.deepcopy(CLUSTER)
    group = cluster["spec"]["workerGroupSpecs"][0]
    created, _ = await r._reconcile_group(cluster, group, [], budget=50)
    assert created == 8
    assert len(client.created) == 8


async def test_a_missing_head_waits_for_room_for_itself_and_a_first_batch() -> None:
    r, client = reconciler(limit=6)
    informer = r.pods.informers[0]
    for i in range(6):
        informer._apply("ADDED", pod(f"other-{i}"))
    cluster = copy.deepcopy(CLUSTER)
    assert await r._reconcile_head(cluster, []) == WAIT_WINDOW
    assert client.created == []
    assert r.window.waiting() == 1
    # Room for the head and 4 workers of a batch of 5 (window 6, less the head): still waits.
    for i in range(5):
        informer._apply("MODIFIED", pod(f"other-{i}", node="n1", started=True))
    assert await r._reconcile_head(cluster, []) == WAIT_WINDOW
    assert client.created == []
    # Room for both: the head and a whole batch of workers in the same pass.
    informer._apply("MODIFIED", pod("other-5", node="n1", started=True))
    assert await r._reconcile_head(cluster, []) == DONE
    assert await r._reconcile_groups(cluster, [], []) == WAIT_WINDOW
    assert len(client.created) == 6
    assert client.created[0].startswith("rc-head-")


async def test_a_head_without_workers_needs_room_for_itself_only() -> None:
    r, client = reconciler(limit=6)
    informer = r.pods.informers[0]
    for i in range(5):
        informer._apply("ADDED", pod(f"other-{i}"))
    cluster = copy.deepcopy(CLUSTER)
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    cluster["spec"]["workerGroupSpecs"][0]["minReplicas"] = 0
    assert await r._reconcile_head(cluster, []) == DONE
    assert len(client.created) == 1


def room_seen_by_others(r: RayClusterReconciler, client: Client) -> list[int]:
    """Makes each create record the room another cluster's reconcile would find while the
    create is in flight; returns that record."""
    seen: list[int] = []

    async def create(resource: Any, obj: dict[str, Any], ns: str | None) -> Any:
        seen.append(r.window.room("ns/someone-else"))
        client.created.append(obj["metadata"]["name"])
        return obj

    client.create = create  # type: ignore[method-assign]
    return seen


async def test_a_batch_holds_its_room_before_its_first_create_goes_out() -> None:
    r, client = reconciler(limit=5)
    seen = room_seen_by_others(r, client)
    cluster = copy.deepcopy(CLUSTER)
    group = cluster["spec"]["workerGroupSpecs"][0]
    created, _ = await r._reconcile_group(cluster, group, [], budget=50)
    assert created == 5
    assert seen == [0] * 5


def test_held_room_is_kept_from_other_clusters_until_claimed_or_stale() -> None:
    win, _, clock = window(limit=10)
    win.hold("ns/a", 6)
    assert win.room("ns/a") == 10  # its own hold is its to use
    assert win.room("ns/b") == 4
    win.claimed("ns/a")
    assert win.room("ns/b") == 10
    win.hold("ns/a", 6)
    clock.advance(PROMISE_SECONDS + 1)  # a pass that never got to its workers
    assert win.room("ns/b") == 10


async def test_a_head_holds_its_first_batch_while_its_create_is_in_flight() -> None:
    r, client = reconciler(limit=12)
    seen = room_seen_by_others(r, client)
    cluster = copy.deepcopy(CLUSTER)
    assert await r._reconcile_head(cluster, []) == DONE
    # The head in flight (1) and its first batch of 8 set aside: 3 left for anyone else.
    assert seen == [3]
    assert r.window.room("ns/someone-else") == 3
    assert await r._reconcile_groups(cluster, [], []) == DONE
    # The workers' creates count instead of the hold from the first of them on: nothing is
    # counted twice while they go out.
    assert seen == [3] * 9
    assert r.window.room("ns/someone-else") == 3
    assert len(client.created) == 9


async def test_workers_wait_while_their_head_waits_for_the_window() -> None:
    r, client = reconciler(limit=10)
    informer = r.pods.informers[0]
    others = unstarted_strangers(informer, 2)
    cluster = copy.deepcopy(CLUSTER)
    # Room for 8: a whole batch of workers, but not the head with them.
    assert await r._reconcile_pods(cluster) == WAIT_WINDOW
    assert client.created == []
    for other in others:
        informer._apply("MODIFIED", {**other, "status": {"startTime": stamp(0)}})
    assert await r._reconcile_pods(cluster) == DONE
    assert len(client.created) == 9
    assert client.created[0].startswith("rc-head-")


async def test_a_cluster_waiting_without_pods_writes_no_progress() -> None:
    """Its head Service appearing is the only progress before its pods exist: held for the
    write that follows their creation, however long the wait; a first status goes at once."""
    r, client = reconciler(limit=5)
    written: list[dict[str, Any]] = []

    async def update_status(resource: Any, body: dict[str, Any]) -> Any:
        written.append(body)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "2"}}

    client.update_status = update_status  # type: ignore[attr-defined]
    cluster = copy.deepcopy(CLUSTER)
    cluster["metadata"]["resourceVersion"] = "1"
    assert await r._update_status(cluster, None, waiting=True) == (True, 0.0)
    an_hour_ago = rfc3339.format_time(time.time() - 3600)
    cluster["status"] = {**written[0]["status"], "lastUpdateTime": an_hour_ago}
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "rc-head-svc", "namespace": "ns"},
        "spec": {"clusterIP": "10.0.0.1"},
    }
    r.services.informers[0]._apply("ADDED", svc)
    changed, held = await r._update_status(cluster, None, waiting=True)
    assert (changed, held) == (False, math.inf)
    assert len(written) == 1
    # Not waiting (its pods are being made), the same progress is an hour past its pace.
    assert await r._update_status(cluster, None) == (True, 0.0)
    assert written[1]["status"]["head"]["serviceName"] == "rc-head-svc"


def test_only_a_starts_last_pod_turning_ready_is_urgent() -> None:
    """``start_may_be_done``: the urgent-lane predicate for the cluster's pod events."""
    r, _ = reconciler(limit=5)
    informer = r.pods.informers[0]
    labels = {"ray.io/cluster": "rc"}
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    head, worker = (pod(name, labels=labels, started=True) for name in ("rc-head", "rc-w"))
    for each in (head, worker):
        informer._apply("ADDED", each)
    head_ready = {**head, "status": {**head["status"], **ready}}
    informer._apply("MODIFIED", head_ready)
    assert not r.start_may_be_done(head, head_ready), "the worker is not Ready yet"
    worker_ready = {**worker, "status": {**worker["status"], **ready}}
    informer._apply("MODIFIED", worker_ready)
    assert r.start_may_be_done(worker, worker_ready)
    assert not r.start_may_be_done(worker_ready, worker_ready), "no transition"
    stray = pod("stray", started=True)
    assert not r.start_may_be_done(stray, {**stray, "status": ready}), "no cluster label"


async def test_a_cluster_waiting_behind_many_others_is_timed_for_the_longer_wait() -> None:
    r, client = reconciler(limit=2)
    written: list[dict[str, Any]] = []

    async def update_status(resource: Any, obj: dict[str, Any]) -> Any:
        written.append(obj)
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}

    client.update_status = update_status  # type: ignore[attr-defined]
    unstarted_strangers(r.pods.informers[0], 2)
    for i in range(10):
        r.window.wait(f"ns/earlier-{i}", 2)  # ten windows' worth ahead of it
    cluster = {
        **copy.deepcopy(CLUSTER),
        "metadata": {**CLUSTER["metadata"], "resourceVersion": "1"},
    }
    r.clusters.informers[0]._apply("ADDED", cluster)
    result = await r.reconcile(Request("ns", "rc"))
    assert r.window.waiting() == 11
    assert result == Result(requeue_after=r.window.requeue_seconds())
    assert result.requeue_after == WINDOW_REQUEUE_MAX_SECONDS
