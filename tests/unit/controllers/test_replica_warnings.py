"""A negative worker ``replicas`` is clamped as upstream does, but reported: ``replica_warnings``
names the group, the value given and the value used, and the ``WorkerReplicasAdjusted``
condition carries it while the spec is wrong (only with status conditions enabled)."""

from __future__ import annotations

from typing import Any

import pytest

from kuberay.api import constants as c
from kuberay.api import resources as res
from kuberay.controllers import raycluster_status as st

NOW = "2026-12-01T12:00:00Z"
LATER = "2026-12-01T12:05:00Z"


def group(name: str, replicas: Any, lo: int | None = 0, hi: int | None = 5, **extra: Any) -> Any:
    g: dict[str, Any] = {"groupName": name, "template": {"spec": {"containers": []}}}
    if replicas is not None:
        g["replicas"] = replicas
    if lo is not None:
        g["minReplicas"] = lo
    if hi is not None:
        g["maxReplicas"] = hi
    g.update(extra)
    return g


def cluster(*groups: Any, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "ns", "generation": 1},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": []}}},
            "workerGroupSpecs": list(groups),
        },
        "status": status or {},
    }


@pytest.mark.parametrize(
    ("groups", "want"),
    [
        ([], []),
        ([group("w", 2)], []),
        ([group("w", 0)], []),
        ([group("w", None)], []),
        ([group("w", -2)], ["worker group 'w': replicas -2 is negative, using 0 (minReplicas)"]),
        (
            [group("w", -1, lo=3)],
            ["worker group 'w': replicas -1 is negative, using 3 (minReplicas)"],
        ),
        (
            [group("w", -4, lo=None, hi=None)],
            ["worker group 'w': replicas -4 is negative, using 0 (minReplicas)"],
        ),
        (
            # a suspended group still says what it will run with once resumed
            [group("w", -1, lo=1, suspend=True)],
            ["worker group 'w': replicas -1 is negative, using 1 (minReplicas)"],
        ),
        (
            # min > max is invalid (the reconciler stops before), but the arithmetic follows
            # desired_worker_replicas and says which bound it used
            [group("w", -1, lo=4, hi=2)],
            ["worker group 'w': replicas -1 is negative, using 2 (maxReplicas)"],
        ),
        (
            [group("a", 1), group("b", -3, lo=1, numOfHosts=2), group("c", -1)],
            [
                "worker group 'b': replicas -3 is negative, using 1 (minReplicas)",
                "worker group 'c': replicas -1 is negative, using 0 (minReplicas)",
            ],
        ),
    ],
)
def test_replica_warnings(groups: list[Any], want: list[str]) -> None:
    assert res.replica_warnings(cluster(*groups)) == want


def test_negative_replicas_still_clamp_as_upstream() -> None:
    assert res.desired_worker_replicas(group("w", -2)) == 0
    assert res.desired_worker_replicas(group("w", -2, lo=1)) == 1
    assert res.desired_worker_pods(group("w", -2, lo=1, numOfHosts=2)) == 2


def calc(obj: dict[str, Any], *, conditions: bool = True, now: str = NOW) -> dict[str, Any]:
    return st.calculate_status(
        obj,
        [],
        None,
        reconcile_error=None,
        error_reason=None,
        conditions_enabled=conditions,
        now=now,
    )


@pytest.mark.parametrize(
    ("groups", "want_message"),
    [
        ([group("w", 1)], None),
        ([group("w", -2)], "worker group 'w': replicas -2 is negative, using 0 (minReplicas)"),
        (
            [group("a", -1), group("b", -5, lo=2)],
            "worker group 'a': replicas -1 is negative, using 0 (minReplicas); "
            "worker group 'b': replicas -5 is negative, using 2 (minReplicas)",
        ),
    ],
)
def test_condition_table(groups: list[Any], want_message: str | None) -> None:
    status = calc(cluster(*groups))
    cond = st.find_condition(status["conditions"], c.COND_WORKER_REPLICAS_ADJUSTED)
    if want_message is None:
        assert cond is None
        return
    assert cond is not None
    assert cond["status"] == "True"
    assert cond["reason"] == c.REASON_NEGATIVE_REPLICAS
    assert cond["message"] == want_message
    assert cond["lastTransitionTime"] == NOW


def test_condition_goes_away_when_the_spec_is_fixed() -> None:
    bad = cluster(group("w", -2))
    bad["status"] = calc(bad)
    assert st.find_condition(bad["status"]["conditions"], c.COND_WORKER_REPLICAS_ADJUSTED)
    # unchanged spec: unchanged condition, so no status write
    again = calc(bad, now=LATER)
    assert not st.status_changed(bad["status"], again)
    fixed = cluster(group("w", 1), status=bad["status"])
    status = calc(fixed, now=LATER)
    assert st.find_condition(status["conditions"], c.COND_WORKER_REPLICAS_ADJUSTED) is None
    # other conditions are untouched
    assert st.find_condition(status["conditions"], c.COND_HEAD_POD_READY) is not None


def test_condition_message_follows_a_new_value() -> None:
    bad = cluster(group("w", -2))
    bad["status"] = calc(bad)
    worse = cluster(group("w", -7), status=bad["status"])
    cond = st.find_condition(calc(worse, now=LATER)["conditions"], c.COND_WORKER_REPLICAS_ADJUSTED)
    assert cond is not None
    assert cond["message"] == "worker group 'w': replicas -7 is negative, using 0 (minReplicas)"
    assert cond["lastTransitionTime"] == NOW, "still True: no transition"


def test_no_condition_with_the_gate_off() -> None:
    status = calc(cluster(group("w", -2)), conditions=False)
    assert "conditions" not in status
    assert "reason" not in status, "a clamp is not a reconcile error"
    assert status["desiredWorkerReplicas"] == 0


def test_names_do_not_collide_with_upstream() -> None:
    upstream = {
        c.COND_HEAD_POD_READY,
        c.COND_RAYCLUSTER_PROVISIONED,
        c.COND_REPLICA_FAILURE,
        c.COND_RAYCLUSTER_SUSPENDING,
        c.COND_RAYCLUSTER_SUSPENDED,
    }
    assert c.COND_WORKER_REPLICAS_ADJUSTED not in upstream
    assert c.EVENT_INVALID_REPLICAS == "InvalidReplicas"
