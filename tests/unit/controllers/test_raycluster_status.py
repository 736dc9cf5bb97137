"""RayCluster status computation: counters, state latching, conditions, stall reasons."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.controllers import raycluster_status as st
from kuberay.runtime import rfc3339

NOW = "2026-11-29T12:00:00Z"


def cluster(
    replicas: int = 2, suspend: bool = False, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    res = {"limits": {"cpu": "1", "memory": "1Gi"}}
    return {
        "metadata": {"name": "c", "namespace": "ns", "generation": 3},
        "spec": {
            "suspend": suspend,
            "headGroupSpec": {
                "template": {"spec": {"containers": [{"name": "h", "resources": res}]}}
            },
            "workerGroupSpecs": [
                {
                    "groupName": "w",
                    "replicas": replicas,
                    "minReplicas": 1,
                    "maxReplicas": 5,
                    "template": {"spec": {"containers": [{"name": "w", "resources": res}]}},
                }
            ],
        },
        "status": status or {},
    }


def pod(
    name: str, node_type: str, phase: str = "Running", ready: str = "True", **status: Any
) -> dict[str, Any]:
    conds = [{"type": "Ready", "status": ready}]
    return {
        "metadata": {"name": name, "labels": {"ray.io/node-type": node_type}},
        "status": {"phase": phase, "conditions": conds, "podIP": f"10.0.0.{len(name)}", **status},
    }


def calc(
    c: dict[str, Any],
    pods: list[dict[str, Any]],
    svc: dict[str, Any] | None = None,
    err: str | None = None,
) -> dict[str, Any]:
    return st.calculate_status(
        c,
        pods,
        svc,
        reconcile_error=err,
        error_reason="FailedCreateWorkerPod" if err else None,
        conditions_enabled=True,
        now=NOW,
    )


def test_ready_when_all_pods_run_and_latches() -> None:
    pods = [pod("head", "head"), pod("w1", "worker"), pod("w2", "worker")]
    status = calc(cluster(), pods)
    assert status["state"] == "ready"
    assert status["stateTransitionTimes"] == {"ready": NOW}
    assert (status["readyWorkerReplicas"], status["availableWorkerReplicas"]) == (2, 2)
    assert (
        status["desiredWorkerReplicas"],
        status["minWorkerReplicas"],
        status["maxWorkerReplicas"],
    ) == (2, 1, 5)
    assert (status["desiredCPU"], status["desiredMemory"]) == ("3", "3Gi")
    provisioned = st.find_condition(status["conditions"], "RayClusterProvisioned")
    assert provisioned is not None
    assert provisioned["reason"] == "AllPodRunningAndReadyFirstTime"
    # a worker failing later does not clear the state nor the provisioned condition
    later = calc(cluster(status=status), [pod("head", "head"), pod("w1", "worker", phase="Failed")])
    assert later["state"] == "ready"
    assert st.find_condition(later["conditions"], "RayClusterProvisioned")["status"] == "True"  # type: ignore[index]


def test_not_ready_explains_the_stall() -> None:
    unschedulable = pod("w2", "worker", phase="Pending", ready="False")
    unschedulable["status"]["conditions"].append(
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/4 nodes are available",
        }
    )
    pulling = pod("w1", "worker", phase="Pending", ready="False")
    pulling["status"]["containerStatuses"] = [
        {
            "name": "ray-worker",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}},
        }
    ]
    status = calc(cluster(), [pod("head", "head"), pulling, unschedulable])
    assert "state" not in status
    cond = st.find_condition(status["conditions"], "RayClusterProvisioned")
    assert cond is not None
    assert cond["status"] == "False"
    assert "pod w1: container ray-worker: ImagePullBackOff not found" in cond["message"]


def test_a_pod_left_alone_by_its_batch_scheduler_is_named() -> None:
    waiting = {
        "metadata": {"name": "w3"},
        "spec": {"schedulerName": "volcano"},
        "status": {"phase": "Pending"},
    }
    assert st.stall_reason([waiting]) == "pod w3: not yet scheduled by volcano"
    waiting["spec"]["schedulerName"] = "default-scheduler"
    assert st.stall_reason([waiting]) is None  # the default scheduler says why itself


def test_headless_service_ip_is_the_head_pod_ip_and_endpoints() -> None:
    svc = {
        "metadata": {"name": "c-head-svc"},
        "spec": {
            "clusterIP": "None",
            "ports": [
                {"name": "dashboard", "port": 8265, "targetPort": 8265},
                {"name": "client", "port": 10001, "nodePort": 30001},
            ],
        },
    }
    head = pod("head", "head")
    status = calc(cluster(replicas=1), [head, pod("w1", "worker")], svc)
    assert status["head"] == {
        "podIP": head["status"]["podIP"],
        "podName": "head",
        "serviceName": "c-head-svc",
        "serviceIP": head["status"]["podIP"],
    }
    assert status["endpoints"] == {"dashboard": "8265", "client": "30001"}


def test_replica_failure_condition_set_and_cleared() -> None:
    status = calc(cluster(), [pod("head", "head")], err="quota exceeded")
    cond = st.find_condition(status["conditions"], "ReplicaFailure")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "FailedCreateWorkerPod",
        "FailedCreateWorkerPod\nquota exceeded",
    )
    # As upstream: with conditions, status.reason is not the error.
    assert "reason" not in status
    without = st.calculate_status(
        cluster(),
        [pod("head", "head")],
        None,
        reconcile_error="quota exceeded",
        error_reason="FailedCreateWorkerPod",
        conditions_enabled=False,
        now=NOW,
    )
    assert without["reason"] == "quota exceeded"
    healed = calc(cluster(status=status), [pod("head", "head")])
    assert st.find_condition(healed["conditions"], "ReplicaFailure") is None
    assert "reason" not in healed


def test_head_pod_ready_mirrors_container_reason() -> None:
    head = pod("head", "head", ready="False")
    head["status"]["conditions"][0]["reason"] = "ContainersNotReady"
    head["status"]["containerStatuses"] = [
        {
            "name": "ray-head",
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
        }
    ]
    status = calc(cluster(), [head])
    cond = st.find_condition(status["conditions"], "HeadPodReady")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "CrashLoopBackOff")
    missing = calc(cluster(), [])
    assert st.find_condition(missing["conditions"], "HeadPodReady")["reason"] == "HeadPodNotFound"  # type: ignore[index]


def test_status_changed_ignores_timestamps() -> None:
    a = {"state": "ready", "lastUpdateTime": "x", "observedGeneration": 1}
    assert not st.status_changed(
        a, {"state": "ready", "lastUpdateTime": "y", "observedGeneration": 2}
    )
    assert st.status_changed(a, {"state": "suspended"})


def test_suspended_cluster_with_no_pods() -> None:
    status = calc(cluster(suspend=True, status={"state": "ready"}), [])
    assert status["state"] == "suspended"
    assert status["desiredWorkerReplicas"] == 2


def _conds(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        co["type"]: (co["status"], co["reason"], co["message"])
        for co in status["conditions"]
        if co["type"].startswith("RayClusterSuspend")
    }


SUS, SING = "RayClusterSuspended", "RayClusterSuspending"
RUNNING = [pod("h", "head"), pod("w1", "worker"), pod("w2", "worker")]


@pytest.mark.parametrize(
    ("suspend", "before", "pods", "after"),
    [
        # First status of a normal cluster: both exist, False, reason = type, no message.
        (False, {}, [], {SUS: "False", SING: "False"}),
        (False, {}, RUNNING, {SUS: "False", SING: "False"}),
        # Suspend requested: Suspending first, while pods still exist.
        (True, {SUS: "False", SING: "False"}, RUNNING, {SUS: "False", SING: "True"}),
        (True, {}, RUNNING, {SUS: "False", SING: "True"}),
        # Still deleting: unchanged.
        (True, {SUS: "False", SING: "True"}, RUNNING[:1], {SUS: "False", SING: "True"}),
        # Every pod gone: Suspended.
        (True, {SUS: "False", SING: "True"}, [], {SUS: "True", SING: "False"}),
        # Suspend cleared while suspending: deletion finishes first (as upstream).
        (False, {SUS: "False", SING: "True"}, RUNNING[:1], {SUS: "False", SING: "True"}),
        (False, {SUS: "False", SING: "True"}, [], {SUS: "True", SING: "False"}),
        # Resumed.
        (False, {SUS: "True", SING: "False"}, [], {SUS: "False", SING: "False"}),
        (True, {SUS: "True", SING: "False"}, [], {SUS: "True", SING: "False"}),
    ],
)
def test_suspend_state_machine(
    suspend: bool, before: dict[str, str], pods: list[dict[str, Any]], after: dict[str, str]
) -> None:
    old = [
        {"type": t, "status": s, "reason": t, "message": "", "lastTransitionTime": "x"}
        for t, s in before.items()
    ]
    status = calc(cluster(suspend=suspend, status={"conditions": old}), pods)
    assert _conds(status) == {t: (s, t, "") for t, s in after.items()}
    if after[SUS] == "True" and before.get(SUS) != "True":
        assert status["state"] == "suspended"
        prov = [co for co in status["conditions"] if co["type"] == "RayClusterProvisioned"]
        assert prov[0]["message"] == "RayCluster has been suspended"


def test_suspend_conditions_follow_upstream_order() -> None:
    status = calc(cluster(), RUNNING)
    assert [co["type"] for co in status["conditions"]] == [
        "HeadPodReady",
        "RayClusterProvisioned",
        SUS,
        SING,
    ]


@pytest.mark.parametrize(
    ("conditions_enabled", "old_status", "want_condition", "want_reason"),
    [
        (True, {}, True, None),
        (True, {"state": "ready", "reason": "kept"}, True, "kept"),
        (False, {}, False, "worker group g has minReplicas 3 greater than maxReplicas 2"),
    ],
)
def test_invalid_spec_status(
    conditions_enabled: bool, old_status: dict[str, Any], want_condition: bool, want_reason: Any
) -> None:
    cluster = {"metadata": {"generation": 4}, "spec": {}, "status": old_status}
    msg = "worker group g has minReplicas 3 greater than maxReplicas 2"
    new = st.invalid_spec_status(
        cluster, "InvalidRayClusterSpec", msg, conditions_enabled=conditions_enabled, now="T"
    )
    cond = st.find_condition(new.get("conditions") or [], "ValidationFailed")
    assert (cond is not None) is want_condition
    if want_condition:
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "True",
            "InvalidRayClusterSpec",
            msg,
        )
    assert new.get("reason") == want_reason
    assert new["observedGeneration"] == 4
    assert new.get("state") == old_status.get("state"), "nothing else changes"
    assert cluster["status"] == old_status, "the input is not modified"


@pytest.mark.parametrize(
    ("status", "want"),
    [
        (None, False),
        ({}, False),
        ({"conditions": None}, False),
        ({"conditions": [{"type": "RayClusterSuspended", "status": "True"}]}, False),
        ({"conditions": [{"type": "RayClusterSuspending", "status": "False"}]}, False),
        ({"conditions": [{"type": "RayClusterSuspending", "status": "True"}]}, True),
    ],
)
def test_suspending_reads_the_condition(status: dict[str, Any] | None, want: bool) -> None:
    assert st.suspending({"metadata": {}, "status": status}) is want


# ---------------------------------------------------------------------- paced progress writes

LAST = "2026-11-29T12:00:00Z"
T0 = 1795953600.0  # LAST as seconds since the epoch


def _cond(ctype: str, status: str, reason: str = "R", message: str = "m") -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def _base() -> dict[str, Any]:
    return {
        "state": "",
        "readyWorkerReplicas": 0,
        "availableWorkerReplicas": 0,
        "desiredWorkerReplicas": 10,
        "lastUpdateTime": LAST,
        "observedGeneration": 1,
        "conditions": [
            _cond("HeadPodReady", "False", "HeadPodNotFound"),
            _cond("RayClusterProvisioned", "False", "RayClusterPodsProvisioning", "provisioning"),
        ],
    }


def _with(**changes: Any) -> dict[str, Any]:
    out = _base()
    out.update(changes)
    return out


def _conditions(head: str, prov: str, prov_message: str = "provisioning") -> list[Any]:
    reason = "AllPodRunningAndReadyFirstTime" if prov == "True" else "RayClusterPodsProvisioning"
    return [
        _cond("HeadPodReady", head, "HeadPodRunningAndReady" if head == "True" else "X"),
        _cond("RayClusterProvisioned", prov, reason, prov_message),
    ]


@pytest.mark.parametrize(
    ("old", "new", "now", "want"),
    [
        # progress only, 1 s after the last write: wait the other 4 s
        (_base(), _with(readyWorkerReplicas=3, availableWorkerReplicas=3), T0 + 1, 4.0),
        (_base(), _with(head={"podIP": "10.0.0.1"}), T0 + 2, 3.0),
        (_base(), _with(conditions=_conditions("True", "False")), T0 + 1, 4.0),
        (_base(), _with(conditions=_conditions("False", "False", "provisioning; pod x")), T0, 5.0),
        # the pace has passed: write
        (_base(), _with(readyWorkerReplicas=3), T0 + 5, 0.0),
        (_base(), _with(readyWorkerReplicas=3), T0 + 60, 0.0),
        # written at once: the first status, state, spec-driven fields, other conditions
        (None, _base(), T0, 0.0),
        ({}, _base(), T0, 0.0),
        (_base(), _with(state="ready", readyWorkerReplicas=10), T0 + 1, 0.0),
        (_base(), _with(desiredWorkerReplicas=12), T0 + 1, 0.0),
        (_base(), _with(reason="boom"), T0 + 1, 0.0),
        (_base(), _with(conditions=_conditions("True", "True")), T0 + 1, 0.0),
        (
            _base(),
            _with(conditions=[*_base()["conditions"], _cond("ReplicaFailure", "True")]),
            T0 + 1,
            0.0,
        ),
        # no time of the last write known
        (
            {k: v for k, v in _base().items() if k != "lastUpdateTime"},
            _with(readyWorkerReplicas=1),
            T0,
            0.0,
        ),
    ],
    ids=[
        "counters",
        "head-ip",
        "head-ready",
        "stall-message",
        "pace-passed",
        "long-after",
        "first-none",
        "first-empty",
        "state",
        "desired",
        "reason",
        "provisioned",
        "failure",
        "no-last-write",
    ],
)
def test_status_write_delay(
    old: dict[str, Any] | None, new: dict[str, Any], now: float, want: float
) -> None:
    assert st.status_write_delay(old, new, now) == pytest.approx(want)


def _at(seconds: float) -> str:
    return rfc3339.format_time(T0 + seconds)


@pytest.mark.parametrize(
    ("created", "now", "want"),
    [
        # pods created 60 s after the last write: their progress waits for the longest pace
        # after the first of them, however the pace stands
        ([_at(60), _at(61)], T0 + 62, 60 + st.STATUS_PACE_MAX_SECONDS - 62),
        ([_at(60), _at(61)], T0 + 89, 1.0),
        ([_at(60), _at(61)], T0 + 90, 0.0),
        # pods created without pause: the first of them sets the deadline
        ([_at(60), _at(75), _at(88)], T0 + 89, 60 + st.STATUS_PACE_MAX_SECONDS - 89),
        ([_at(60), _at(75), _at(88)], T0 + 60 + st.STATUS_PACE_MAX_SECONDS, 0.0),
        # pods from before the last write (or its second) change nothing
        ([_at(-100), _at(0)], T0 + 1, 4.0),
        ([], T0 + 1, 4.0),
    ],
    ids=[
        "after-new-pods",
        "nearly",
        "pace-passed",
        "long-scale-up",
        "capped",
        "older-pods",
        "no-pods",
    ],
)
def test_progress_is_paced_from_pods_created_since_the_last_write(
    created: list[str], now: float, want: float
) -> None:
    new = _with(conditions=_conditions("True", "False"))
    assert st.status_write_delay(_base(), new, now, created=created) == pytest.approx(want)
    # Anything but progress is still written at once.
    assert st.status_write_delay(_base(), _with(state="ready"), now, created=created) == 0.0


@pytest.mark.parametrize(
    ("ready", "head", "want"),
    [
        (10, "True", 0.0),  # every pod Ready: the end of the start goes at once
        (10, None, 0.0),  # conditions off: the workers are all there is to go by
        (10, "False", 60 + st.STATUS_PACE_MAX_SECONDS - 62),  # the head is not Ready yet
        (9, "True", 60 + st.STATUS_PACE_MAX_SECONDS - 62),
    ],
    ids=["all-ready", "no-conditions", "head-not-ready", "one-short"],
)
def test_new_pods_all_ready_are_written_at_once(ready: int, head: str | None, want: float) -> None:
    """A scale-up of a ready cluster has no state change to mark its end: reaching every
    desired worker Ready is that mark."""
    conditions = _conditions(head, "True") if head else []
    old = _with(state="ready", readyWorkerReplicas=5, conditions=conditions)
    new = _with(state="ready", readyWorkerReplicas=ready, conditions=conditions)
    if not head:
        old.pop("conditions")
        new.pop("conditions")
    got = st.status_write_delay(old, new, T0 + 62, created=[_at(60), _at(61)])
    assert got == pytest.approx(want)


@pytest.mark.parametrize(
    ("detail", "stall"),
    [
        ("pod rc-head-x: Unschedulable: 0/3 nodes are available", True),
        ("pod rc-w-1: container ray-worker: ImagePullBackOff Back-off pulling image", True),
        ("pod rc-w-1: container ray-worker exited with code 1 (Error)", True),
        ("pod rc-w-1: container ray-worker: ContainerCreating", False),
        (None, False),
    ],
    ids=["unschedulable", "image-pull", "exited", "starting", "no-detail"],
)
def test_a_stuck_pod_keeps_the_plain_pace_behind_new_pods(detail: str | None, stall: bool) -> None:
    message = f"{st.MSG_PROVISIONING}; {detail}" if detail else st.MSG_PROVISIONING
    new = _with(conditions=_conditions("False", "False", message))
    assert st.names_a_stall(new) is stall
    got = st.status_write_delay(_base(), new, T0 + 62, created=[_at(60), _at(61)])
    # The pace from the last write (5 s) is long past; a start's progress waits for 60 + 30.
    assert got == pytest.approx(0.0 if stall else 60 + st.STATUS_PACE_MAX_SECONDS - 62)


def test_status_pace_zero_never_holds() -> None:
    assert st.status_write_delay(_base(), _with(readyWorkerReplicas=1), T0, pace=0) == 0.0


@pytest.mark.parametrize(
    ("backlog", "workers", "want"),
    [
        (0, 8, st.STATUS_PACE_SECONDS),  # idle
        (8, 8, st.STATUS_PACE_SECONDS),  # one key per worker: keeping up
        (16, 8, 2 * st.STATUS_PACE_SECONDS),  # two per worker: twice the pace
        (20, 8, 2.5 * st.STATUS_PACE_SECONDS),
        (1000, 8, st.STATUS_PACE_MAX_SECONDS),  # a burst: capped
        (3, 0, 3 * st.STATUS_PACE_SECONDS),  # no workers counts as one
        (-1, 8, st.STATUS_PACE_SECONDS),
    ],
    ids=["idle", "keeping-up", "double", "fraction", "capped", "zero-workers", "negative"],
)
def test_status_pace_grows_with_backlog(backlog: int, workers: int, want: float) -> None:
    assert st.status_pace(backlog, workers) == pytest.approx(want)


def test_status_pace_bounds() -> None:
    assert st.status_pace(1000, 1, base=0) == 0.0  # pacing off stays off
    assert st.status_pace(1000, 1, base=40.0, ceiling=30.0) == 40.0  # never below the base
    # A paced write under a deep backlog waits for the longer pace, then goes.
    pace = st.status_pace(1000, 8)
    new = _with(readyWorkerReplicas=3)
    assert st.status_write_delay(_base(), new, T0 + 10, pace) == pytest.approx(pace - 10)
    assert st.status_write_delay(_base(), new, T0 + pace, pace) == 0.0
    # A state change is written at once whatever the backlog.
    assert st.status_write_delay(_base(), _with(state="ready"), T0 + 1, pace) == 0.0
